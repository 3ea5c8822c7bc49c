"""Vertex AI: a channel's Google Cloud project and region, its service account, and the OAuth
access token minted from it.

A Vertex channel (`vertex: {project, region}` in the channels document, `docs/channels.md`)
holds a service-account key file (the JSON Google Cloud hands out) as its key. Its requests go to
the regional host `https://{region}-aiplatform.googleapis.com` (`aiplatform.googleapis.com` for
`global`), under `/v1/projects/{project}/locations/{region}/publishers/google/models/{model}`,
with `Authorization: Bearer <access token>` (Vertex AI REST reference; new-api's
`relay/channel/vertex/url_builder.go` builds the same addresses).

The token comes from google-auth (`google.oauth2.service_account.Credentials`: a JWT signed with
the key, exchanged at the key's `token_uri`, RFC 7523). It lives an hour; each instance keeps it
until `TOKEN_MARGIN` before it expires, and one refresh per service account runs at a time: a
burst of requests after expiry waits for that one instead of each asking Google.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from gateway.upstreams.errors import ACCOUNT, UPSTREAM, UpstreamError

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: Seconds before its expiry a token is refreshed (a request begun with it must still be valid).
TOKEN_MARGIN = 300.0
_REGION = re.compile(r"^(global|[a-z]+(?:-[a-z0-9]+)+)$")
_TOKEN_TIMEOUT = httpx.Timeout(10.0, connect=3.0)


@dataclass(frozen=True)
class VertexSite:
    """Where a Vertex channel's models live."""

    project: str
    region: str

    @property
    def host_url(self) -> str:
        return ("https://aiplatform.googleapis.com" if self.region == "global"
                else f"https://{self.region}-aiplatform.googleapis.com")

    def model_path(self, model: str, action: str) -> str:
        return (f"/v1/projects/{quote(self.project, safe='')}/locations/{quote(self.region, safe='')}"
                f"/publishers/google/models/{quote(model.removeprefix('models/'), safe='')}:{action}")


def valid_region(region: str) -> bool:
    return bool(_REGION.fullmatch(region))


def service_account_info(api_key: str) -> dict[str, Any]:
    """The service-account key file a Vertex channel holds, checked; ValueError naming what is wrong."""
    try:
        info = json.loads(api_key)
    except ValueError:
        raise ValueError("a vertex channel's key must be a service-account key file (JSON)") from None
    if not isinstance(info, dict) or info.get("type") != "service_account":
        raise ValueError('a vertex channel\'s key must be a service-account key file ("type": "service_account")')
    missing = [name for name in ("client_email", "private_key", "token_uri") if not isinstance(info.get(name), str)
               or not info[name]]
    if missing:
        raise ValueError(f"the service-account key file lacks {', '.join(missing)}")
    return info


# ---- google-auth's transport over httpx -----------------------------------------------------------

def _transport():  # google-auth imported only when a Vertex token is made
    import google.auth.exceptions
    import google.auth.transport

    class Response(google.auth.transport.Response):
        def __init__(self, response: httpx.Response):
            self._response = response

        @property
        def status(self) -> int:
            return self._response.status_code

        @property
        def headers(self) -> Any:
            return self._response.headers

        @property
        def data(self) -> bytes:
            return self._response.content

    class Request(google.auth.transport.Request):
        """google-auth's HTTP seam, over one small httpx client (token exchanges are rare)."""

        def __init__(self, http: httpx.Client):
            self._http = http

        def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None,
                     timeout: Any = None, **kwargs: Any) -> Response:
            try:
                return Response(self._http.request(method, url, content=body, headers=headers,
                                                   timeout=_TOKEN_TIMEOUT if timeout is None else timeout))
            except httpx.HTTPError as exc:
                raise google.auth.exceptions.TransportError(f"{type(exc).__name__}: {exc}") from exc

    return Request


@dataclass
class _Entry:
    credentials: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = ""
    good_until: float = 0.0  # when the token is no longer handed out (its expiry less the margin)


class TokenCache:
    """Access tokens by service account: cached until `TOKEN_MARGIN` before expiry, refreshed
    by one caller at a time per service account."""

    def __init__(self, *, clock: Callable[[], float] = time.time, http: httpx.Client | None = None):
        self.clock = clock
        self._http = http
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self.refreshes = 0  # token exchanges made (tests count them)

    def _entry(self, api_key: str) -> _Entry:
        name = hashlib.sha256(api_key.encode()).hexdigest()
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                from google.oauth2 import service_account

                try:
                    credentials = service_account.Credentials.from_service_account_info(
                        service_account_info(api_key), scopes=[SCOPE])
                except ValueError as exc:
                    raise UpstreamError(401, f"the channel's service account cannot be used: {exc}",
                                        fault=ACCOUNT) from None
                entry = self._entries[name] = _Entry(credentials)
            return entry

    def fresh(self, api_key: str) -> str | None:
        """The cached token while it is good, else None (never a network call)."""
        entry = self._entries.get(hashlib.sha256(api_key.encode()).hexdigest())
        return entry.token if entry is not None and entry.token and self.clock() < entry.good_until else None

    def token(self, api_key: str) -> str:
        """A valid access token for the service account in `api_key` (blocking: a refresh is an
        HTTP exchange with the key's `token_uri`)."""
        entry = self._entry(api_key)
        if entry.token and self.clock() < entry.good_until:
            return entry.token
        with entry.lock:  # one refresh per service account; the others wait and reuse it
            if entry.token and self.clock() < entry.good_until:
                return entry.token
            self._refresh(entry)
            return entry.token

    async def token_async(self, api_key: str) -> str:
        """`token` for an event loop: the cached token at once, a refresh on a worker thread."""
        cached = self.fresh(api_key)
        return cached if cached is not None else await asyncio.to_thread(self.token, api_key)

    def _refresh(self, entry: _Entry) -> None:
        import google.auth.exceptions

        http = self._http or _shared_http()
        self.refreshes += 1
        started = self.clock()
        try:
            entry.credentials.refresh(_transport()(http))
        except google.auth.exceptions.RefreshError as exc:
            # The token endpoint refused the key (invalid_grant: a deleted key, a disabled
            # account, a bad signature): the channel's account. Its own trouble (retryable): not.
            retryable = bool(getattr(exc, "retryable", False))
            raise UpstreamError(503 if retryable else 401, f"the OAuth token endpoint refused the channel's service "
                                f"account: {_first_line(exc)}", fault=UPSTREAM if retryable else ACCOUNT) from None
        except google.auth.exceptions.TransportError as exc:
            raise UpstreamError(None, f"the OAuth token endpoint could not be reached: {_first_line(exc)}",
                                retryable=True) from None
        lifetime = _seconds_left(entry.credentials.expiry)
        entry.token = str(entry.credentials.token)
        entry.good_until = started + max(0.0, lifetime - TOKEN_MARGIN)


def _seconds_left(expiry: Any) -> float:
    """Seconds until google-auth's `expiry` (a naive UTC datetime from the answer's `expires_in`),
    an hour if the answer named none."""
    if expiry is None:
        return 3600.0
    from datetime import UTC

    return expiry.replace(tzinfo=UTC).timestamp() - time.time()


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


_http_client: httpx.Client | None = None


def _shared_http() -> httpx.Client:
    global _http_client
    if _http_client is None:
        _http_client = httpx.Client(timeout=_TOKEN_TIMEOUT)
    return _http_client


_tokens = TokenCache()


def tokens() -> TokenCache:
    """This instance's token cache."""
    return _tokens
