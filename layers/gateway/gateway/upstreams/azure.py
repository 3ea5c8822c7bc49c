"""Azure OpenAI: the chat protocol (`upstreams/chat.py`) on an Azure resource's addresses, with
its key in `api-key` or an Entra ID token.

An azure channel's `base_url` is the resource's endpoint (`https://NAME.openai.azure.com`,
`.cognitiveservices.azure.com`), its `model_map` names the deployment. The bodies and answers are
OpenAI's (Azure OpenAI REST reference, data plane inference; openai-python's `lib/azure.py`
sends the same bodies, only the URL and the auth differ), so the conversions are the chat
channel's; only the addresses are Azure's:

- chat completions and embeddings under the deployment, with the data plane's `api-version`
  (`DEFAULT_API_VERSION`, the latest dated GA version, or the channel's `api_version`):
  `POST /openai/deployments/{deployment}/chat/completions?api-version=V` (openai-python
  `AzureOpenAI._build_request`: `/deployments/{model}` for `_deployments_endpoints`; without the
  query Azure answers 404, MicrosoftDocs/azure-docs#114602);
- the Responses API only on the v1 route, `POST /openai/v1/responses` with the deployment as
  `model` (learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle "API evolution";
  under `/deployments/` it is a 404: openai-node#1607, openai-java#586, litellm#41387);
- the health probe: the resource's model list, `GET /openai/models?api-version=V` (free).

The key: an Azure API key goes in `api-key` (openai-python `_prepare_options`). A service
principal (`service_principal`) is exchanged for an Entra ID token by the client credentials
grant (learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow), scope
`https://cognitiveservices.azure.com/.default`, sent as `Authorization: Bearer` and cached as
every minted token is (`upstreams/tokens.py`).

Azure's own answers: a prompt its content filter refuses is a 400 `content_filter` (the
client's: never failed over, never cooled); a success carries `prompt_filter_results` and each
choice's `content_filter_results`, and a stream begins with a chunk of no choices that holds only
the prompt's filter results (learn.microsoft.com/azure/ai-services/openai/concepts/content-filter
"Streaming"; openai-python#1677, pydantic-ai#797): such chunks are dropped here, so no client of
any dialect ever sees a chunk with an empty id and no choices.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from gateway.sse import SSEEvent
from gateway.upstreams import tokens as tokens_base
from gateway.upstreams.base import EventStream, Timeouts
from gateway.upstreams.chat import ERRORS as CHAT_ERRORS
from gateway.upstreams.chat import ChatClient, _non_streamed, openai_codes
from gateway.upstreams.errors import ACCOUNT, CLIENT, UPSTREAM, ErrorTable, Rule, UpstreamError

#: The latest dated GA version of the data plane (Azure OpenAI REST reference, "Data plane -
#: inference": 2024-10-21 GA).
DEFAULT_API_VERSION = "2024-10-21"
ENTRA_AUTHORITY = "https://login.microsoftonline.com"
SCOPE = "https://cognitiveservices.azure.com/.default"

_FILTERS = "learn.microsoft.com/azure/ai-services/openai/concepts/content-filter"

#: Azure's own errors first, then OpenAI's (the same envelope).
ERRORS = ErrorTable("azure", [
    # A prompt (or a jailbreak) the resource's content filter refuses: a 400 `content_filter`,
    # `innererror.code` ResponsibleAIPolicyViolation (`_FILTERS` "Scenario details"; users'
    # bodies: vibrantlabsai/ragas#649, Gitlawb/openclaude#273). The request's, whatever its status.
    Rule(CLIENT, code="content_filter", source=_FILTERS),
    Rule(CLIENT, code="ResponsibleAIPolicyViolation", source=_FILTERS),
    # "The API deployment for this resource does not exist": the operator's model_map names a
    # deployment the resource lacks (Azure OpenAI REST reference; microsoft/semantic-kernel#379).
    Rule(ACCOUNT, code="DeploymentNotFound", source="Azure OpenAI REST reference"),
    *CHAT_ERRORS.rules,
], codes=lambda body: [*openai_codes(body), *_inner_codes(body)])


def _inner_codes(body: Any) -> list[str]:
    error = body.get("error") if isinstance(body, dict) else None
    inner = error.get("innererror") if isinstance(error, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return [code] if isinstance(code, str) and code else []


# ---- the key: an API key or a service principal ----------------------------------------------------

@dataclass(frozen=True)
class ServicePrincipal:
    """An Entra ID application's client secret (what `az ad sp create-for-rbac` prints)."""

    tenant: str
    client_id: str
    client_secret: str = ""
    authority: str = ENTRA_AUTHORITY

    def __repr__(self) -> str:  # never the secret
        return f"ServicePrincipal(tenant={self.tenant!r}, client_id={self.client_id!r})"

    @property
    def token_url(self) -> str:
        return f"{self.authority.rstrip('/')}/{quote(self.tenant, safe='')}/oauth2/v2.0/token"


