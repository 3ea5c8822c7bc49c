"""Every text route, streamed or not: an ASGI app run by uvicorn under the Lambda Web Adapter.

Routes parse nothing themselves: they hand the request to `gateway.api.text` and write its answer.
An answer's body goes out through `Relayed`, which also watches for the client going away, so
the upstream read stops at once; the layer settles the bill either way.

Each request gets its id here, from the gateway, never from a header: a client can send any
header, `x-amzn-request-context` included, and the id is what its reservation is billed under.
Every answer names it in `x-request-id`.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import anyio
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway import auth, observability
from gateway.api import count_tokens, text
from gateway.api import models as model_list
from gateway.errors import GatewayError, NotFound, dialect_for_path, render
from gateway.observability import logger
from gateway.routing.channels import check_at_start

check_at_start()  # a bad channels document fails the cold start, naming the field


class Relayed(Response):
    """Writes a `text.Answer`: headers, then each chunk as the layer produces it."""

    def __init__(self, answer: text.Served):
        self.answer = answer
        self.status_code = answer.status
        self.background = None
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1"))
                            for k, v in {**answer.headers, **answer.limit_headers()}.items()]

    async def __call__(self, scope, receive, send) -> None:
        gone = False
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async with anyio.create_task_group() as group:

            async def stop() -> None:
                nonlocal gone
                gone = True
                group.cancel_scope.cancel()

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                await stop()

            async def body(chunk: bytes) -> None:
                try:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except OSError:  # the client went away while we wrote
                    await stop()
                    await anyio.lowlevel.checkpoint()  # delivers the cancellation here

            group.start_soon(watch)
            await self.answer.send_to(body)
            group.cancel_scope.cancel()
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _request_id(request: Request) -> str:
    return request.scope["state"]["request_id"]


class RequestIds:
    """Gives every request the gateway's own id and names it in the answer's `x-request-id`."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def named(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", request_id.encode())]}
            await send(message)

        await self.app(scope, receive, named)


def _headers(request: Request) -> dict[str, str]:
    """The request's headers (the first value of each), once its credentials pass the one rule."""
    pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
    auth.single_credential(pairs, request.query_params.getlist("key"))
    return auth.first_values(pairs)


async def _inbound(request: Request) -> text.Inbound:
    return text.Inbound(path=request.url.path, headers=_headers(request), query=dict(request.query_params),
                        body=await request.body(), request_id=_request_id(request),
                        proxy=request.path_params.get("proxy"))


def _route(path: str, serve, methods=("POST",)) -> Route:
    async def endpoint(request: Request) -> Response:
        return Relayed(await serve(await _inbound(request)))

    return Route(path, endpoint, methods=list(methods))


async def models(request: Request) -> Response:
    """The model list and one model, in the shape of the SDK that asks (and its error envelope)."""
    try:
        body = await anyio.to_thread.run_sync(model_list.answer, request.url.path, _headers(request),
                                              dict(request.query_params), request.path_params.get("model"))
    except GatewayError as error:
        observability.note_error(error)
        dialect = model_list.dialect_of(request.url.path, request.headers)
        rendered = render(error, dialect, _request_id(request))
        return JSONResponse(rendered.body, rendered.status, rendered.headers or None)
    return JSONResponse(body)


async def healthz(request: Request) -> Response:
    # The Lambda Web Adapter's readiness check.
    return JSONResponse({"ok": True})


async def health(request: Request) -> Response:
    """GET /health for load balancers and uptime checks: no key, no upstream call, no AWS call.
    It answers once the function is up, which needs a valid channels document (read at start)."""
    return JSONResponse({"status": "ok"}, headers={"cache-control": "no-store"})


def _error(request: Request, error: GatewayError) -> Response:
    rendered = render(error, dialect_for_path(request.url.path), _request_id(request))
    return JSONResponse(rendered.body, rendered.status, rendered.headers or None)


async def _gateway_error(request: Request, error: GatewayError) -> Response:
    observability.note_error(error)
    if error.status >= 500:
        logger.warning("request failed", extra={"status": error.status, "error": error.message})
    return _error(request, error)


async def _http_error(request: Request, error: HTTPException) -> Response:
    return _error(request, NotFound(f"no route for {request.method} {request.url.path}", code="route_not_found",
                                    status=error.status_code))


async def _unexpected(request: Request, error: Exception) -> Response:
    observability.note_error(error)
    logger.exception("unexpected error", extra={"request_id": _request_id(request)})
    return _error(request, GatewayError("internal error; quote the request id when reporting it"))


# How long a shutdown waits for the bills of the requests it cancelled.
SHUTDOWN_SETTLE_SECONDS = 10


@contextlib.asynccontextmanager
async def lifespan(_app):
    yield
    left = await text.settle_pending(SHUTDOWN_SETTLE_SECONDS)
    if left:  # the sweeper refunds them once their hold runs out
        logger.error("shutting down with unsettled requests", extra={"unsettled": left})


# Starlette types each handler for Exception; these take the subclass they are registered for.
_HANDLERS: dict[Any, Any] = {GatewayError: _gateway_error, HTTPException: _http_error, Exception: _unexpected}

app = RequestIds(Starlette(
    lifespan=lifespan,
    routes=[
        _route("/v1/chat/completions", text.chat_completions),
        _route("/v1/messages", text.messages),
        _route("/v1/messages/count_tokens", count_tokens.count_tokens),
        _route("/v1/responses", text.responses),
        _route("/v1/responses/compact", text.compact_responses),
        _route("/v1beta/models/{proxy:path}", text.content),
        _route("/v1/embeddings", text.embeddings),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", models, methods=["GET"]),
        Route("/v1beta/models", models, methods=["GET"]),
        Route("/v1beta/models/{model:path}", models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ],
    exception_handlers=_HANDLERS,
    middleware=[Middleware(observability.ObservedASGI)],
))
