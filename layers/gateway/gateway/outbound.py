"""The one event loop and `httpx.AsyncClient` through which buffered functions call upstreams.

Upstream clients are async (`upstreams/<protocol>.py`), the buffered handlers are sync. Neither
`asyncio.run` per request nor a client per request will do: a pooled `AsyncClient` is bound to
the loop it first ran on, so reusing it across `asyncio.run` calls breaks, and a client per
request throws away its connections (and TLS handshakes) every time. So an execution environment
keeps one loop running in a daemon thread and one client on it, both made on first use; `run`
hands a coroutine to that loop and waits for its result. It is safe from several threads (the
local runner serves requests concurrently); under Lambda there is only ever one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx

T = TypeVar("T")

# Each call passes its own timeout; this is only the fallback of a call that does not.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=3.0)
LIMITS = httpx.Limits(max_connections=32, max_keepalive_connections=16, keepalive_expiry=30.0)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_client: httpx.AsyncClient | None = None  # only touched from the loop's own thread


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="gateway-upstreams", daemon=True)
            _thread.start()
        return _loop


def _http() -> httpx.AsyncClient:
    global _client
    if _client is None or _client.is_closed:
        _client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, limits=LIMITS, follow_redirects=False)
    return _client


async def _with_client(call: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    return await call(_http())


def run(call: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    """`await call(client)` on the shared loop with the shared client; its result or its exception."""
    return asyncio.run_coroutine_threadsafe(_with_client(call), _running_loop()).result()
