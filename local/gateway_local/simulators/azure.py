"""Simulated Azure OpenAI resource, mounted at `/azure`: the data plane's deployment routes, the
v1 Responses route, and Entra ID's token endpoint. The answers themselves are the chat
simulator's (the same bodies: Azure OpenAI REST reference, "Data plane - inference"), with
Azure's addresses, auth and filter annotations around them.

- `POST /openai/deployments/{deployment}/chat/completions?api-version=V` and
  `.../embeddings?api-version=V`: the deployment is in the path (a body's `model` is not read);
  without `api-version` a 404 "Resource not found" (MicrosoftDocs/azure-docs#114602), a version
  that is not a dated one a 400 "API version not supported"; a deployment named `missing...` is
  404 `DeploymentNotFound` (Azure OpenAI REST reference; microsoft/semantic-kernel#379).
- `POST /openai/v1/responses` (no api-version: the v1 API, learn.microsoft.com/azure/ai-foundry/
  openai/api-version-lifecycle), `model` the deployment; `/openai/deployments/{d}/responses` is a
  404, as Azure answers it (openai-node#1607, openai-java#586).
- `GET /openai/models?api-version=V`: the resource's models (the health probe).
- The key: `api-key: <key>` (any non-empty key), or `Authorization: Bearer <a token issued by
  the token endpoint here, unexpired>`; else 401 with Azure's words. A key sent as
  `Authorization: Bearer` (as an OpenAI client would) is refused on the deployment routes, taken
  on the v1 route (the v1 API's samples call it with the plain `OpenAI` client).
- Filter annotations (learn.microsoft.com/azure/ai-services/openai/concepts/content-filter,
  "Annotations" and "Streaming"): a chat answer carries `prompt_filter_results` and each choice's
  `content_filter_results`; a chat stream begins with a chunk of no choices, an empty id, model
  and object, holding the prompt's filter results (autogen#6465's curl, pydantic-ai#797), and
  every chunk's choices carry `content_filter_results`.
- `POST /{tenant}/oauth2/v2.0/token`: Entra ID's client credentials grant
  (learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow): a form with
  `grant_type=client_credentials`, `client_id`, `client_secret` and the scope
  `https://cognitiveservices.azure.com/.default`; a principal registered here (`PRINCIPALS`,
  client id -> secret; `make run` knows `SIMULATOR_PRINCIPAL`) gets `{token_type: Bearer,
  expires_in: 3599, ext_expires_in: 3599, access_token}`; a wrong secret 401 `invalid_client`
  (AADSTS7000215), an unknown client 400 `unauthorized_client` (AADSTS700016), another scope 400
  `invalid_scope` (AADSTS70011), with Entra's words.
- Faults: the chat simulator's (`#fault=500`, `/fault/429/...`), and Azure's own
  (`provider_faults`): `#fault=content_filter` is the content filter's 400 on the prompt,
  `#fault=keyinvalid` (or a base URL ending in `/account/keyinvalid`) the 401 of a wrong key.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import chat
from ._text import with_fault_prefix
from .provider_faults import with_provider_faults

clock = time.time  # tests replace this
SCOPE = "https://cognitiveservices.azure.com/.default"
#: The service principal `make run`'s simulator knows (tenant, client id, secret).
SIMULATOR_PRINCIPAL = ("simulator-tenant", "simulator-client", "simulator-secret")
PRINCIPALS: dict[str, str] = {SIMULATOR_PRINCIPAL[1]: SIMULATOR_PRINCIPAL[2]}  # client id -> secret
TOKENS: dict[str, float] = {}  # access token -> expiry
TOKEN_REQUESTS: list[str] = []  # the client id of every grant answered (tests count them)
_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(-preview)?$")
_SAFE = {"filtered": False, "severity": "safe"}
#: What the filter says of a prompt or an answer it let through (content-filter "Annotations").
FILTER_RESULTS = {"hate": _SAFE, "self_harm": _SAFE, "sexual": _SAFE, "violence": _SAFE,
                  "jailbreak": {"filtered": False, "detected": False}}
_ACCESS_DENIED = ("Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid "
                  "key for an active subscription and use a correct regional API endpoint for your resource.")


def _azure_error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _refusal(request: Request, *, v1: bool = False) -> Response | None:
    """Azure's 401 for a request without a valid key or token. The v1 routes also take the key
    as a bearer (the v1 API's samples: `OpenAI(api_key=AZURE_OPENAI_API_KEY, base_url=.../openai/v1/)`)."""
    if request.headers.get("api-key", "").strip():
        return None
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if v1 and scheme.lower() == "bearer" and presented.strip() and presented.strip() not in TOKENS:
        return None
    if scheme.lower() == "bearer" and presented.strip() in TOKENS:
        if TOKENS[presented.strip()] > clock():
            return None
        return _azure_error(401, "401", "Unauthorized. Access token is missing, invalid, audience is incorrect "
                                        "(https://cognitiveservices.azure.com), or have expired.")
    return _azure_error(401, "401", _ACCESS_DENIED)


def _version_refusal(request: Request) -> Response | None:
    version = request.query_params.get("api-version")
    if version is None:
        return _azure_error(404, "404", "Resource not found")
    if not _VERSION.fullmatch(version):
        return _azure_error(400, "BadRequest", "API version not supported")
    return None


async def _as_chat(request: Request, endpoint: Callable[[Request], Awaitable[Response]], path: str) -> Response:
    """The chat simulator's answer to this request, sent to its own `path` with its own auth (a
    deployment route's body needs no `model`: the path names the deployment)."""
    raw = await request.body()
    deployment = request.path_params.get("deployment")
    try:
        body = json.loads(raw) if deployment else None
    except ValueError:
        body = None
    if isinstance(body, dict) and "model" not in body:
        raw = json.dumps({**body, "model": deployment}).encode()
    headers = [(k, v) for k, v in request.scope["headers"] if k not in (b"authorization", b"api-key")]
    inner = {**request.scope, "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "headers": [*headers, (b"authorization", b"Bearer azure-key-checked")]}
    replayed = False

    async def receive() -> Any:
        nonlocal replayed
        if replayed:
            return await request.receive()
        replayed = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return await endpoint(Request(inner, receive))


def _annotated_chat(answer: Response) -> Response:
    """A chat answer with Azure's filter annotations (errors as they are)."""
    if answer.status_code != 200:
        return answer
    if isinstance(answer, StreamingResponse):
        return StreamingResponse(_annotated_events(answer.body_iterator), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})
    try:
        body = json.loads(bytes(answer.body))
    except ValueError:  # a cut answer (`#fault=cut`) stays cut
        return answer
    body["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": FILTER_RESULTS}]
    for choice in body.get("choices") or []:
        choice["content_filter_results"] = FILTER_RESULTS
    return JSONResponse(body)


