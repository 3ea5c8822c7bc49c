"""Simulated Cohere rerank upstream, mounted at `/cohere`: POST /v2/rerank and GET /v1/models.

Request and answer as cohere-python's v2 client sends and reads them (`v2/client.py` `rerank`:
`model`, `query`, `documents` as strings, `top_n`, `max_tokens_per_doc`; `V2RerankResponse`:
`id`, `results[{index, relevance_score}]`, `meta.billed_units.search_units`, one unit per query
over up to 100 documents, cohere.com/pricing). Scores by word overlap (`_rerank`).
"""

from __future__ import annotations

import uuid

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._rerank import ranked, refusal
from ._text import fault_of, fault_status, json_body, with_fault_prefix


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status)  # Cohere's error body: {"message": ...}


def _authorised(request: Request) -> bool:
    header = request.headers.get("authorization", "")
    return header.startswith("Bearer ") and bool(header[7:].strip())


async def rerank(request: Request) -> Response:
    if not _authorised(request):
        return _error(401, "no api key supplied")
    body = await json_body(request)
    if status := fault_status(fault_of(request, str((body or {}).get("query", "")) if isinstance(body, dict) else "")):
        return _error(status, f"The simulated upstream failed with {status} as asked.")
    if why := refusal(body):
        return _error(400, why)
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _error(400, "invalid request: model is required")
    order = ranked(body["query"], body["documents"])[:body.get("top_n") or len(body["documents"])]
    units = -(-len(body["documents"]) // 100)
    return JSONResponse({"id": str(uuid.uuid4()),
                         "results": [{"index": i, "relevance_score": s} for i, s in order],
                         "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": units}}})


async def models(request: Request) -> Response:
    if not _authorised(request):
        return _error(401, "no api key supplied")
    return JSONResponse({"models": [{"name": "m-rerank", "endpoints": ["rerank"]}]})


app = Starlette(routes=with_fault_prefix([
    Route("/v2/rerank", rerank, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
]))
