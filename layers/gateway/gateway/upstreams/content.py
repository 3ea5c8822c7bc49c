"""The content-generation wire protocol (what the `google-genai` SDK speaks), with
`x-goog-api-key`. Streams are asked for as SSE (`?alt=sse`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.sse import SSEEvent
from gateway.upstreams.base import EventStream, UpstreamClient
from gateway.upstreams.errors import UpstreamError, retryable_status


def model_path(model: str, action: str) -> str:
    return f"/v1beta/models/{quote(model.removeprefix('models/'), safe='')}:{action}"


class ContentClient(UpstreamClient):
    protocol = "content"
    stream_params = {"alt": "sse"}
    probe_path = "/v1beta/models"

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key}

    def is_terminal(self, event: SSEEvent) -> bool:
        # Each event is a whole response; the last one carries a finishReason.
        if '"finishReason"' not in event.data:
            return False
        data = _json(event)
        return any(isinstance(c, dict) and c.get("finishReason") for c in data.get("candidates") or [])

    def stream_error(self, event: SSEEvent) -> UpstreamError | None:
        if '"error"' not in event.data:
            return None
        data = _json(event)
        error = data.get("error")
        if not isinstance(error, dict) or "candidates" in data:
            return None
        status = error.get("code") if isinstance(error.get("code"), int) else None
        return UpstreamError(status, self.redact(f"upstream stream failed: {error.get('message') or 'no detail'}"),
                             retryable=status is None or retryable_status(status), body=data)

    async def generate_content(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(model_path(model, "generateContent"), payload)

    def stream_generate_content(self, model: str, payload: dict[str, Any]) -> EventStream:
        return self.stream(model_path(model, "streamGenerateContent"), payload)

    async def count_tokens(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(model_path(model, "countTokens"), payload)

    async def embed_content(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(model_path(model, "embedContent"), payload)

    async def batch_embed_contents(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(model_path(model, "batchEmbedContents"), payload)


def _json(event: SSEEvent) -> dict[str, Any]:
    try:
        data = event.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
