"""What the routes priced by a unit of their own share (rerank, moderations, transcriptions and
translations): a JSON (or text) answer billed to what the upstream reported, never above its hold.

A route prepares a `Metered` (the key checked, the body parsed, the hold taken) and hands
`serve` the attempt to make on each channel; an attempt returns a `MeteredAnswer` with the units
it settles to. Failing over, refunding when every channel failed or the client left first, and
keeping a slow answer alive are the same as for embeddings (`api/text`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx

from gateway import auth
from gateway.admission import billing
from gateway.api.answers import Inbound, patiently
from gateway.api.text import Answer, BufferedAnswer, Served, TextCall, _limit_headers
from gateway.formats.usage import Usage
from gateway.prices import Price
from gateway.routing.channel import Channel
from gateway.routing.failover import first_success_async
from gateway.routing.outbound import client as http_client
from gateway.settings import get_settings
from gateway.store.aws import here_unless_it_waits


@dataclass
class Metered:
    """A request that passed its rules and holds `reservation`."""

    call: TextCall
    principal: auth.Principal
    price: Price
    channels: list[Channel]
    reservation: billing.Reservation
    request: Any  # the route's parsed request


class MeteredAnswer(BufferedAnswer):
    """A body whose bill is `units` (already capped at the hold), with `detail` in the ledger."""

    def __init__(self, body: Any, units: int, detail: dict[str, Any], *, content_type: str | None = None,
                 **kwargs: Any):
        super().__init__(body if content_type is None else {}, Usage(0, 0), **kwargs)
        if content_type is not None:  # a text body (a transcription's text, srt or vtt)
            self.payload = body.encode() if isinstance(body, str) else body
            self.headers = {"content-type": content_type, "content-length": str(len(self.payload))}
        self.units, self.detail = units, detail

    def _settle(self, usage: Usage, outcome: str) -> None:
        detail = {"channel": self.channel.name, "outcome": outcome, **self.detail}
        self._write_bill(self.units, detail, "request served")


def capped(units: int, reservation: billing.Reservation) -> int:
    """A bill never above its hold, whatever an upstream (or a file's header) says."""
    return min(units, reservation.base_hold)


Attempt = Callable[[Metered, Channel, httpx.AsyncClient], Awaitable[Answer]]


async def serve(prepare: Callable[[Inbound], Metered], attempt: Attempt, inbound: Inbound, *,
                http: httpx.AsyncClient | None = None) -> Served:
    """The committed answer, or a `GatewayError` with everything refunded."""
    metered = await here_unless_it_waits(prepare, inbound)
    return await serve_prepared(metered, attempt, inbound, http=http)


async def serve_prepared(metered: Metered, attempt: Attempt, inbound: Inbound, *, http: httpx.AsyncClient | None = None,
                         streamed: bool = False) -> Served:
    """`serve` once prepared. A `streamed` answer is committed at its first event (it keeps itself
    alive); a buffered one is kept alive while awaited (`patiently`)."""
    client = http or http_client()

    async def answering() -> Answer:
        try:
            answer, _ = await first_success_async(metered.channels, lambda channel: attempt(metered, channel, client),
                                                  offload=anyio.to_thread.run_sync)
            return answer
        except BaseException as exc:
            reason = getattr(exc, "message", type(exc).__name__)[:200]
            failed = isinstance(exc, Exception)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: billing.refund(metered.reservation, reason=reason,
                                                                      error=failed))
            raise

    patience = get_settings().buffered_keepalive_seconds
    if streamed or patience <= 0:
        return await answering()
    return await patiently(answering(), route=metered.call.route, request_id=inbound.request_id,
                           interval=patience, limit_headers=partial(_limit_headers, metered.call, metered.reservation))
