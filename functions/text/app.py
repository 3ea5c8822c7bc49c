"""Every text route, streamed or not: an ASGI app run by uvicorn under the Lambda Web Adapter.

What every streaming function shares (the request id from the gateway, the relay that watches for
the client going away, the error mapping) is `gateway.asgi`; the routes hand each request to
`gateway.api` (text, and rerank, moderations and audio) and write its answer. A shutdown waits
for the bills of the requests it cancelled.
"""

from __future__ import annotations

import contextlib

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway import asgi, observability
from gateway.api import audio, count_tokens, moderations, rerank, text
from gateway.api import models as model_list
from gateway.errors import GatewayError, render
from gateway.observability import logger
from gateway.routing.channels import check_at_start

check_at_start()  # a bad channels document fails the cold start, naming the field


async def models(request: Request) -> Response:
    """The model list and one model, in the shape of the SDK that asks (and its error envelope)."""
    try:
        body = await anyio.to_thread.run_sync(model_list.answer, request.url.path, asgi.headers(request),
                                              dict(request.query_params), request.path_params.get("model"))
    except GatewayError as error:
        observability.note_error(error)
        dialect = model_list.dialect_of(request.url.path, request.headers)
        rendered = render(error, dialect, asgi.request_id(request))
        return JSONResponse(rendered.body, rendered.status, rendered.headers or None)
    return JSONResponse(body)


async def health(request: Request) -> Response:
    """GET /health for load balancers and uptime checks: no key, no upstream call, no AWS call.
    It answers once the function is up, which needs a valid channels document (read at start)."""
    return JSONResponse({"status": "ok"}, headers={"cache-control": "no-store"})


# How long a shutdown waits for the bills of the requests it cancelled.
SHUTDOWN_SETTLE_SECONDS = 10


@contextlib.asynccontextmanager
async def lifespan(_app):
    yield
    left = await text.settle_pending(SHUTDOWN_SETTLE_SECONDS)
    if left:  # the sweeper refunds them once their hold runs out
        logger.error("shutting down with unsettled requests", extra={"unsettled": left})


app = asgi.application([
    asgi.route("/v1/chat/completions", text.chat_completions),
    asgi.route("/v1/messages", text.messages),
    asgi.route("/v1/messages/count_tokens", count_tokens.count_tokens),
    asgi.route("/v1/responses", text.responses),
    asgi.route("/v1/responses/compact", text.compact_responses),
    asgi.route("/v1beta/models/{proxy:path}", text.content),
    asgi.route("/v1/embeddings", text.embeddings),
    asgi.route("/v1/rerank", rerank.rerank),
    asgi.route("/v1/moderations", moderations.moderations),
    asgi.route("/v1/audio/speech", audio.speech),
    asgi.route("/v1/audio/transcriptions", audio.transcriptions),
    asgi.route("/v1/audio/translations", audio.translations),
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/models/{model:path}", models, methods=["GET"]),
    Route("/v1beta/models", models, methods=["GET"]),
    Route("/v1beta/models/{model:path}", models, methods=["GET"]),
    Route("/health", health, methods=["GET"]),
], lifespan=lifespan)