def service_principal(api_key: str) -> ServicePrincipal | None:
    """The service principal an azure channel's key names, None for an Azure API key. Two forms:
    `tenant|client_id|client_secret`, or the JSON `az ad sp create-for-rbac` prints (`tenant`,
    `appId`, `password`), which may add `authority` (a sovereign cloud's sign-in host). An API key
    holds neither `|` nor `{`. ValueError naming what is missing."""
    key = api_key.strip()
    if key.startswith("{"):
        try:
            info = json.loads(key)
        except ValueError:
            raise ValueError("an azure channel's JSON key must be the service principal az prints") from None
        if not isinstance(info, dict):
            raise ValueError("an azure channel's JSON key must be an object")
        values = {"tenant": info.get("tenant") or info.get("tenant_id"),
                  "appId": info.get("appId") or info.get("client_id"),
                  "password": info.get("password") or info.get("client_secret")}
        missing = [name for name, value in values.items() if not isinstance(value, str) or not value]
        if missing:
            raise ValueError(f"the service principal lacks {', '.join(missing)}")
        authority = info.get("authority") or ENTRA_AUTHORITY
        if not isinstance(authority, str) or not authority.startswith(("https://", "http://")):
            raise ValueError("authority: must be an http(s) URL")
        return ServicePrincipal(str(values["tenant"]), str(values["appId"]), str(values["password"]), authority)
    if "|" in key:
        parts = key.split("|", 2)
        if len(parts) != 3 or not all(parts):
            raise ValueError("an azure channel's service principal is tenant|client_id|client_secret")
        return ServicePrincipal(*parts)
    return None


class EntraTokenCache(tokens_base.TokenCache):
    """Entra ID access tokens by service principal (client credentials grant)."""

    def prepare(self, api_key: str) -> ServicePrincipal:
        try:
            principal = service_principal(api_key)
        except ValueError as exc:
            raise UpstreamError(401, f"the channel's service principal cannot be used: {exc}", fault=ACCOUNT) from None
        if principal is None:
            raise UpstreamError(401, "the channel's key is no service principal", fault=ACCOUNT)
        return principal

    def exchange(self, state: Any, http: httpx.Client) -> tuple[str, float]:
        principal: ServicePrincipal = state
        form = {"grant_type": "client_credentials", "client_id": principal.client_id,
                "client_secret": principal.client_secret, "scope": SCOPE}
        try:
            answer = http.post(principal.token_url, data=form, timeout=tokens_base.TOKEN_TIMEOUT)
        except httpx.HTTPError as exc:
            raise UpstreamError(None, "the Entra ID token endpoint could not be reached: "
                                f"{tokens_base.first_line(exc)}", retryable=True) from None
        try:
            body = answer.json()
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        if answer.status_code >= 400 or not isinstance(body.get("access_token"), str):
            # invalid_client (a wrong or expired secret), unauthorized_client, a tenant not found:
            # the channel's account; the endpoint's own 5xx: the upstream's, retryable.
            detail = str(body.get("error_description") or body.get("error") or answer.status_code).splitlines()[0]
            if answer.status_code >= 500:
                raise UpstreamError(503, f"the Entra ID token endpoint failed: {detail[:300]}", fault=UPSTREAM)
            raise UpstreamError(401, f"Entra ID refused the channel's service principal: {detail[:300]}",
                                fault=ACCOUNT)
        lifetime = body.get("expires_in")  # seconds, a number (an older endpoint: a string of digits)
        seconds = float(lifetime) if isinstance(lifetime, (int, float)) or \
            (isinstance(lifetime, str) and lifetime.isdigit()) else 3600.0
        return body["access_token"], seconds


