"""The content-generation wire protocol (what the `google-genai` SDK speaks), with
`x-goog-api-key`. Streams are asked for as SSE (`?alt=sse`)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx

from gateway.sse import SSEEvent
from gateway.upstreams.base import EventStream, Timeouts, UpstreamClient
from gateway.upstreams.errors import (
    ACCOUNT,
    CAPACITY,
    ErrorTable,
    Rule,
    UpstreamError,
    google_codes,
    google_message,
    retryable_status,
)
from gateway.upstreams.vertex import VertexSite, tokens

_TROUBLESHOOTING = "ai.google.dev/gemini-api/docs/troubleshooting"
_REASONS = "googleapis/googleapis google/api/error_reason.proto"

#: Google's errors (the Gemini API and Vertex AI answer alike): `error.status`, the canonical
#: code, and `error.details[].reason` (a `google.rpc.ErrorInfo`). The reasons first: a revoked,
#: expired or wrong key is a **400** INVALID_ARGUMENT whose ErrorInfo says `API_KEY_INVALID`
#: (the body as users meet it: continuedev/continue#8516, google/timesketch#3703), not the
#: request's fault. The delta family (Veo) shares these rules.
GOOGLE_RULES = (
    *(Rule(ACCOUNT, code=reason, source=_REASONS) for reason in (
        "API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED", "API_KEY_HTTP_REFERRER_BLOCKED",
        "API_KEY_IP_ADDRESS_BLOCKED", "API_KEY_ANDROID_APP_BLOCKED", "API_KEY_IOS_APP_BLOCKED",
        "SERVICE_DISABLED", "BILLING_DISABLED", "CONSUMER_SUSPENDED", "CONSUMER_INVALID",
        "ACCESS_TOKEN_EXPIRED", "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "ACCESS_TOKEN_TYPE_UNSUPPORTED",
        "ACCOUNT_STATE_INVALID", "USER_PROJECT_DENIED", "ORG_RESTRICTION_VIOLATION", "SECURITY_POLICY_VIOLATED")),
    Rule(CAPACITY, code="RATE_LIMIT_EXCEEDED", source=_REASONS),
    Rule(CAPACITY, code="RESOURCE_QUOTA_EXCEEDED", source=_REASONS),
    # "400 FAILED_PRECONDITION: Gemini API free tier is not available in your country. Please
    # enable billing on your project" (and "User location is not supported"): the channel's.
    Rule(ACCOUNT, status=400, code="FAILED_PRECONDITION", source=_TROUBLESHOOTING),
    Rule(ACCOUNT, code="UNAUTHENTICATED", source=_TROUBLESHOOTING),  # 401: Vertex's expired token
    Rule(ACCOUNT, code="PERMISSION_DENIED", source=_TROUBLESHOOTING),  # 403: the key lacks permission
    Rule(CAPACITY, code="RESOURCE_EXHAUSTED", source=_TROUBLESHOOTING),  # 429: a rate or quota limit
)
ERRORS = ErrorTable("content", GOOGLE_RULES, codes=google_codes, message=google_message)
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)s$")


def retry_delay(body: Any) -> float | None:
    """The wait a 429 names in its `google.rpc.RetryInfo` detail (`"retryDelay": "37s"`)."""
    error = body.get("error") if isinstance(body, dict) else None
    for detail in (error.get("details") or []) if isinstance(error, dict) else []:
        if isinstance(detail, dict) and isinstance(detail.get("retryDelay"), str):
            if found := _SECONDS.match(detail["retryDelay"]):
                return float(found[1])
    return None


def model_path(model: str, action: str) -> str:
    return f"/v1beta/models/{quote(model.removeprefix('models/'), safe='')}:{action}"


class ContentClient(UpstreamClient):
    protocol = "content"
    stream_params = {"alt": "sse"}
    probe_path = "/v1beta/models"
    errors = ERRORS

    def model_path(self, model: str, action: str) -> str:
        return model_path(model, action)

    def status_error(self, status: int, headers: httpx.Headers, content: bytes) -> UpstreamError:
        error = super().status_error(status, headers, content)
        if error.retry_after is None and error.fault == CAPACITY:
            error.retry_after = retry_delay(error.body)
        return error

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
                             retryable=status is None or retryable_status(status), body=data,
                             fault=ERRORS.fault(status, data))

    async def generate_content(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.model_path(model, "generateContent"), payload)

    def stream_generate_content(self, model: str, payload: dict[str, Any]) -> EventStream:
        return self.stream(self.model_path(model, "streamGenerateContent"), payload)

    async def count_tokens(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.model_path(model, "countTokens"), payload)

    async def embed_content(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.model_path(model, "embedContent"), payload)

    async def batch_embed_contents(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.model_path(model, "batchEmbedContents"), payload)


def _json(event: SSEEvent) -> dict[str, Any]:
    try:
        data = event.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


_VERTEX_COUNT_FIELDS = ("contents", "systemInstruction", "tools", "generationConfig")


class VertexContentClient(ContentClient):
    """The content protocol on Vertex AI (`upstreams/vertex.py`): the regional host, the
    project's publisher-model paths, and an OAuth access token from the channel's service
    account instead of `x-goog-api-key`. The body and answers are the same as the Gemini API's
    (Vertex AI REST reference, `projects.locations.publishers.models.generateContent`)."""

    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient, timeouts: Timeouts | None = None, *,
                 site: VertexSite, probe_model: str = "gemini-2.5-flash"):
        super().__init__(base_url, api_key, client, timeouts)
        self.site = site
        self.probe_model = probe_model
        self._token = ""

    def model_path(self, model: str, action: str) -> str:
        return self.site.model_path(model, action)

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._token}"}

    def redact(self, text: str) -> str:  # the token, and the key file's private key, never in a message
        text = super().redact(text)
        return text.replace(self._token, "***") if self._token else text

    async def _authorize(self) -> None:
        self._token = await tokens().token_async(self._api_key)

    async def call(self, path: str, payload: dict[str, Any] | None = None, *, method: str = "POST") -> dict[str, Any]:
        await self._authorize()
        return await super().call(path, payload, method=method)

    def stream(self, path: str, payload: dict[str, Any]) -> EventStream:
        return _AuthorizedStream(self, path, payload)

    async def count_tokens(self, model: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Vertex's CountTokensRequest has the request's fields at its top, and only some of them
        (REST reference, `projects.locations.publishers.models.countTokens`): a Gemini API body's
        `generateContentRequest` is unpacked, what Vertex does not count with is left out."""
        inner = payload.get("generateContentRequest")
        source = inner if isinstance(inner, dict) else payload
        return await super().count_tokens(model, {k: v for k, v in source.items() if k in _VERTEX_COUNT_FIELDS})

    async def probe(self) -> None:
        """Vertex has no model list under a project: a free token count of one word instead."""
        await self.count_tokens(self.probe_model, {"contents": [{"role": "user", "parts": [{"text": "ping"}]}]})


class _AuthorizedStream(EventStream):
    """An event stream whose request is built once the access token is in hand."""

    def __init__(self, owner: VertexContentClient, path: str, payload: dict[str, Any]):
        super().__init__(owner, None)  # type: ignore[arg-type]  # built in open()
        self._vertex = owner
        self._path, self._payload = path, payload

    async def open(self) -> None:
        if self._request is None:
            await self._vertex._authorize()
            self._request = self._vertex._request("POST", self._path, self._payload, stream=True)
        await super().open()
