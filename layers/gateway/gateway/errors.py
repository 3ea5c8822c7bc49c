"""Domain errors and the one place that renders them in each dialect's envelope.

Code raises a `GatewayError` subclass naming what went wrong; `render` turns it into the status
and body of the dialect the route speaks (architecture.md, "one envelope per dialect").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Dialect(str, Enum):
    CHAT = "chat"  # /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/images, /v1/video(s), /v1/dashboard
    MESSAGES = "messages"  # /v1/messages
    CONTENT = "content"  # /v1beta/...
    ALPHA = "alpha"  # /alpha/...
    BETA = "beta"  # /beta/...
    GAMMA = "gamma"  # /gamma/...
    PLANTS = "plants"  # /plants
    ACCOUNT = "account"  # /api/user/self
    IMGTASK = "imgtask"  # /imgtask/...


def dialect_for_path(path: str) -> Dialect:
    """The error dialect of a route, decided by its path prefix only."""
    if path.startswith("/v1/messages"):
        return Dialect.MESSAGES
    if path.startswith("/v1beta/"):
        return Dialect.CONTENT
    if path.startswith("/alpha/"):
        return Dialect.ALPHA
    if path.startswith("/beta/"):
        return Dialect.BETA
    if path.startswith("/gamma/"):
        return Dialect.GAMMA
    if path.startswith("/plants"):
        return Dialect.PLANTS
    if path.startswith("/api/"):
        return Dialect.ACCOUNT
    if path.startswith("/imgtask/"):
        return Dialect.IMGTASK
    return Dialect.CHAT


# A message quotes what the client sent (a model name, a value); it never grows with it.
MAX_MESSAGE_CHARS = 1000


def shown(value: object, limit: int = 100) -> str:
    """`value` as quoted in an error message: cut to `limit` characters, marked when cut."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


class GatewayError(Exception):
    """Base of every error the gateway answers on purpose."""

    status: int = 500
    kind: str = "internal"
    code: str | None = None
    #: The upstream's own error object, when the error relays its verdict (a dialect may show it).
    upstream: dict[str, Any] | None = None
    #: Every field's problem when a body broke several rules at once ({"param", "message"} each,
    #: the first the message's own): the account envelope lists them, so a form shows them all.
    problems: tuple[dict[str, str | None], ...] = ()

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 status: int | None = None, headers: dict[str, str] | None = None):
        message = shown(message, MAX_MESSAGE_CHARS)
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.headers = headers or {}


class InvalidRequest(GatewayError):
    status, kind, code = 400, "invalid_request", "invalid_request"


class AuthenticationFailed(GatewayError):
    status, kind, code = 401, "authentication", "invalid_api_key"


class PermissionDenied(GatewayError):
    status, kind, code = 403, "permission", "permission_denied"


class InsufficientQuota(GatewayError):
    # 403 rather than 429: SDKs retry a 429, and an empty wallet does not refill by waiting.
    status, kind, code = 403, "insufficient_quota", "insufficient_quota"


class NotFound(GatewayError):
    status, kind, code = 404, "not_found", "not_found"


class Conflict(GatewayError):
    status, kind, code = 409, "conflict", "conflict"


class PayloadTooLarge(GatewayError):
    status, kind, code = 413, "too_large", "request_too_large"


class RateLimited(GatewayError):
    status, kind, code = 429, "rate_limit", "rate_limit_exceeded"


class UpstreamFailed(GatewayError):
    status, kind, code = 502, "upstream", "upstream_error"


class UpstreamTimeout(GatewayError):
    status, kind, code = 504, "timeout", "upstream_timeout"


class Unavailable(GatewayError):
    status, kind, code = 503, "unavailable", "no_available_channel"


# Each dialect's own words for an error kind.
_CHAT_TYPES = {
    "invalid_request": "invalid_request_error", "authentication": "authentication_error",
    "permission": "permission_error", "insufficient_quota": "insufficient_quota",
    "not_found": "invalid_request_error", "conflict": "invalid_request_error",
    "too_large": "invalid_request_error", "rate_limit": "rate_limit_error",
    "upstream": "upstream_error", "timeout": "upstream_error", "unavailable": "server_error",
    "internal": "server_error",
}
_MESSAGES_TYPES = {
    "invalid_request": "invalid_request_error", "authentication": "authentication_error",
    "permission": "permission_error", "insufficient_quota": "permission_error",
    "not_found": "not_found_error", "conflict": "invalid_request_error",
    "too_large": "request_too_large", "rate_limit": "rate_limit_error", "upstream": "api_error",
    "timeout": "api_error", "unavailable": "overloaded_error", "internal": "api_error",
}
_CONTENT_STATUSES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED", 409: "ALREADY_EXISTS", 413: "INVALID_ARGUMENT", 431: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
    502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}
