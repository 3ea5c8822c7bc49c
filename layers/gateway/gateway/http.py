"""The Powertools resolver every buffered function uses, with the one mapping of errors.

A route raises `GatewayError` (or lets one through from the layer); the exception handlers below
render it in the envelope of the route's dialect. Anything unexpected becomes a 500 in that
envelope with the request id, and a logged stack trace, never a trace in the answer. Every
answer names API Gateway's request id in `x-request-id` (the id images are billed under).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

from gateway import auth, observability
from gateway.errors import Dialect, GatewayError, InvalidRequest, NotFound, dialect_for_path, render
from gateway.observability import logger


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    if hasattr(body, "model_dump_json"):  # a pydantic model
        payload = body.model_dump_json(exclude_none=True)
    else:
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return Response(status_code=status, content_type="application/json", body=payload, headers=headers)


def request_id(app: APIGatewayRestResolver) -> str:
    return app.current_event.request_context.request_id or ""


CATCH_ALL_RESOURCES = ("/", "/{proxy+}")  # template.yaml's catch-all routes: a 404 for any other path


def route_dialect(app: APIGatewayRestResolver) -> Dialect:
    event = app.current_event
    resource = event.resource if event.resource not in CATCH_ALL_RESOURCES else None
    return dialect_for_path(resource or event.path or "")


def error_response(app: APIGatewayRestResolver, error: GatewayError) -> Response:
    rendered = render(error, route_dialect(app), request_id(app))
    return json_response(rendered.body, rendered.status, rendered.headers or None)


class _Resolver(APIGatewayRestResolver):
    """Names API Gateway's request id (never a client header) in every answer's `x-request-id`."""

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        answer = super().resolve(event, context)
        request_id_ = ((event or {}).get("requestContext") or {}).get("requestId")
        if request_id_ and isinstance(answer, dict):
            answer.setdefault("multiValueHeaders", {})["x-request-id"] = [request_id_]
            if isinstance(answer.get("headers"), dict):
                answer["headers"]["x-request-id"] = request_id_
        return answer


def create_app() -> APIGatewayRestResolver:
    from gateway.settings import get_settings

    base_path = get_settings().base_path.rstrip("/")
    # Behind a custom domain's base path mapping the event's path starts with it (e.g. /ai/v1/...).
    app = _Resolver(strip_prefixes=[base_path] if base_path else None)

    @app.exception_handler(GatewayError)
    def _gateway_error(error: GatewayError) -> Response:
        observability.note_error(error)
        if error.status >= 500:
            logger.warning("request failed", extra={"status": error.status, "error": error.message})
        return error_response(app, error)

    @app.not_found
    def _not_found(_: Exception) -> Response:
        observability.note_error(NotFound(""))
        event = app.current_event
        return error_response(app, NotFound(f"no route for {event.http_method} {event.path}",
                                            code="route_not_found"))

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response:
        return error_response(app, observability.answer_unexpected(error))

    return app


def submitted(app: APIGatewayRestResolver, principal: auth.Principal, answer: Callable[[], Any],
              status: int = 200) -> Response:
    """A submit route's JSON answer, made once per `Idempotency-Key` and body (admission/idempotency):
    a retry within 24 h gets the first answer (`Idempotent-Replayed: true`) and is billed once."""
    from gateway.admission import idempotency
    from gateway.multipart import event_body

    event = app.current_event
    key = idempotency.key_from(event.headers)
    # bytes: a form's files need not be UTF-8
    body = idempotency.comparable_body(event_body(event.raw_event), event.headers) if key is not None else b""

    def run() -> tuple[int, Any]:
        made = answer()
        return status, json.loads(made.model_dump_json(exclude_none=True)) if hasattr(made, "model_dump_json") \
            else made

    code, payload, replayed = idempotency.run_once(principal, f"{event.http_method} {event.resource}", key, body, run)
    return json_response(payload, code, {"Idempotent-Replayed": "true"} if replayed else None)


def single_credential(app: APIGatewayRestResolver) -> None:
    """`auth.single_credential` over every value of the event's headers and `key` parameters."""
    event = app.current_event
    multi = event.multi_value_headers or {}
    pairs = [(name, value) for name, values in multi.items() for value in values or ()] if multi \
        else list((event.headers or {}).items())
    query = event.multi_value_query_string_parameters or {}
    keys = query.get("key") or ([event.query_string_parameters["key"]]
                                if (event.query_string_parameters or {}).get("key") else [])
    auth.single_credential(pairs, keys)


def authenticate(app: APIGatewayRestResolver) -> auth.Principal:
    single_credential(app)
    event = app.current_event
    principal = auth.authenticate(event.headers, event.query_string_parameters)  # logs its fingerprint
    return principal


#: Methods that change something: on the console's JSON API they take JSON only.
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def media_type(headers: Mapping[str, Any] | None) -> str:
    """The request's media type, lower case, without its parameters ('' when none was sent)."""
    for name, value in (headers or {}).items():
        if name.lower() == "content-type":
            return str(value).split(";", 1)[0].strip().lower()
    return ""


def json_only(app: APIGatewayRestResolver, next_middleware: Callable) -> Response:
    """A Powertools middleware of the console's JSON API: a state-changing request (POST, PUT,
    PATCH; a DELETE that carries a body) must say `Content-Type: application/json`, else a 415
    before anything runs. A page of another site can send a cross-site form (`text/plain`,
    `application/x-www-form-urlencoded`, `multipart/form-data`) without a CORS preflight, never
    an `application/json` one: this is what stops a login CSRF (a forged sign-in into the
    attacker's account), whatever a body parser would make of the form."""
    event = app.current_event
    method = (event.http_method or "").upper()
    if event.resource in CATCH_ALL_RESOURCES:  # no route: the 404 of its family, whatever it sends
        return next_middleware(app)
    if method in STATE_CHANGING and (method != "DELETE" or event.body):
        found = media_type(event.headers)
        if found != "application/json":
            sent = f"'{found[:100]}'" if found else "none"
            raise InvalidRequest(f"Content-Type: must be application/json, got {sent}", param="Content-Type",
                                 status=415, code="unsupported_media_type")
    return next_middleware(app)


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
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    host = context.get("domainName") or headers.get("host")
    if not host:
        return ""
    full_path, path = str(context.get("path") or ""), event.path or ""
    prefix = full_path[:-len(path)] if path and full_path.endswith(path) else ""
    return f"{headers.get('x-forwarded-proto', 'https')}://{host}{prefix.rstrip('/')}"
