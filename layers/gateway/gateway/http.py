"""The Powertools resolver every buffered function uses, with the one mapping of errors.

A route raises `GatewayError` (or lets one through from the layer); the exception handlers below
render it in the envelope of the route's dialect. Anything unexpected becomes a 500 in that
envelope with the request id, and a logged stack trace, never a trace in the answer.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

from gateway import auth
from gateway.errors import Dialect, GatewayError, NotFound, dialect_for_path, render
from gateway.observability import logger


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    if hasattr(body, "model_dump_json"):  # a pydantic model
        payload = body.model_dump_json(exclude_none=True)
    else:
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return Response(status_code=status, content_type="application/json", body=payload, headers=headers)


def request_id(app: APIGatewayRestResolver) -> str:
    return app.current_event.request_context.request_id or ""


def route_dialect(app: APIGatewayRestResolver) -> Dialect:
    event = app.current_event
    return dialect_for_path(event.resource or event.path or "")


def error_response(app: APIGatewayRestResolver, error: GatewayError) -> Response:
    rendered = render(error, route_dialect(app), request_id(app))
    return json_response(rendered.body, rendered.status, rendered.headers or None)


def create_app() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver()

    @app.exception_handler(GatewayError)
    def _gateway_error(error: GatewayError) -> Response:
        if error.status >= 500:
            logger.warning("request failed", extra={"status": error.status, "error": error.message})
        return error_response(app, error)

    @app.not_found
    def _not_found(_: Exception) -> Response:
        event = app.current_event
        return error_response(app, NotFound(f"no route for {event.http_method} {event.path}",
                                            code="route_not_found"))

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response:
        logger.exception("unexpected error")
        return error_response(app, GatewayError(
            f"internal error; quote request id {request_id(app)} when reporting it"))

    return app


def authenticate(app: APIGatewayRestResolver) -> auth.Principal:
    event = app.current_event
    principal = auth.authenticate(event.headers, event.query_string_parameters)
    logger.append_keys(key=principal.fingerprint, user_id=principal.user_id)
    return principal


def body_model(app: APIGatewayRestResolver, model):
    """The JSON body as `model` (a pydantic model class), or a 400 naming the field and the rule."""
    from gateway.validation import parse_body  # pydantic only where a body is parsed

    return parse_body(model, app.current_event.decoded_body if app.current_event.is_base64_encoded
                      else app.current_event.body)


def public_base_url(app: APIGatewayRestResolver) -> str:
    """This gateway's base URL, for links it hands out: `GATEWAY_PUBLIC_URL` when set, else the
    address the client called (its host and the stage or base path before the route)."""
    from gateway.settings import get_settings

    if get_settings().public_url:
        return get_settings().public_url.rstrip("/")
    event = app.current_event
    context = event.raw_event.get("requestContext") or {}
    host = context.get("domainName") or event.headers.get("Host") or event.headers.get("host")
    if not host:
        return ""
    full_path, path = str(context.get("path") or ""), event.path or ""
    prefix = full_path[:-len(path)] if path and full_path.endswith(path) else ""
    proto = event.headers.get("X-Forwarded-Proto") or event.headers.get("x-forwarded-proto") or "https"
    return f"{proto}://{host}{prefix.rstrip('/')}"
