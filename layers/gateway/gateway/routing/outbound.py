"""The one pooled `httpx.AsyncClient` through which every function calls upstreams.

Upstream clients are async (`upstreams/<protocol>.py`); the buffered handlers, the task engine
and the callback sender are sync. Neither `asyncio.run` per request nor a client per request
will do: a pooled `AsyncClient` is bound to the loop it first ran on, so reusing it across
`asyncio.run` calls breaks, and a client per request throws away its connections (and TLS
handshakes) every time. So an execution environment keeps one loop running in a daemon thread
and one client on it, both made on first use; `run` hands a coroutine to that loop and waits for
its result, and `sync_client` is the same client for code that sends a built `httpx.Request`. It
is safe from several threads (the local runner serves requests concurrently); under Lambda there
is only ever one. The streaming text function, which runs on its own event loop, takes that
loop's client from `client()`.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx

T = TypeVar("T")

# Each call passes its own timeout; this is only the fallback of a call that does not.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=3.0)
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50, keepalive_expiry=30.0)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
# One client per event loop, each only touched from its own loop; gone with its loop.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="gateway-upstreams", daemon=True)
            _thread.start()
        return _loop


def client() -> httpx.AsyncClient:
    """The pooled client of the running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = _clients[loop] = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, limits=LIMITS, follow_redirects=False)
    return found


async def _with_client(call: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    return await call(client())


def run(call: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    """`await call(client)` on the shared loop with the shared client; its result or its exception."""
    return asyncio.run_coroutine_threadsafe(_with_client(call), _running_loop()).result()


class SyncClient:
    """The shared client for synchronous code that builds its own `httpx.Request` (task adapters,
    callbacks): `send` runs it on the shared loop and returns the whole answer. The request's
    own timeout applies (a built request should carry one), else `DEFAULT_TIMEOUT`."""

    def send(self, request: httpx.Request) -> httpx.Response:
        request.extensions.setdefault("timeout", DEFAULT_TIMEOUT.as_dict())
        return run(lambda http: http.send(request))


#: The shared client's synchronous face.
sync_client = SyncClient()
