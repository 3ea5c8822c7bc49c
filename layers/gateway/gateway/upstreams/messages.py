"""The messages wire protocol (what the `anthropic` SDK speaks), with `x-api-key`."""

from __future__ import annotations

from typing import Any

from gateway.sse import SSEEvent
from gateway.upstreams.base import EventStream, UpstreamClient
from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, ErrorTable, Rule, UpstreamError

ANTHROPIC_VERSION = "2023-06-01"
_ERRORS_DOC = "docs.anthropic.com/en/api/errors"


def anthropic_type(body: Any) -> list[str]:
    error = body.get("error") if isinstance(body, dict) else None
    return [error["type"]] if isinstance(error, dict) and isinstance(error.get("type"), str) else []


def anthropic_message(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("message") if isinstance(error, dict) and isinstance(error.get("message"), str) else None


#: Anthropic's errors by `error.type` (`_ERRORS_DOC`, "HTTP errors").
ERRORS = ErrorTable("messages", [
    # An empty prepaid balance comes as a 400 invalid_request_error, in words only: "Your credit
    # balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or
    # purchase credits." (users' reports: anthropics/claude-code#4684, anthropics/claude-quickstarts#229).
    Rule(ACCOUNT, status=400, message="credit balance is too low", source="anthropics/claude-code#4684"),
    Rule(CLIENT, code="invalid_request_error", source=_ERRORS_DOC),
    Rule(ACCOUNT, code="authentication_error", source=_ERRORS_DOC),  # 401
    Rule(ACCOUNT, code="billing_error", source=_ERRORS_DOC),  # 402
    Rule(ACCOUNT, code="permission_error", source=_ERRORS_DOC),  # 403
    Rule(CLIENT, code="not_found_error", source=_ERRORS_DOC),  # 404
    Rule(CLIENT, code="request_too_large", source=_ERRORS_DOC),  # 413
    Rule(CAPACITY, code="rate_limit_error", source=_ERRORS_DOC),  # 429
    Rule(UPSTREAM, code="api_error", source=_ERRORS_DOC),  # 500
    Rule(UPSTREAM, code="timeout_error", source=_ERRORS_DOC),  # 504
    Rule(CAPACITY, code="overloaded_error", source=_ERRORS_DOC),  # 529: "temporarily overloaded"
], codes=anthropic_type, message=anthropic_message)

# The status each in-stream error type would have had as an HTTP answer.
_ERROR_STATUS: dict[Any, int] = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403, "not_found_error": 404,
    "request_too_large": 413, "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529,
    "billing_error": 402, "timeout_error": 504,
}


class MessagesClient(UpstreamClient):
    protocol = "messages"
    errors = ERRORS

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key, "anthropic-version": ANTHROPIC_VERSION}

    def is_terminal(self, event: SSEEvent) -> bool:
        return event.event == "message_stop"

    def stream_error(self, event: SSEEvent) -> UpstreamError | None:
        # The upstream may send an `error` event after its 200 (overloaded mid-stream, say).
        if event.event != "error":
            return None
        try:
            data = event.json()
        except ValueError:
            data = {}
        error: dict[str, Any] = data["error"] if isinstance(data, dict) and isinstance(data.get("error"), dict) else {}
        status = _ERROR_STATUS.get(error.get("type"))
        fault = ERRORS.fault(status, data) if status is not None else UPSTREAM
        return UpstreamError(status, self.redact(f"upstream stream failed: {error.get('message') or 'no detail'}"),
                             retryable=status is None or status == 429 or status >= 500,
                             body=data if isinstance(data, dict) else None, fault=fault)

    async def messages(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/messages", {k: v for k, v in payload.items() if k != "stream"})

    def stream_messages(self, payload: dict[str, Any]) -> EventStream:
        return self.stream("/v1/messages", {**payload, "stream": True})

    async def count_tokens(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/messages/count_tokens", payload)
