"""POST /v1/moderations: OpenAI's moderation, through chat channels.

Free by default (the shipped moderation models cost 0 per input), priced per input item when the
operator sets `per_moderation`; held before and settled after like any request, so every call
leaves a ledger entry: the request log shows it whatever it cost."""

from __future__ import annotations

from typing import Any, cast

import httpx

from gateway import auth, observability
from gateway.admission import billing
from gateway.api.answers import Inbound
from gateway.api.metered import Metered, MeteredAnswer, capped, serve
from gateway.api.text import TextCall
from gateway.formats import CHAT
from gateway.prices import moderation_cost
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.upstreams.base import UpstreamError
from gateway.upstreams.chat import ChatClient
from gateway.upstreams.clients import client_for

ROUTE = "/v1/moderations"
PROTOCOLS = ("chat",)


def _prepare(inbound: Inbound) -> Metered:
    from gateway.schemas.moderation import ModerationRequest
    from gateway.validation import parse_json, parse_model

    principal = auth.authenticate(inbound.headers, inbound.query)
    request = parse_model(ModerationRequest, parse_json(inbound.body))
    principal.require_model(request.model)
    price, channels = get_catalog().serving(request.model, PROTOCOLS, group=principal.group)
    observability.set_model(request.model)
    hold = moderation_cost(price, request.count())
    tokens = request.estimate_tokens()
    call = TextCall("moderation", CHAT, ROUTE, request.model, request.model_dump(exclude_unset=True),
                    stream=False, include_usage=False, input_tokens=tokens, output_tokens=0)
    reservation = billing.reserve_request(principal, hold, model=request.model, route=ROUTE,
                                          request_id=inbound.request_id, tokens=tokens)
    return Metered(call, principal, price, channels, reservation, request)


async def _attempt(metered: Metered, channel: Channel, http: httpx.AsyncClient) -> MeteredAnswer:
    request = metered.request
    client = cast(ChatClient, client_for(channel, http))
    answer: Any = await client.moderations({**metered.call.body, "model": channel.upstream_model(request.model)})
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise UpstreamError(None, "upstream moderation answer has no results", retryable=True)
    items = request.count()
    units = capped(moderation_cost(metered.price, items), metered.reservation)
    flagged = sum(1 for r in results if r.get("flagged") is True)
    return MeteredAnswer({**answer, "model": request.model}, units, {"inputs": items, "flagged": flagged},
                         call=metered.call, price=metered.price, reservation=metered.reservation, channel=channel)


async def moderations(inbound: Inbound, *, http: httpx.AsyncClient | None = None) -> Any:
    return await serve(_prepare, _attempt, inbound, http=http)
