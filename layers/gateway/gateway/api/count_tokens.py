"""POST /v1/messages/count_tokens: the tokens a messages request's prompt would take, free.

Through any text channel, in the channels' usual order (messages channels first): a messages
channel answers with its own count, a content channel with its `countTokens` of the request
converted to its dialect, a chat channel (its protocol has no count) with the gateway's own
estimate. The `x-gateway-token-count` header says which: `upstream` or `estimate`. A failure
worth retrying moves on to the next channel, as for generation.

Counting is free: a zero-unit reservation settled to zero leaves one ledger entry (the channel
and the count), like the content dialect's countTokens.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import httpx

from gateway import auth
from gateway.admission import billing
from gateway.api.text import TEXT_PROTOCOLS, BufferedAnswer, Inbound, TextCall, http_client
from gateway.formats import CONTENT, MESSAGES, convert_request
from gateway.formats.usage import Usage
from gateway.observability import logger
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.routing.failover import first_success_async
from gateway.upstreams.base import Timeouts, UpstreamError
from gateway.upstreams.clients import client_for
from gateway.upstreams.content import ContentClient
from gateway.upstreams.messages import MessagesClient

ROUTE = "/v1/messages/count_tokens"
SOURCE_HEADER = "x-gateway-token-count"
UPSTREAM, ESTIMATE = "upstream", "estimate"
COUNT = "count_tokens"
# What the messages protocol's count takes; generation-only fields (max_tokens, stream, ...) are not sent.
_COUNTED_FIELDS = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")


class CountAnswer(BufferedAnswer):
    """`{"input_tokens": n}` and where the number came from; billed zero units."""

    def __init__(self, tokens: int, source: str, **kwargs: Any):
        super().__init__({"input_tokens": tokens}, Usage(0, 0), **kwargs)
        self.headers = {**self.headers, SOURCE_HEADER: source}
        self.tokens, self.source = tokens, source

    def _settle(self, usage: Usage, outcome: str) -> None:
        try:
            billing.settle(self.reservation, 0, detail={
                "channel": self.channel.name, "outcome": outcome, "counted_tokens": self.tokens,
                "count_source": self.source})
        except Exception:
            logger.exception("settlement failed", extra={"reservation_id": self.reservation.reservation_id})


def _prepare(inbound: Inbound) -> tuple[TextCall, list[Channel], Any, billing.Reservation]:
    from gateway.schemas.text.messages import MessagesRequest
    from gateway.validation import parse_json, parse_model

    principal = auth.authenticate(inbound.headers, inbound.query)
    request = parse_model(MessagesRequest, parse_json(inbound.body))
    principal.require_model(request.model)
    body = request.model_dump(exclude_unset=True)
    call = TextCall(COUNT, MESSAGES, ROUTE, request.model, body, stream=False, include_usage=False,
                    input_tokens=request.estimate_input_tokens(), output_tokens=0)
    price, channels = get_catalog().serving(call.model, TEXT_PROTOCOLS, prefer="messages", group=principal.group)
    reservation = billing.reserve_request(principal, 0, model=call.model, route=ROUTE, request_id=inbound.request_id)
    return call, channels, price, reservation


async def count_tokens(inbound: Inbound, *, http: httpx.AsyncClient | None = None,
                       timeouts: Timeouts | None = None) -> CountAnswer:
    call, channels, price, reservation = await anyio.to_thread.run_sync(_prepare, inbound)
    try:
        (tokens, source), channel = await first_success_async(
            channels, lambda channel: _count(call, channel, http or http_client(), timeouts),
            offload=anyio.to_thread.run_sync)
        return CountAnswer(tokens, source, call=call, price=price, reservation=reservation, channel=channel)
    except BaseException as exc:
        reason = getattr(exc, "message", type(exc).__name__)[:200]
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: billing.refund(reservation, reason=reason))
        raise


async def _count(call: TextCall, channel: Channel, http: httpx.AsyncClient,
                 timeouts: Timeouts | None) -> tuple[int, str]:
    model = channel.upstream_model(call.model)
    if channel.protocol == "messages":
        client = MessagesClient(channel.base_url, channel.api_key, http, timeouts)
        answer = await client.count_tokens({"model": model,
                                            **{k: v for k, v in call.body.items() if k in _COUNTED_FIELDS}})
        return _whole(answer, "input_tokens"), UPSTREAM
    if channel.protocol == "content":
        content_client = cast(ContentClient, client_for(channel, http, timeouts))
        converted = convert_request(call.body, source=MESSAGES, target=CONTENT, model=model, stream=False)
        answer = await content_client.count_tokens(
            model, {"generateContentRequest": {"model": f"models/{model}", **converted}})
        return _whole(answer, "totalTokens"), UPSTREAM
    return call.input_tokens, ESTIMATE


def _whole(answer: Any, name: str) -> int:
    value = answer.get(name) if isinstance(answer, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UpstreamError(None, f"upstream count answer has no whole {name}", retryable=True)
    return value
