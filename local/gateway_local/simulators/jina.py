"""Simulated Jina-compatible rerank upstream, mounted at `/jina`, in its three dialects:

- Jina's `POST /v1/rerank` (`top_n`, `return_documents`; `results[{index, relevance_score,
  document?}]`, a document as a bare string as LiteLLM's jina transformation notes; `usage.total_tokens`);
  Voyage's when the body says `top_k` (results under `data`: LiteLLM `llms/voyage/rerank`);
- TEI's `POST /rerank` (text-embeddings-inference `router/src/http/types.rs`: `query`, `texts`,
  `return_text`; a bare array of `{index, score}` sorted by score; the tokens in the
  `x-compute-tokens` header; empty texts a 400, more than 32 a 413, as its default
  `max_client_batch_size`);
- `GET /v1/models` and TEI's `GET /info` for the health probe.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._rerank import ranked, refusal, tokens
from ._text import fault_of, fault_status, json_body, with_fault_prefix

TEI_MAX_TEXTS = 32


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status)


async def rerank(request: Request) -> Response:
    body = await json_body(request)
    query = str(body.get("query", "")) if isinstance(body, dict) else ""
    if status := fault_status(fault_of(request, query)):
        return _error(status, f"The simulated upstream failed with {status} as asked.")
    voyage = isinstance(body, dict) and "top_k" in body
    if why := refusal(body, top="top_k" if voyage else "top_n"):
        return _error(400, why)
    documents = body["documents"]
    order = ranked(query, documents)[:body.get("top_k" if voyage else "top_n") or len(documents)]
    shown = body.get("return_documents")
    results = [{"index": i, "relevance_score": s, **({"document": documents[i]} if shown else {})} for i, s in order]
    usage = {"total_tokens": tokens(query, documents)}
    if voyage:
        return JSONResponse({"object": "list", "data": results, "model": body.get("model"), "usage": usage})
    return JSONResponse({"model": body.get("model"), "results": results, "usage": usage})


async def tei_rerank(request: Request) -> Response:
    body = await json_body(request)
    query = str(body.get("query", "")) if isinstance(body, dict) else ""
    if status := fault_status(fault_of(request, query)):
        return JSONResponse({"error": "simulated failure", "error_type": "backend"}, status)
    if isinstance(body, dict) and not body.get("texts"):
        return JSONResponse({"error": "`texts` cannot be empty", "error_type": "empty"}, 400)
    if why := refusal(body, top="top_n", texts="texts"):
        return JSONResponse({"error": why, "error_type": "validation"}, 422)
    texts = body["texts"]
    if len(texts) > TEI_MAX_TEXTS:
        return JSONResponse({"error": f"batch size {len(texts)} > maximum allowed batch size {TEI_MAX_TEXTS}",
                             "error_type": "validation"}, 413)
    order = ranked(query, texts)
    ranks = [{"index": i, "score": s, **({"text": texts[i]} if body.get("return_text") else {})} for i, s in order]
    return JSONResponse(ranks, headers={"x-compute-tokens": str(tokens(query, texts))})


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "m-rerank", "object": "model"}]})


async def info(request: Request) -> Response:
    return JSONResponse({"model_id": "m-rerank", "model_type": {"reranker": {}}, "max_client_batch_size": 32})


app = Starlette(routes=with_fault_prefix([
    Route("/v1/rerank", rerank, methods=["POST"]),
    Route("/rerank", tei_rerank, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
]))