# The alpha upstream's own code ranges (docs/families.md "Alpha": the table): 1000-1004 auth, 1100-1102
# account/quota, 1103 access, 1200s request, 1300s policy and rate, 5000s its own faults.
_ALPHA_CODES = {
    "invalid_request": 1201, "authentication": 1000, "permission": 1103,
    "insufficient_quota": 1102, "not_found": 1203, "conflict": 1201, "too_large": 1201,
    "rate_limit": 1302, "upstream": 5000, "timeout": 5000, "unavailable": 5001, "internal": 5000,
}
# Finer codes by the error's own code: a missing key, a bad one, an expired one.
_ALPHA_CODES_BY_CODE = {"missing_api_key": 1001, "invalid_api_key": 1002, "expired_api_key": 1004}
# HTTP statuses the alpha dialect answers instead of the gateway's own: an empty quota is the
# upstream's 429 with 1102 (its SDKs react to that), not 403.
_ALPHA_STATUSES = {"insufficient_quota": 429}
_IMGTASK_CODES = {"invalid_request": 4, "not_found": 3, "rate_limit": 23}
# The gamma upstream's own error codes.
_GAMMA_CODES = {
    "invalid_request": "InvalidParameter", "authentication": "InvalidApiKey", "permission": "AccessDenied",
    "insufficient_quota": "Arrearage", "not_found": "InvalidParameter", "conflict": "InvalidParameter",
    "too_large": "InvalidParameter", "rate_limit": "Throttling", "upstream": "InternalError",
    "timeout": "RequestTimeOut", "unavailable": "ServiceUnavailable", "internal": "InternalError",
}


@dataclass(frozen=True)
class Rendered:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def render(error: GatewayError, dialect: Dialect, request_id: str = "") -> Rendered:
    """Status and body of `error` in the envelope of `dialect`; a 5xx names `request_id`, for
    the operator the client quotes it to."""
    status, kind, message = error.status, error.kind, error.message
    if status >= 500 and request_id and dialect not in (Dialect.ALPHA, Dialect.GAMMA):
        message = f"{message} (request id: {request_id})"  # those two envelopes carry it already
    if dialect is Dialect.MESSAGES:
        body: dict[str, Any] = {"type": "error",
                                "error": {"type": _MESSAGES_TYPES.get(kind, "api_error"), "message": message}}
    elif dialect is Dialect.CONTENT:
        body = {"error": {"code": status, "message": message,
                          "status": _CONTENT_STATUSES.get(status, "UNKNOWN")}}
    elif dialect is Dialect.ALPHA:
        status = _ALPHA_STATUSES.get(kind, status)
        code = _ALPHA_CODES_BY_CODE.get(error.code or "") or _ALPHA_CODES.get(kind, 5000)
        body = {"code": code, "message": message, "request_id": request_id, "data": None}
    elif dialect is Dialect.BETA:
        # The beta upstream's own shape (a FastAPI service): `{"detail": ...}`.
        body = {"detail": message}
    elif dialect is Dialect.GAMMA and error.code == "missing_api_key":
        # The spec's answer to a gamma call with no token at all.
        suffix = f" (request id: {request_id})" if request_id else ""
        body = {"error": {"message": message + suffix, "type": "api_error"}}
    elif dialect is Dialect.GAMMA:
        body = {"request_id": request_id, "code": _GAMMA_CODES.get(kind, "InternalError"), "message": message}
    elif dialect is Dialect.PLANTS:
        body = {"error": status, "message": message}
    elif dialect is Dialect.ACCOUNT:
        body = {"data": None, "message": message, "success": False}
        if error.problems:  # new-api's envelope, plus each field's problem for a form
            body["errors"] = [dict(problem) for problem in error.problems]
        elif error.param:
            body["errors"] = [{"param": error.param, "message": message}]
    elif dialect is Dialect.IMGTASK:
        # The upstream's own submit code (24 banned prompt, with its bannedWord) when it relays one.
        relayed = error.upstream or {}
        relayed_code = relayed.get("code")
        body = {"code": relayed_code if isinstance(relayed_code, int) and not isinstance(relayed_code, bool)
                else _IMGTASK_CODES.get(kind, 9),
                "description": message, "result": None,
                "properties": dict(relayed.get("properties") or {}) if isinstance(relayed.get("properties"), dict)
                else {}}
    else:
        body = {"error": {"message": message, "type": _CHAT_TYPES.get(kind, "server_error"),
                          "param": error.param, "code": error.code}}
    return Rendered(status=status, body=body, headers=dict(error.headers))
