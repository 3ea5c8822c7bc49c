"""Simulated Vertex AI, mounted at `/vertex`: Google's OAuth token endpoint and the publisher-model
methods of the content and delta protocols.

- `POST /token`: the service-account grant (RFC 7523; developers.google.com/identity/protocols/
  oauth2/service-account "Preparing to make an authorized API call"): a form with `grant_type`
  `urn:ietf:params:oauth:grant-type:jwt-bearer` and an RS256 `assertion` whose `iss` is a service
  account registered here (`SERVICE_ACCOUNTS`: email -> public key PEM; a test registers the key it
  generated; `make run` reads them from the JSON file `GATEWAY_SIM_VERTEX_KEYS` names), `aud`
  Google's token endpoint or this one, a `scope`, and at most an hour between `iat` and `exp`. Answers
  `{access_token, expires_in: 3599, token_type: Bearer}`, or 400 `invalid_grant` as Google does
  ("Invalid JWT Signature.").
- `POST /v1/projects/{project}/locations/{region}/publishers/google/models/{model}:{action}` with
  `Authorization: Bearer <a token issued here, unexpired>` (else 401 UNAUTHENTICATED, Google's
  words): `generateContent`, `streamGenerateContent` (`?alt=sse`) and `countTokens` answered by the
  content simulator (same bodies: Vertex AI REST reference); `predictLongRunning` starts a Veo
  operation named `projects/P/locations/L/publishers/google/models/M/operations/ID`, and
  `fetchPredictOperation` (`{"operationName": name}`) reports it: running for
  `GATEWAY_SIM_TASK_SECONDS`, then done with the videos inline (`response.videos[]
  .bytesBase64Encoded`, what Vertex answers when no `storageUri` is given), or `#fault=fail`.
- Google's own account refusals as everywhere (`provider_faults`: `#fault=keyinvalid`...).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import time
import uuid
from urllib.parse import parse_qs

import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import content
from .delta import MP4_BYTES
from .provider_faults import with_provider_faults

clock = time.time  # tests replace this
SERVICE_ACCOUNTS: dict[str, str] = {}  # client_email -> public key PEM
TOKENS: dict[str, float] = {}  # access token -> expiry
TOKEN_REQUESTS: list[str] = []  # the client_email of every grant answered (tests count them)
OPERATIONS: dict[str, dict] = {}
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_ENDPOINT = "https://oauth2.googleapis.com/token"
_ACTION = re.compile(r"^(?P<model>[A-Za-z0-9._-]+):(?P<action>[A-Za-z]+)$")
_CONTENT_ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")


def task_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_TASK_SECONDS", "3"))


def _registered_in_file(email: str) -> str | None:
    """A public key from the file `GATEWAY_SIM_VERTEX_KEYS` names (a JSON object, email -> public
    key PEM): how `make run` is told the service accounts it should know."""
    path = os.environ.get("GATEWAY_SIM_VERTEX_KEYS")
    if not path:
        return None
    try:
        with open(path) as file:
            known = json.load(file)
    except (OSError, ValueError):
        return None
    found = known.get(email) if isinstance(known, dict) else None
    return found if isinstance(found, str) else None


def _grant_error(description: str) -> JSONResponse:
    return JSONResponse({"error": "invalid_grant", "error_description": description}, status_code=400)


async def token(request: Request) -> Response:
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    if form.get("grant_type") != [GRANT]:
        return JSONResponse({"error": "unsupported_grant_type", "error_description": "Invalid grant_type."},
                            status_code=400)
    assertion = (form.get("assertion") or [""])[0]
    try:
        unverified = jwt.decode(assertion, options={"verify_signature": False})
        header = jwt.get_unverified_header(assertion)
    except jwt.PyJWTError:
        return _grant_error("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                            "timeframe.")
    public = SERVICE_ACCOUNTS.get(str(unverified.get("iss"))) or _registered_in_file(str(unverified.get("iss")))
    if public is None or header.get("alg") != "RS256":
        return _grant_error("Invalid JWT Signature.")
    # google-auth signs for Google's token endpoint whatever the key file's token_uri says
    # (google/oauth2/service_account.py `_GOOGLE_OAUTH2_TOKEN_ENDPOINT`); this endpoint's own URL is taken too.
    audience = [GOOGLE_TOKEN_ENDPOINT, str(request.url.replace(query=""))]
    try:
        claims = jwt.decode(assertion, public, algorithms=["RS256"], audience=audience,
                            options={"require": ["iss", "aud", "iat", "exp"]})
    except jwt.InvalidSignatureError:
        return _grant_error("Invalid JWT Signature.")
    except jwt.PyJWTError as exc:
        return _grant_error(f"Invalid JWT: {exc}")
    if not claims.get("scope") or claims["exp"] - claims["iat"] > 3600:
        return _grant_error("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                            "timeframe.")
    access = "ya29." + secrets.token_urlsafe(24)
    TOKENS[access] = clock() + 3599
    TOKEN_REQUESTS.append(claims["iss"])
    return JSONResponse({"access_token": access, "expires_in": 3599, "token_type": "Bearer"})


def _unauthenticated(reason: str) -> JSONResponse:
    message = ("Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
               "other valid authentication credential.")
    return JSONResponse({"error": {"code": 401, "message": message, "status": "UNAUTHENTICATED", "details": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com",
         "metadata": {"service": "aiplatform.googleapis.com"}}]}}, status_code=401)


def _refusal(request: Request) -> JSONResponse | None:
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    expiry = TOKENS.get(presented.strip()) if scheme.lower() == "bearer" else None
    if expiry is None:
        return _unauthenticated("ACCESS_TOKEN_TYPE_UNSUPPORTED" if presented else "CREDENTIALS_MISSING")
    if expiry <= clock():
        return _unauthenticated("ACCESS_TOKEN_EXPIRED")
    return None


#: Vertex's CountTokensRequest (REST reference, projects.locations.publishers.models.countTokens):
#: no `generateContentRequest` (a Gemini API field), no `toolConfig`, no `safetySettings`.
_COUNT_FIELDS = frozenset({"model", "instances", "contents", "tools", "systemInstruction", "generationConfig"})


def _unknown_count_fields(raw: bytes) -> str | None:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return None  # the content simulator answers a body that is not JSON
    return next((name for name in body if name not in _COUNT_FIELDS), None) if isinstance(body, dict) else None


def _invalid(message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, status_code=400)


def _not_found(message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}, status_code=404)


class _ModelMethod:
    """The publisher-model methods (an ASGI endpoint: the content methods are handed to the
    content simulator as they came, on its own path)."""

    async def __call__(self, scope, receive, send) -> None:
        request = Request(scope, receive)
        params = request.path_params
        found = _ACTION.fullmatch(params["model_action"])
        if not found:
            await _not_found(f"unknown method {params['model_action']!r}")(scope, receive, send)
            return
        if (refused := _refusal(request)) is not None:
            await refused(scope, receive, send)
            return
        model, action = found["model"], found["action"]
        if action in _CONTENT_ACTIONS:
            raw = await request.body()
            if action == "countTokens" and (unknown := _unknown_count_fields(raw)):
                await _invalid(f'Invalid JSON payload received. Unknown name "{unknown}": Cannot find field.')(
                    scope, receive, send)
                return
            path = f"/v1beta/models/{model}:{action}"
            inner = {**scope, "path": path, "raw_path": path.encode(), "root_path": "",
                     "headers": [*scope["headers"], (b"x-goog-api-key", b"vertex-token-checked")]}

            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if replayed:  # then what the server says next (a disconnect)
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}

            await content.app(inner, replay, send)
            return
        if action == "predictLongRunning":
            answer = await _submit(request, params["project"], params["region"], model)
        elif action == "fetchPredictOperation":
            answer = await _fetch(request)
        else:
            answer = _not_found(f"unknown method {action!r}")
        await answer(scope, receive, send)


async def _submit(request: Request, project: str, region: str, model: str) -> JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        body = None
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list) or not instances or not isinstance(instances[0], dict) \
            or not isinstance(instances[0].get("prompt"), str):
        return JSONResponse({"error": {"code": 400, "message": "instances[0].prompt is required",
                                       "status": "INVALID_ARGUMENT"}}, status_code=400)
    if "storageUri" in (body.get("parameters") or {}):
        return JSONResponse({"error": {"code": 400, "message": "the simulator writes no bucket",
                                       "status": "INVALID_ARGUMENT"}}, status_code=400)
    samples = (body.get("parameters") or {}).get("sampleCount")
    name = (f"projects/{project}/locations/{region}/publishers/google/models/{model}/operations/"
            f"{uuid.uuid4()}")
    OPERATIONS[name] = {"created": clock(), "fail": "#fault=fail" in instances[0]["prompt"],
                        "count": max(1, min(4, samples if isinstance(samples, int) else 1))}
    return JSONResponse({"name": name})


async def _fetch(request: Request) -> JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        body = None
    name = body.get("operationName") if isinstance(body, dict) else None
    operation = OPERATIONS.get(name) if isinstance(name, str) else None
    # The operation is fetched under the model (and project, location) that started it.
    started_under = name.split("/operations/")[0] if isinstance(name, str) else ""
    if operation is None or not request.url.path.endswith(f"/{started_under}:fetchPredictOperation"):
        return _not_found(f"Operation {name!r} not found.")
    if clock() - operation["created"] < task_seconds():
        return JSONResponse({"name": name})  # done is left out while false, as protobuf JSON does
    if operation["fail"]:
        return JSONResponse({"name": name, "done": True,
                             "error": {"code": 3, "message": "simulated generation failure (#fault=fail)"}})
    video = {"bytesBase64Encoded": base64.b64encode(MP4_BYTES).decode(), "mimeType": "video/mp4"}
    return JSONResponse({"name": name, "done": True, "response": {
        "@type": "type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse",
        "raiMediaFilteredCount": 0, "videos": [video] * operation["count"]}})


app = with_provider_faults(Starlette(routes=[
    Route("/token", token, methods=["POST"]),
    Route("/v1/projects/{project}/locations/{region}/publishers/google/models/{model_action}", _ModelMethod(),
          methods=["POST"]),
]), "google")
