"""The HTTP side every streaming function shares (text, images): an ASGI app run by uvicorn under
the Lambda Web Adapter, whose answers API Gateway streams for up to 15 minutes.

Routes parse nothing themselves: `route` hands the request (`answers.Inbound`) to the layer and
writes its answer through `Relayed`, which also watches for the client going away, so the work
stops at once where it can; the layer settles the bill either way.

Each request gets its id here, from the gateway, never from a header: a client can send any
header, `x-amzn-request-context` included, and the id is what its reservation is billed under.
Every answer names it in `x-request-id`.

Only the streaming functions import this module: they bundle starlette and uvicorn
(`functions/<name>/requirements.txt`); the layer itself does not.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway import auth, observability
from gateway.api.answers import Inbound
from gateway.errors import GatewayError, NotFound, dialect_for_path, render
from gateway.observability import logger


class Relayed(Response):
    """Writes an answer (`answers.Ready` or `PatientAnswer`): headers, then each chunk as the layer produces it."""

    def __init__(self, answer: Any):
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


def request_id(request: Request) -> str:
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


def headers(request: Request) -> dict[str, str]:
    """The request's headers (the first value of each), once its credentials pass the one rule."""
    pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
    auth.single_credential(pairs, request.query_params.getlist("key"))
    return auth.first_values(pairs)


async def inbound(request: Request) -> Inbound:
    return Inbound(path=request.url.path, headers=headers(request), query=dict(request.query_params),
                   body=await request.body(), request_id=request_id(request),
                   proxy=request.path_params.get("proxy"))


def route(path: str, serve: Callable[[Inbound], Awaitable[Any]], methods: Sequence[str] = ("POST",)) -> Route:
    """A route whose answer the layer makes from the request (`serve`) and `Relayed` writes."""
    async def endpoint(request: Request) -> Response:
        return Relayed(await serve(await inbound(request)))

    return Route(path, endpoint, methods=list(methods))


async def healthz(request: Request) -> Response:
    # The Lambda Web Adapter's readiness check.
    return JSONResponse({"ok": True})


def error_response(request: Request, error: GatewayError) -> Response:
    rendered = render(error, dialect_for_path(request.url.path), request_id(request))
    return JSONResponse(rendered.body, rendered.status, rendered.headers or None)


async def _gateway_error(request: Request, error: GatewayError) -> Response:
    observability.note_error(error)
    if error.status >= 500:
        logger.warning("request failed", extra={"status": error.status, "error": error.message})
    return error_response(request, error)


async def _http_error(request: Request, error: HTTPException) -> Response:
    return error_response(request, NotFound(f"no route for {request.method} {request.url.path}",
                                            code="route_not_found", status=error.status_code))


async def _unexpected(request: Request, error: Exception) -> Response:
    return error_response(request, observability.answer_unexpected(error, request_id=request_id(request)))


# Starlette types each handler for Exception; these take the subclass they are registered for.
_HANDLERS: dict[Any, Any] = {GatewayError: _gateway_error, HTTPException: _http_error, Exception: _unexpected}


def application(routes: Sequence[BaseRoute],
                lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[None]] | None = None) -> RequestIds:
    """A streaming function's ASGI app: its routes and the readiness check, the one error mapping
    (every error in its route's family's envelope), the request id, the request metrics."""
    return RequestIds(Starlette(
        lifespan=lifespan,
        routes=[*routes, Route("/healthz", healthz, methods=["GET"])],
        exception_handlers=_HANDLERS,
        middleware=[Middleware(observability.ObservedASGI)],
    ))
