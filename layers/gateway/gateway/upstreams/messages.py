"""The messages wire protocol (what the `anthropic` SDK speaks), with `x-api-key`."""

from __future__ import annotations

from typing import Any

from gateway.sse import SSEEvent
from gateway.upstreams.base import EventStream, UpstreamClient
from gateway.upstreams.errors import UpstreamError

ANTHROPIC_VERSION = "2023-06-01"

# The status each in-stream error type would have had as an HTTP answer.
_ERROR_STATUS: dict[Any, int] = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403, "not_found_error": 404,
    "request_too_large": 413, "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529,
}


class MessagesClient(UpstreamClient):
    protocol = "messages"

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
        return UpstreamError(status, self.redact(f"upstream stream failed: {error.get('message') or 'no detail'}"),
                             retryable=status is None or status == 429 or status >= 500,
                             body=data if isinstance(data, dict) else None)

    async def messages(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/messages", {k: v for k, v in payload.items() if k != "stream"})

    def stream_messages(self, payload: dict[str, Any]) -> EventStream:
        return self.stream("/v1/messages", {**payload, "stream": True})

    async def count_tokens(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/messages/count_tokens", payload)