async def _annotated_events(events: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    first = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
             "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": FILTER_RESULTS}]}
    yield f"data: {json.dumps(first)}\n\n".encode()
    async for event in events:
        raw = event if isinstance(event, bytes) else str(event).encode()
        yield b"".join(_annotated_event(piece) for piece in raw.split(b"\n\n") if piece.strip())


def _annotated_event(event: bytes) -> bytes:
    if not event.startswith(b"data: {"):
        return event + b"\n\n"
    data = json.loads(event[6:])
    for choice in data.get("choices") or []:
        choice["content_filter_results"] = FILTER_RESULTS if (choice.get("delta") or {}).get("content") else {}
    return f"data: {json.dumps(data)}\n\n".encode()


async def deployment_chat(request: Request) -> Response:
    refused = _refusal(request) or _version_refusal(request) or _deployment_refusal(request)
    if refused is not None:
        return refused
    return _annotated_chat(await _as_chat(request, chat.chat_completions, "/v1/chat/completions"))


async def deployment_embeddings(request: Request) -> Response:
    refused = _refusal(request) or _version_refusal(request) or _deployment_refusal(request)
    if refused is not None:
        return refused
    return await _as_chat(request, chat.embeddings, "/v1/embeddings")


async def deployment_responses(request: Request) -> Response:
    """Not a route of Azure's: the Responses API lives on the v1 route only."""
    return _azure_error(404, "404", "Resource not found")


async def v1_responses(request: Request) -> Response:
    refused = _refusal(request, v1=True)
    if refused is not None:
        return refused
    return await _as_chat(request, chat.responses, "/v1/responses")


def _deployment_refusal(request: Request) -> Response | None:
    if request.path_params["deployment"].startswith("missing"):
        return _azure_error(404, "DeploymentNotFound", "The API deployment for this resource does not exist. If you "
                                                       "created the deployment within the last 5 minutes, please "
                                                       "wait a moment and try again.")
    return None


async def models(request: Request) -> Response:
    refused = _refusal(request) or _version_refusal(request)
    if refused is not None:
        return refused
    return JSONResponse({"object": "list", "data": [
        {"id": model, "object": "model", "created_at": 1700000000, "status": "succeeded",
         "lifecycle_status": "generally-available",
         "capabilities": {"chat_completion": not model.startswith("e-"), "embeddings": model.startswith("e-"),
                          "completion": False, "fine_tune": False, "inference": True}}
        for model in chat.MODELS]})


# ---- Entra ID ---------------------------------------------------------------------------------------

def _entra_error(status: int, error: str, code: int, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": f"AADSTS{code}: {description} Trace ID: "
                         f"{uuid.uuid4()} Correlation ID: {uuid.uuid4()} Timestamp: 2026-01-01 00:00:00Z",
                         "error_codes": [code], "timestamp": "2026-01-01 00:00:00Z", "trace_id": str(uuid.uuid4()),
                         "correlation_id": str(uuid.uuid4())}, status_code=status)


async def token(request: Request) -> Response:
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    tenant = request.path_params["tenant"]
    if form.get("grant_type") != "client_credentials":
        return _entra_error(400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
    if form.get("scope") != SCOPE:
        return _entra_error(400, "invalid_scope", 70011, "The provided value for the input parameter 'scope' is "
                                                         "not valid.")
    client_id = form.get("client_id", "")
    if client_id not in PRINCIPALS:
        return _entra_error(400, "unauthorized_client", 700016, f"Application with identifier '{client_id}' was not "
                                                                f"found in the directory '{tenant}'.")
    if form.get("client_secret") != PRINCIPALS[client_id]:
        return _entra_error(401, "invalid_client", 7000215, "Invalid client secret provided. Ensure the secret "
                                                            "being sent in the request is the client secret value, "
                                                            f"not the client secret ID, for a secret added to app "
                                                            f"'{client_id}'.")
    access = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + secrets.token_urlsafe(32)
    TOKENS[access] = clock() + 3599
    TOKEN_REQUESTS.append(client_id)
    return JSONResponse({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": access})


app = with_provider_faults(Starlette(routes=[
    Route("/{tenant}/oauth2/v2.0/token", token, methods=["POST"]),
    *with_fault_prefix([
        Route("/openai/deployments/{deployment}/chat/completions", deployment_chat, methods=["POST"]),
        Route("/openai/deployments/{deployment}/embeddings", deployment_embeddings, methods=["POST"]),
        Route("/openai/deployments/{deployment}/responses", deployment_responses, methods=["POST"]),
        Route("/openai/v1/responses", v1_responses, methods=["POST"]),
        Route("/openai/models", models, methods=["GET"]),
    ]),
]), "azure")