_tokens = EntraTokenCache()


def tokens() -> EntraTokenCache:
    """This instance's Entra ID token cache."""
    return _tokens


# ---- the client ----------------------------------------------------------------------------------

def _annotation_only(event: SSEEvent) -> bool:
    """A chat chunk that carries only Azure's filter results: no choices and no usage (the
    stream's first, `prompt_filter_results`), or choices with neither a delta nor a finish
    reason (the asynchronous filter's `content_filter_results` / `content_filter_offsets`)."""
    if event.event is not None or event.is_done or "filter" not in event.data:
        return False
    try:
        data = event.json()
    except ValueError:
        return False
    if not isinstance(data, dict) or "error" in data:
        return False
    choices = data.get("choices")
    if not choices:
        return data.get("usage") is None
    return isinstance(choices, list) and all(
        isinstance(c, dict) and c.get("delta") is None and c.get("finish_reason") is None for c in choices)


class AzureClient(ChatClient):
    protocol = "azure"
    errors = ERRORS

    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient, timeouts: Timeouts | None = None, *,
                 api_version: str | None = None):
        # An endpoint copied with its path (".../openai", ".../openai/v1") is the same resource.
        super().__init__(base_url.rstrip("/").removesuffix("/openai/v1").removesuffix("/openai"), api_key,
                         client, timeouts)
        self.api_version = api_version or DEFAULT_API_VERSION
        try:
            self._principal = service_principal(api_key)
        except ValueError:
            self._principal = ServicePrincipal("", "")  # refused by the token cache, as the account's
        self._token = ""

    # --- addresses --------------------------------------------------------------------------------

    def deployment_path(self, deployment: str, operation: str) -> str:
        return (f"/openai/deployments/{quote(deployment, safe='')}/{operation}"
                f"?api-version={quote(self.api_version, safe='')}")

    async def chat_completions(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.deployment_path(payload["model"], "chat/completions"), _non_streamed(payload))

    def stream_chat_completions(self, payload: dict[str, Any]) -> EventStream:
        return self.stream(self.deployment_path(payload["model"], "chat/completions"), {**payload, "stream": True})

    async def embeddings(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call(self.deployment_path(payload["model"], "embeddings"), payload)

    async def responses(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.call("/openai/v1/responses", _non_streamed(payload))

    def stream_responses(self, payload: dict[str, Any]) -> EventStream:
        return self.stream("/openai/v1/responses", {**payload, "stream": True})

    async def models(self) -> dict[str, Any]:
        return await self.call(f"/openai/models?api-version={quote(self.api_version, safe='')}", method="GET")

    async def probe(self) -> None:
        await self.models()

    # --- the key ----------------------------------------------------------------------------------

    def auth_headers(self) -> dict[str, str]:
        if self._principal is None:
            return {"api-key": self._api_key}
        return {"authorization": f"Bearer {self._token}"}

    def redact(self, text: str) -> str:
        text = super().redact(text)
        if self._principal is not None and self._principal.client_secret:
            text = text.replace(self._principal.client_secret, "***")
        return text.replace(self._token, "***") if self._token else text

    async def _authorize(self) -> None:
        if self._principal is not None:
            self._token = await tokens().token_async(self._api_key)

    async def call(self, path: str, payload: dict[str, Any] | None = None, *, method: str = "POST") -> dict[str, Any]:
        await self._authorize()
        return await super().call(path, payload, method=method)

    def stream(self, path: str, payload: dict[str, Any]) -> EventStream:
        return _AzureStream(self, path, payload)


class _AzureStream(EventStream):
    """An Azure stream: its request built once the token is in hand, its filter-only chunks dropped."""

    def __init__(self, owner: AzureClient, path: str, payload: dict[str, Any]):
        super().__init__(owner, None)  # type: ignore[arg-type]  # built in open()
        self._azure = owner
        self._path, self._payload = path, payload

    async def open(self) -> None:
        if self._request is None:
            await self._azure._authorize()
            self._request = self._azure._request("POST", self._path, self._payload, stream=True)
        await super().open()

    async def _events(self) -> AsyncGenerator[SSEEvent]:
        async with aclosing(super()._events()) as events:
            async for event in events:
                if not _annotation_only(event):
                    yield event
