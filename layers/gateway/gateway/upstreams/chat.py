"""The chat wire protocol (what the `openai` SDK speaks): chat completions, responses,
embeddings and the model list, with `Authorization: Bearer`."""

from __future__ import annotations

from typing import Any

from gateway.sse import SSEEvent
from gateway.upstreams.base import EventStream, UpstreamClient
from gateway.upstreams.errors import UpstreamError

# A responses stream ends with one of these; response.failed is reported as an error instead.
RESPONSES_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _non_streamed(payload: dict[str, Any]) -> dict[str, Any]:
    # The upstream refuses stream_options on a non-streamed request.
    return {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}


class ChatClient(UpstreamClient):
    protocol = "chat"

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"}

    def is_terminal(self, event: SSEEvent) -> bool:
        return event.is_done or event.event in RESPONSES_TERMINAL_EVENTS

    def stream_error(self, event: SSEEvent) -> UpstreamError | None:
        if event.event in ("error", "response.failed"):
            data = _json(event)
            error = (data.get("response") or {}).get("error") if event.event == "response.failed" else data
            error = error if isinstance(error, dict) else {}
            code = str(error.get("code") or error.get("type") or "")
            detail = error.get("message") or code or "no detail"
            return UpstreamError(None, self.redact(f"upstream stream failed: {detail}"),
                                 retryable=code in ("server_error", "rate_limit_exceeded", "internal_error"),
                                 body=data)
        if event.event is None and '"error"' in event.data:
            data = _json(event)
            error = data.get("error")
            if isinstance(error, dict) and "choices" not in data:
                status = error.get("code") if isinstance(error.get("code"), int) else None
                detail = error.get("message") or "no detail"
                return UpstreamError(status, self.redact(f"upstream stream failed: {detail}"),
                                     retryable=True, body=data)
        return None

    async def chat_completions(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/chat/completions", _non_streamed(payload))

    def stream_chat_completions(self, payload: dict[str, Any]) -> EventStream:
        return self.stream("/v1/chat/completions", {**payload, "stream": True})

    async def responses(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/responses", _non_streamed(payload))

    def stream_responses(self, payload: dict[str, Any]) -> EventStream:
        return self.stream("/v1/responses", {**payload, "stream": True})

    async def compact_responses(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/responses/compact", _non_streamed(payload))

    async def embeddings(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/embeddings", payload)

    async def models(self) -> dict[str, Any]:
        return await self.call("/v1/models", method="GET")


def _json(event: SSEEvent) -> dict[str, Any]:
    try:
        data = event.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
