"""What a route of a streaming function (an ASGI app under the Lambda Web Adapter) is handed and
answers, whatever the family: the request as received, an answer ready to write, and the one
mechanism that keeps a slow JSON answer alive (`patiently`, `PatientAnswer`).

A JSON answer sends nothing until the work behind it is done. API Gateway's streaming
integration closes a connection idle for 5 minutes (regional endpoints; AWS's "Stream the
integration response for your proxy integrations in API Gateway"), so past the keep-alive
interval (`GATEWAY_BUFFERED_KEEPALIVE_SECONDS`) the answer is committed as a 200 and a space is
sent every interval: JSON allows whitespace before a value (RFC 8259, section 2), and every SDK's
parser skips it (json.loads in openai, anthropic and google-genai).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from gateway import observability
from gateway.observability import logger

Send = Callable[[bytes], Awaitable[None]]
JSON_TYPE = "application/json"


@dataclass(frozen=True)
class Inbound:
    """One HTTP request as a streaming function received it."""

    path: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    body: bytes
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    proxy: str | None = None  # the {proxy+} of /v1beta/models/{proxy+}


class Ready(Protocol):
    """A committed answer: `status` and `headers` are final; `send_to` writes the body (and bills)."""

    status: int
    headers: dict[str, str]

    def limit_headers(self) -> dict[str, str]: ...

    async def send_to(self, send: Send) -> None: ...

    async def unsent(self) -> None:
        """Settles an answer whose client left before it was sent."""


class SettledAnswer:
    """A JSON body whose bill is already written (the work ran to its end, billed, then answered)."""

    def __init__(self, body: Any, status: int = 200, headers: Mapping[str, str] | None = None):
        self.payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        self.status = status
        self.headers = {"content-type": JSON_TYPE, "content-length": str(len(self.payload)), **(headers or {})}

    def limit_headers(self) -> dict[str, str]:
        return {}

    async def send_to(self, send: Send) -> None:
        await send(self.payload)

    async def unsent(self) -> None:
        """Nothing to do: the bill was written before the answer was made."""


#: What keeps a JSON answer alive: whitespace before the value.
BUFFERED_KEEP_ALIVE = b" "


class PatientAnswer:
    """A JSON answer still on its way after the keep-alive interval: committed at once as a 200
    JSON answer, a space every interval while the work goes on, then the body.

    An error that comes after the commit can no longer change the status: its envelope (the
    route's family's, as any error) is the body, and everything was refunded. A client that goes
    away meanwhile does not stop the work being awaited: it is billed what the upstream charged
    for it, which the upstream charges whether or not anyone reads it, and no more (`unsent`)."""

    status = 200

    def __init__(self, waiting: asyncio.Future[Any], *, route: str, request_id: str, interval: float,
                 limit_headers: Callable[[], dict[str, str]] = dict):
        self.waiting, self.route, self.request_id, self.interval = waiting, route, request_id, interval
        self._limit_headers = limit_headers
        self.headers = {"content-type": JSON_TYPE}

    def limit_headers(self) -> dict[str, str]:
        return self._limit_headers()

    async def send_to(self, send: Send) -> None:
        from gateway.errors import GatewayError, dialect_for_path, render

        try:
            while not (await asyncio.wait({self.waiting}, timeout=self.interval))[0]:
                await send(BUFFERED_KEEP_ALIVE)
        except BaseException:
            with anyio.CancelScope(shield=True):  # the client left: bill what the upstream charged
                await _bill_unsent(self.waiting)
            raise
        try:
            answer = self.waiting.result()
        except Exception as failure:
            observability.note_error(failure)
            error = failure if isinstance(failure, GatewayError) else \
                GatewayError("internal error; quote the request id when reporting it")
            if not isinstance(failure, GatewayError):
                logger.exception("unexpected error", extra={"request_id": self.request_id})
            rendered = render(error, dialect_for_path(self.route), self.request_id)
            await send(json.dumps(rendered.body, separators=(",", ":")).encode())
            return
        await answer.send_to(send)


async def _bill_unsent(waiting: asyncio.Future[Any]) -> None:
    await asyncio.wait({waiting})
    if not waiting.cancelled() and waiting.exception() is None:
        await waiting.result().unsent()


async def patiently(answering: Awaitable[Any], *, route: str, request_id: str, interval: float,
                    limit_headers: Callable[[], dict[str, str]] = dict, stoppable: bool = True) -> Any:
    """The answer `answering` makes when it comes within `interval`, else a `PatientAnswer` for it.

    A client that leaves before anything was sent: a `stoppable` work (a coroutine that refunds
    when cancelled) is cancelled; any other (a worker thread that cannot be stopped, whose upstream
    goes on and charges) is awaited and billed what the upstream charged, never abandoned."""
    waiting = asyncio.ensure_future(answering)
    try:
        done, _ = await asyncio.wait({waiting}, timeout=interval)
    except BaseException:
        if stoppable:
            waiting.cancel()
        with anyio.CancelScope(shield=True):
            if stoppable:
                await asyncio.wait({waiting})
            else:
                await _bill_unsent(waiting)
        raise
    if done:
        return waiting.result()
    return PatientAnswer(waiting, route=route, request_id=request_id, interval=interval,
                         limit_headers=limit_headers)
