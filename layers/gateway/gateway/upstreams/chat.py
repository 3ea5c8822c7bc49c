"""The chat wire protocol (what the `openai` SDK speaks): chat completions, responses,
embeddings, speech, transcriptions and translations, moderations and the model list, with
`Authorization: Bearer`."""

from __future__ import annotations

from typing import Any

from gateway.sse import SSEEvent
from gateway.upstreams.base import ByteStream, EventStream, UpstreamClient
from gateway.upstreams.errors import ACCOUNT, CAPACITY, ErrorTable, Rule, UpstreamError

# A responses stream ends with one of these; response.failed is reported as an error instead.
RESPONSES_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})

_GUIDE = "platform.openai.com/docs/guides/error-codes"


def openai_codes(body: Any) -> list[str]:
    """The OpenAI envelope's `error.code` and `error.type` (a streamed `error` event carries them
    at the top level)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(body.get("response"), dict):  # response.failed
        error = body["response"].get("error") or error
    if not isinstance(error, dict):
        return []
    return [str(error[k]) for k in ("code", "type") if isinstance(error.get(k), (str, int)) and error.get(k)]


#: OpenAI's errors (the chat, responses, embeddings and images endpoints; `_GUIDE` "API errors").
#: Not listed: 400/404/413/422 are the request's (relayed), 401/403 the channel's key or
#: organisation (`default_fault`), other 429s a rate limit, 5xx the upstream's own.
ERRORS = ErrorTable("chat", [
    # "429 - You exceeded your current quota, please check your plan and billing details": the
    # account's credit, not a rate limit (`_GUIDE`; the body `{"error": {"type": "insufficient_quota",
    # "code": "insufficient_quota"}}` as users meet it, plexpt/chatgpt-java#249).
    Rule(ACCOUNT, code="insufficient_quota", source=_GUIDE),
    # The spending limit the organisation's owner set (images endpoints: a 400), and billing
    # switched off: about the account (as users' code meets them: error.code in the envelope).
    Rule(ACCOUNT, code="billing_hard_limit_reached", source="users' reports of the images endpoints"),
    Rule(ACCOUNT, code="billing_not_active", source="users' reports"),
    Rule(ACCOUNT, code="account_deactivated", source=_GUIDE),
    # "403 - Country, region, or territory not supported": where the gateway runs, not the client.
    Rule(ACCOUNT, code="unsupported_country_region_territory", source=_GUIDE),
    Rule(CAPACITY, code="rate_limit_exceeded", source=_GUIDE),
], codes=openai_codes)


def _non_streamed(payload: dict[str, Any]) -> dict[str, Any]:
    # The upstream refuses stream_options on a non-streamed request.
    return {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}


class ChatClient(UpstreamClient):
    protocol = "chat"
    errors = ERRORS

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
            fault = ERRORS.fault(None, data)
            return UpstreamError(None, self.redact(f"upstream stream failed: {detail}"),
                                 retryable=code in ("server_error", "rate_limit_exceeded", "internal_error"),
                                 body=data, fault=fault if fault == ACCOUNT else None)
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

    def speech(self, payload: dict[str, Any]) -> ByteStream:
        """The audio (or, with `stream_format: sse`, its events) as the upstream sends it."""
        sse = payload.get("stream_format") == "sse"
        return self.byte_stream("/v1/audio/speech", payload, "text/event-stream" if sse else "application/octet-stream")

    async def audio_text(self, operation: str, fields: dict[str, Any], file: tuple[str, bytes, str]) -> bytes:
        """A transcription's or translation's answer, JSON or text as asked (`last_headers` has its type)."""
        return await self.call_form(f"/v1/audio/{operation}s", fields, {"file": file})

    def stream_transcription(self, fields: dict[str, Any], file: tuple[str, bytes, str]) -> EventStream:
        """A transcription asked with `stream: true`: its `transcript.text.*` events, ended by
        `transcript.text.done` (openai-openapi `CreateTranscriptionResponseStreamEvent`), or the
        whole answer where the model does not stream (whisper-1 ignores the field:
        `EventStream.is_event_stream` tells)."""
        return self.stream_form("/v1/audio/transcriptions", fields, {"file": file}, terminal=transcript_done)

    async def moderations(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/v1/moderations", payload)

    async def models(self) -> dict[str, Any]:
        return await self.call("/v1/models", method="GET")


TRANSCRIPT_DONE = "transcript.text.done"


def transcript_done(event: SSEEvent) -> bool:
    """A streamed transcription's last event (its `type` in the data; no `event:` line is needed)."""
    if event.event == TRANSCRIPT_DONE:
        return True
    return TRANSCRIPT_DONE in event.data and _json(event).get("type") == TRANSCRIPT_DONE


def _json(event: SSEEvent) -> dict[str, Any]:
    try:
        data = event.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
