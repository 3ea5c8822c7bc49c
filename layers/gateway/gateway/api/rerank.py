"""POST /v1/rerank: documents ranked against a query, in new-api's shape (Jina's, Cohere v1's).

Held before: the request's search units (one per 100 documents) or its token estimate, twice
over (Cohere counts a long document's chunks as documents; an upstream's tokenizer is not ours).
Settled to what the upstream reports (Cohere's `meta.billed_units.search_units`, Jina's and
Voyage's `usage.total_tokens`, TEI's `x-compute-tokens`), else the estimate, never above the hold.
The answer: every result (or the `top_n` best, capped at the number of documents) by
`relevance_score`, highest first, with its document when asked (the client's own, never the
upstream's copy)."""

from __future__ import annotations

import uuid
from typing import Any, cast

import httpx

from gateway import auth, observability
from gateway.admission import billing
from gateway.api.answers import Inbound
from gateway.api.metered import Metered, MeteredAnswer, capped, serve
from gateway.api.text import TextCall
from gateway.formats import CHAT
from gateway.prices import rerank_cost
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.upstreams.clients import client_for
from gateway.upstreams.rerank import RerankClient

ROUTE = "/v1/rerank"
PROTOCOLS = ("cohere", "jina")
HOLD_MARGIN = 2


def _prepare(inbound: Inbound) -> Metered:
    from gateway.schemas.rerank import RerankRequest
    from gateway.validation import parse_json, parse_model

    principal = auth.authenticate(inbound.headers, inbound.query)
    request = parse_model(RerankRequest, parse_json(inbound.body))
    principal.require_model(request.model)
    price, channels = get_catalog().serving(request.model, PROTOCOLS, group=principal.group)
    observability.set_model(request.model)
    tokens = request.estimate_tokens()
    hold = rerank_cost(price, search_units=request.search_units() * HOLD_MARGIN, tokens=tokens * HOLD_MARGIN)
    call = TextCall("rerank", CHAT, ROUTE, request.model, {}, stream=False, include_usage=False,
                    input_tokens=tokens, output_tokens=0)
    reservation = billing.reserve_request(principal, hold, model=request.model, route=ROUTE,
                                          request_id=inbound.request_id, tokens=tokens)
    return Metered(call, principal, price, channels, reservation, request)


async def _attempt(metered: Metered, channel: Channel, http: httpx.AsyncClient) -> MeteredAnswer:
    request = metered.request
    texts = request.texts()
    wanted = request.results_wanted()
    extra = request.model_dump(exclude_unset=True, include={"max_tokens_per_doc"})
    client = cast(RerankClient, client_for(channel, http))
    ranked = await client.rerank(channel.upstream_model(request.model), request.query, texts, wanted, extra)
    best = sorted(ranked.scores, key=lambda pair: -pair[1])[:wanted]
    results: list[dict[str, Any]] = []
    for index, score in best:
        result: dict[str, Any] = {"index": index, "relevance_score": score}
        if request.return_documents:
            result["document"] = {"text": texts[index]}
        results.append(result)
    search_units = ranked.search_units if ranked.search_units is not None else request.search_units()
    tokens = ranked.tokens if ranked.tokens is not None else metered.call.input_tokens
    units = capped(rerank_cost(metered.price, search_units=search_units, tokens=tokens), metered.reservation)
    detail = {"search_units": search_units, "tokens": tokens, "documents": len(texts),
              "usage_source": "upstream" if (ranked.search_units if metered.price.per_search_unit is not None
                                             else ranked.tokens) is not None else "estimate"}
    body = {"id": str(uuid.uuid4()), "model": request.model, "results": results,
            "usage": {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens},
            "meta": {"billed_units": {"search_units": search_units}}}
    return MeteredAnswer(body, units, detail, call=metered.call, price=metered.price,
                         reservation=metered.reservation, channel=channel)


async def rerank(inbound: Inbound, *, http: httpx.AsyncClient | None = None) -> Any:
    return await serve(_prepare, _attempt, inbound, http=http)


