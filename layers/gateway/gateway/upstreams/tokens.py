"""Access tokens minted from a channel's credentials (a Vertex service account, an Entra ID
service principal): what every such cache shares.

A token lives about an hour. Each instance keeps it until `TOKEN_MARGIN` before it expires, and
one refresh per credential runs at a time: a burst of requests after expiry waits for that one
instead of each asking the token endpoint. A subclass says how a credential is read (`prepare`,
once per credential) and how a token is exchanged for it (`exchange`).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

#: Seconds before its expiry a token is refreshed (a request begun with it must still be valid).
TOKEN_MARGIN = 300.0
TOKEN_TIMEOUT = httpx.Timeout(10.0, connect=3.0)


@dataclass
class _Entry:
    state: Any  # what `prepare` made of the credential
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = ""
    good_until: float = 0.0  # when the token is no longer handed out (its expiry less the margin)


class TokenCache:
    """Access tokens by credential: cached until `TOKEN_MARGIN` before expiry, refreshed by one
    caller at a time per credential."""

    def __init__(self, *, clock: Callable[[], float] = time.time, http: httpx.Client | None = None):
        self.clock = clock
        self._http = http
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self.refreshes = 0  # token exchanges made (tests count them)

    # --- what a kind of credential defines ------------------------------------------------------

    def prepare(self, api_key: str) -> Any:
        """The credential in `api_key`, read once (an `UpstreamError` when it cannot be used)."""
        raise NotImplementedError

    def exchange(self, state: Any, http: httpx.Client) -> tuple[str, float]:
        """A new token for the credential and the seconds it lives (an `UpstreamError` if refused)."""
        raise NotImplementedError

    # --- the cache ------------------------------------------------------------------------------

    def _entry(self, api_key: str) -> _Entry:
        name = hashlib.sha256(api_key.encode()).hexdigest()
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                entry = self._entries[name] = _Entry(self.prepare(api_key))
            return entry

    def fresh(self, api_key: str) -> str | None:
        """The cached token while it is good, else None (never a network call)."""
        entry = self._entries.get(hashlib.sha256(api_key.encode()).hexdigest())
        return entry.token if entry is not None and entry.token and self.clock() < entry.good_until else None

    def token(self, api_key: str) -> str:
        """A valid access token for the credential in `api_key` (blocking: a refresh is an HTTP
        exchange with the token endpoint)."""
        entry = self._entry(api_key)
        if entry.token and self.clock() < entry.good_until:
            return entry.token
        with entry.lock:  # one refresh per credential; the others wait and reuse it
            if entry.token and self.clock() < entry.good_until:
                return entry.token
            self.refreshes += 1
            started = self.clock()
            token, lifetime = self.exchange(entry.state, self._http or shared_http())
            entry.token, entry.good_until = token, started + max(0.0, lifetime - TOKEN_MARGIN)
            return entry.token

    async def token_async(self, api_key: str) -> str:
        """`token` for an event loop: the cached token at once, a refresh on a worker thread."""
        cached = self.fresh(api_key)
        return cached if cached is not None else await asyncio.to_thread(self.token, api_key)


def first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


_http_client: httpx.Client | None = None


def shared_http() -> httpx.Client:
    """One small client for every token exchange of this instance (they are rare)."""
    global _http_client
    if _http_client is None:
        _http_client = httpx.Client(timeout=TOKEN_TIMEOUT)
    return _http_client
