"""The OpenAPI document of the gateway, generated from the code: every route of template.yaml,
each request body from the pydantic model that validates it, each error in its route family's
envelope (`gateway.errors.render`).

`make openapi` writes it to docs/openapi.json (committed; a test fails when it is stale). The
local runner serves it at /openapi.json, with Swagger UI at /docs; the fuzz test
(tests/e2e/test_fuzz.py) generates requests from it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gateway.errors import Dialect, GatewayError, dialect_for_path, render
from gateway.http import CATCH_ALL_RESOURCES, STATE_CHANGING
from gateway.tasks.adapter import UNIFIED
from gateway.tasks.families import FAMILIES
from gateway_local.template import read_template

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "openapi.json"
#: The copy the console function serves at /openapi.json (deployed with it).
SERVED_COPY = ROOT / "functions" / "console" / "static" / "openapi.json"
#: The function of the web pages (the console, the docs): its routes are pages, not operations.
PAGES_FUNCTION = "ConsoleFunction"

# The actions of /v1beta/models/{proxy+}, each its own documented path.
CONTENT_ACTIONS = ("generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents")
ERROR_STATUSES = {
    "400": "the request broke a rule (the message names the field and the rule)",
    "401": "no key, or a key that is unknown, revoked or expired",
    "403": "the quota cannot cover the request, or the key may not do this",
    "404": "no such model, task, video or route",
    "409": "a conflict: a duplicate id, a replayed request, content not ready",
    "413": "the request body is too large",
    "429": "every upstream is rate limited (Retry-After says when to try again)",
    "500": "an unexpected failure; quote the request id",
    "502": "the upstream failed",
    "503": "no upstream is available",
    "504": "the upstream did not answer in time",
}
_ENVELOPE_NAMES = {Dialect.CHAT: "ChatError", Dialect.MESSAGES: "MessagesError", Dialect.CONTENT: "ContentError",
                   Dialect.PLANTS: "PlantsError", Dialect.ACCOUNT: "AccountError", Dialect.ALPHA: "AlphaError",
                   Dialect.BETA: "BetaError", Dialect.GAMMA: "GammaError", Dialect.IMGTASK: "ImgtaskError"}


def _request_models() -> dict[tuple[str, str], tuple[str, Any]]:
    """(method, documented path) -> (media type, pydantic model or list of alternatives)."""
    from gateway.api.channels import request_schemas
    from gateway.schemas import account, audio, batches, commerce, images, moderation, plants, rerank, tokens
    from gateway.schemas.text import chat, content, embeddings, messages, responses
    from gateway.tasks.families.alpha import schema as alpha
    from gateway.tasks.families.beta.schema import BetaRequest
    from gateway.tasks.families.delta.schema import DeltaVideoRequest
    from gateway.tasks.families.epsilon.schema import EpsilonVideoRequest
    from gateway.tasks.families.gamma.schema import GammaRequest
    from gateway.tasks.families.imgtask import schema as imgtask
    from gateway.tasks.families.zeta.schema import ZetaVideoRequest

    models: dict[tuple[str, str], tuple[str, Any]] = {
        ("POST", "/plants"): ("application/json", plants.NewPlant),
        ("POST", "/api/token"): ("application/json", tokens.NewToken),
        ("PUT", "/api/token"): ("application/json", [tokens.TokenUpdate, tokens.TokenStatus]),
        ("POST", "/v1/chat/completions"): ("application/json", chat.ChatRequest),
        ("POST", "/v1/messages"): ("application/json", messages.MessagesRequest),
        ("POST", "/v1/responses"): ("application/json", responses.ResponsesRequest),
        ("POST", "/v1/responses/compact"): ("application/json", responses.ResponsesRequest),
        ("POST", "/v1/embeddings"): ("application/json", embeddings.EmbeddingsRequest),
        ("POST", "/v1/images/generations"): ("application/json",
                                             [images.IotaGenerationRequest, images.ThetaGenerationRequest]),
        ("POST", "/v1/images/edits"): ("multipart/form-data", None),
        ("POST", "/v1/rerank"): ("application/json", rerank.RerankRequest),
        ("POST", "/v1/moderations"): ("application/json", moderation.ModerationRequest),
        ("POST", "/v1/audio/speech"): ("application/json", audio.SpeechRequest),
        ("POST", "/v1/audio/transcriptions"): ("multipart/form-data", _audio_form("transcription")),
        ("POST", "/v1/audio/translations"): ("multipart/form-data", _audio_form("translation")),
        ("POST", "/v1/files"): ("multipart/form-data", _files_form()),
        ("POST", "/v1/files/uploads"): ("application/json", batches.FileUploadCreate),
        ("POST", "/v1/batches"): ("application/json", batches.BatchCreate),
        # The SDK sends no body; one, if sent, is ignored.
        ("POST", "/v1/batches/{batch_id}/cancel"): ("application/json", {"type": "object"}),
        ("POST", "/v1/video/generations"): ("application/json", [DeltaVideoRequest, ZetaVideoRequest]),
        ("POST", "/v1/videos"): ("application/json", EpsilonVideoRequest),
        ("POST", "/v1/messages/count_tokens"): ("application/json", messages.MessagesRequest),
        ("POST", "/alpha/v1/videos/text2video"): ("application/json", alpha.Text2VideoRequest),
        ("POST", "/alpha/v1/videos/image2video"): ("application/json", alpha.Image2VideoRequest),
        ("POST", "/alpha/v1/videos/omni-video"): ("application/json", alpha.OmniVideoRequest),
        ("POST", "/alpha/v1/videos/motion-control"): ("application/json", alpha.MotionControlRequest),
        ("POST", "/alpha/v1/images/omni-image"): ("application/json", alpha.OmniImageRequest),
        ("POST", "/alpha/v1/general/custom-elements"): ("application/json", alpha.CustomElementRequest),
        ("POST", "/alpha/v1/general/custom-voices"): ("application/json", alpha.CustomVoiceRequest),
        ("POST", "/beta/v1/beta-2-pro"): ("application/json", BetaRequest),
        ("POST", "/gamma/api/v1/services/aigc/video-generation/video-synthesis"): ("application/json", GammaRequest),
        ("POST", "/imgtask/submit/imagine"): ("application/json", imgtask.ImagineRequest),
        ("POST", "/imgtask/submit/action"): ("application/json", imgtask.ActionRequest),
        ("POST", "/imgtask/submit/modal"): ("application/json", imgtask.ModalRequest),
        ("POST", "/imgtask/submit/blend"): ("application/json", imgtask.BlendRequest),
        ("POST", "/imgtask/submit/describe"): ("application/json", imgtask.DescribeRequest),
        ("POST", "/imgtask/submit/shorten"): ("application/json", imgtask.ShortenRequest),
        ("POST", "/imgtask/insight-face/swap"): ("application/json", imgtask.SwapFaceRequest),
        ("POST", "/imgtask/task/list-by-condition"): ("application/json", _IDS),
        ("POST", "/api/user/login"): ("application/json", account.SignIn),
        ("POST", "/api/user/logout"): ("application/json", _SIGN_OUT),
        ("PUT", "/api/user/self"): ("application/json", account.PasswordChange),
        ("POST", "/api/admin/users"): ("application/json", account.NewUser),
        ("PUT", "/api/admin/users/{id}/status"): ("application/json", account.UserStatus),
        ("POST", "/api/admin/users/{id}/quota"): ("application/json", account.QuotaAddition),
        ("PUT", "/api/admin/users/{id}/limits"): ("application/json", account.UserLimits),
        ("PUT", "/api/user"): ("application/json", account.UserUpdate),
        ("PUT", "/api/option"): ("application/json", commerce.OptionUpdate),
        ("POST", "/api/redemption"): ("application/json", commerce.NewCodes),
        ("PUT", "/api/redemption"): ("application/json", [commerce.CodeUpdate, commerce.CodeStatus]),
        ("POST", "/api/user/topup"): ("application/json", commerce.Redeem),
        ("POST", "/api/user/pay"): ("application/json", commerce.PayRequest),
        ("POST", "/api/user/pay/cancel"): ("application/json", commerce.PayCancel),
        ("POST", "/api/user/register"): ("application/json", commerce.Register),
        ("POST", "/api/user/reset"): ("application/json", commerce.PasswordReset),
        ("POST", "/api/user/aff_transfer"): ("application/json", commerce.AffTransfer),
        ("POST", "/api/stripe/webhook"): ("application/json", {"type": "object", "description": "a Stripe event, "
                                                               "signed in the Stripe-Signature header"}),
    }
    new_channel, channel_change = request_schemas()
    models[("POST", "/api/channel")] = ("application/json", new_channel)
    models[("PUT", "/api/channel")] = ("application/json", channel_change)
    for action in CONTENT_ACTIONS:
        models[("POST", f"/v1beta/models/{{model}}:{action}")] = ("application/json", content.CONTENT_ACTIONS[action])
    return models


#: The body of `list-by-condition`, which the imgtask routes read without a model of their own.
_SIGN_OUT = {"type": "object", "description": "anything (the session is the cookie's); new-api's GET is a 405 "
             "here, since a GET changes nothing", "example": {}}
_IDS = {"type": "object", "required": ["ids"], "properties": {"ids": {
    "type": "array", "maxItems": 100, "items": {"type": "string", "pattern": "^[0-9]{1,19}$"}}}}


def _schema_of(model: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON schema, its nested definitions moved to components.schemas."""
    if isinstance(model, dict):  # a schema already
        return model
    if isinstance(model, list):
        return {"oneOf": [_schema_of(each, definitions) for each in model]}
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode="validation")
    for name, definition in schema.pop("$defs", {}).items():
        definitions[name] = definition
    definitions[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _audio_form(operation: str) -> dict[str, Any]:
    """A transcription's or translation's form (`gateway.schemas.audio`), as OpenAI's."""
    from gateway.multipart import MAX_REQUEST_BYTES
    from gateway.schemas import audio

    formats = audio.TRANSCRIPT_FORMATS if operation == "transcription" else audio.TRANSLATION_FORMATS
    properties: dict[str, Any] = {
        "file": {"type": "string", "format": "binary",
                 "description": f"flac, mp3, mp4/m4a, ogg, wav or webm audio; the whole request at most "
                                f"{MAX_REQUEST_BYTES} bytes (a 413 above)"},
        "model": {"type": "string"},
        "prompt": {"type": "string"},
        "response_format": {"type": "string", "enum": list(formats), "default": "json"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
    }
    if operation == "transcription":
        properties.update({
            "language": {"type": "string", "description": "ISO-639-1"},
            "timestamp_granularities[]": {"type": "array", "items": {"type": "string", "enum": ["word", "segment"]},
                                          "description": "with response_format verbose_json only"},
            "include[]": {"type": "array", "items": {"type": "string", "enum": ["logprobs"]}},
            "stream": {"type": "boolean",
                       "description": "true: transcript.text.delta events, then transcript.text.done with usage "
                                      "(a model that does not stream, whisper-1, answers whole)"},
        })
    return {"type": "object", "required": ["file", "model"], "properties": properties}


#: The answers' media types where a route answers more than JSON.
_ANSWER_TYPES = {
    "/v1/audio/speech": ("audio/mpeg", "audio/opus", "audio/aac", "audio/flac", "audio/wav", "audio/pcm",
                         "text/event-stream"),
    "/v1/audio/transcriptions": ("application/json", "text/plain", "text/event-stream"),
    "/v1/audio/translations": ("application/json", "text/plain"),
}


def _edit_form() -> dict[str, Any]:
    from gateway.schemas import images

    return {"type": "object", "required": ["model", "image", "prompt"], "properties": {
        "model": {"type": "string", "enum": [images.ETA_EDIT_MODEL]},
        "image": {"type": "string", "format": "binary",
                  "description": "JPG, PNG, BMP, TIFF or WEBP, under 10 MB"},
        "prompt": {"type": "string", "maxLength": images.EDIT_PROMPT_MAX},
        "negative_prompt": {"type": "string"},
        "n": {"type": "string", "pattern": "^[0-9]+$", "description": f"1 to {images.EDIT_N_MAX}"},
        "response_format": {"type": "string", "enum": list(images.RESPONSE_FORMATS)},
        "seed": {"type": "string", "pattern": "^[0-9]+$", "description": f"0 to {images.SEED_MAX}"},
    }}


def _files_form() -> dict[str, Any]:
    from gateway.api import files

    return {"type": "object", "required": ["file", "purpose"], "properties": {
        "file": {"type": "string", "format": "binary",
                 "description": "a batch's JSONL (checked line by line) or any user_data file"},
        "purpose": {"type": "string", "enum": list(files.PURPOSES)},
        "expires_after[anchor]": {"type": "string", "enum": ["created_at"]},
        "expires_after[seconds]": {"type": "string", "pattern": "^[0-9]+$",
                                   "description": f"{files.MIN_EXPIRY} to {files.MAX_EXPIRY} (the default)"},
    }}


def _envelope_schemas() -> dict[str, Any]:
    """Each family's error envelope, described from what `render` produces."""
    def example(dialect: Dialect) -> dict[str, Any]:
        return render(GatewayError("what went wrong", status=400), dialect, "request-id").body

    string, integer = {"type": "string"}, {"type": "integer"}
    schemas: dict[str, dict[str, Any]] = {
        "ChatError": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type"], "properties": {
                "message": string, "type": string, "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]}}}}},
        "MessagesError": {"type": "object", "required": ["type", "error"], "properties": {
            "type": {"const": "error"}, "error": {"type": "object", "required": ["type", "message"],
                                                  "properties": {"type": string, "message": string}}}},
        "ContentError": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["code", "message", "status"],
            "properties": {"code": integer, "message": string, "status": string}}}},
        "PlantsError": {"type": "object", "required": ["error", "message"],
                        "properties": {"error": integer, "message": string}},
        "AccountError": {"type": "object", "required": ["data", "message", "success"], "properties": {
            "data": {"type": "null"}, "message": string, "success": {"const": False}}},
        "AlphaError": {"type": "object", "required": ["code", "message", "request_id"],
                       "properties": {"code": integer, "message": string, "request_id": string}},
        "BetaError": {"type": "object", "required": ["detail"], "properties": {"detail": string}},
        "GammaError": {"oneOf": [
            {"type": "object", "required": ["request_id", "code", "message"],
             "properties": {"request_id": string, "code": string, "message": string}},
            {"type": "object", "required": ["error"], "description": "a call with no token at all",
             "properties": {"error": {"type": "object", "required": ["message", "type"],
                                      "properties": {"message": string, "type": {"const": "api_error"}}}}}]},
        "ImgtaskError": {"type": "object", "required": ["code", "description"], "properties": {
            "code": integer, "description": string, "result": {"type": ["string", "null"]}}},
    }
    for dialect, name in _ENVELOPE_NAMES.items():
        schemas[name]["example"] = example(dialect)
    return schemas


def _query(name: str, description: str, required: bool = False, **schema: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": schema or {"type": "string"}}


# The pricing page's and the log export's parameters (issue 32).
_PRICING_AND_EXPORT: dict[str, list[dict[str, Any]]] = {
    "/api/log/self/export": [
        _query("start_timestamp", "from (unix seconds)", True, type="integer", minimum=0),
        _query("end_timestamp", "to (unix seconds), at most 93 days after", True, type="integer", minimum=0),
        _query("type", "1 top-up, 2 consume, 5 error, 6 refund", enum=["1", "2", "5", "6"]),
        _query("model_name", "only this model's requests"),
        _query("token_name", "only the requests of keys of this name")],
    "/api/log/self/stat": [
        _query("start_timestamp", "from (unix seconds)", type="integer", minimum=0),
        _query("end_timestamp", "to (unix seconds)", type="integer", minimum=0),
        _query("type", "1 top-up, 2 consume, 5 error, 6 refund", enum=["1", "2", "5", "6"]),
        _query("model_name", "only this model's requests"),
        _query("token_name", "only the requests of keys of this name")],
    # Anyone, or a signed-in user (its group's prices).
    "/api/pricing": [{"name": "X-Api-User", "in": "header", "required": False,
                      "description": "with an access token or the session: the signed-in user's id (its group's "
                                     "prices); without either: anyone, the default group's",
                      "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"}}],
}


def _parameters(method: str, path: str) -> list[dict[str, Any]]:
    def param(name: str, where: str, description: str, required: bool = False, **schema: Any) -> dict[str, Any]:
        return {"name": name, "in": where, "required": required or where == "path", "description": description,
                "schema": schema or {"type": "string"}}

    params = [param(name, "path", f"the {name}") for name in
              (part[1:].split("}")[0] for part in path.split("/") if part.startswith("{"))]
    params += _PRICING_AND_EXPORT.get(path, [])
    if path == "/v1/dashboard/billing/usage":
        params += [param("start_date", "query", "from (inclusive): milliseconds since the epoch, or YYYY-MM-DD"),
                   param("end_date", "query", "to (inclusive): milliseconds since the epoch, or YYYY-MM-DD")]
    elif path == "/v1/video/generations/result":
        params.append(param("taskid", "query", "the task id a submit answered", required=True))
    elif path.endswith("/content"):
        params.append(param("variant", "query", "video (default), thumbnail or spritesheet",
                            enum=["video", "thumbnail", "spritesheet"]))
    elif path in ("/api/data/self", "/api/data", "/api/admin/spend"):
        params.append(param("days", "query", "the span, today included", enum=["7", "30", "90"]))
    elif path == "/api/task/self":
        params += [param("p", "query", "page, from 1", type="integer", minimum=1),
                   param("page_size", "query", "tasks per page (1 to 100, 20 by default)", type="integer",
                         minimum=1, maximum=100),
                   param("family", "query", "only this task family's tasks", enum=list(FAMILIES)),
                   param("status", "query", "only tasks in this unified status", enum=list(UNIFIED)),
                   param("start_timestamp", "query", "created at or after (unix seconds)", type="integer", minimum=0),
                   param("end_timestamp", "query", "created at or before (unix seconds)", type="integer", minimum=0)]
    elif path == "/api/admin/users":
        params += [param("page_size", "query", "users per page (1 to 100, default 20)"),
                   param("after", "query", "next_after of the page before")]
    elif (method, path) == ("GET", "/api/token"):
        params += [param("p", "query", "page, from 0", type="integer", minimum=0),
                   param("size", "query", "keys per page (1 to 100, 20 by default)", type="integer", minimum=1,
                         maximum=100)]
    elif (method, path) in (("GET", "/api/redemption"), ("GET", "/api/channel"), ("GET", "/api/user/topup"),
                            ("GET", "/api/user/topup/self")):
        params += [param("p", "query", "page, from 1", type="integer", minimum=1),
                   param("page_size", "query", "items per page (1 to 100, 20 by default)", type="integer",
                         minimum=1, maximum=100)]
    elif (method, path) == ("PUT", "/api/redemption"):
        params.append(param("status_only", "query", "true: the body is {id, status} and only enables (1) or "
                            "disables (2) the code", enum=["true", "false"]))
    elif (method, path) == ("PUT", "/api/token"):
        params.append(param("status_only", "query", "true: the body is {id, status} and only enables (1) or "
                            "disables (2) the key", enum=["true", "false"]))
    elif path.endswith(":streamGenerateContent"):
        params.append(param("alt", "query", "must be sse", required=True, enum=["sse"]))
    if path in ("/api/verification", "/api/reset_password"):
        params.append(param("email", "query", "the email address", required=True))
    if path == "/api/stripe/webhook":
        params.append(param("Stripe-Signature", "header", "Stripe's signature of the body (t=...,v1=...)",
                            required=True))
    if path.startswith(_ACCOUNT_PATHS) and path not in _ANONYMOUS:
        params.append(param("X-Api-User", "header", "the id of the user the access token (or session) belongs to",
                            required=True))
    return params


# Routes reached with the system access token or the console's session (plus X-Api-User).
_ACCOUNT_PATHS = ("/api/user", "/api/log/self", "/api/data", "/api/admin/", "/api/token", "/api/task/self",
                  "/api/option", "/api/channel", "/api/redemption", "/api/verification", "/api/reset_password",
                  "/api/pricing")
# Account routes anyone may call.
_ANONYMOUS = ("/api/user/login", "/api/status", "/api/stripe/webhook", "/api/verification", "/api/user/register",
              "/api/reset_password", "/api/user/reset", "/api/pricing")


def _documented_paths(template_path: str) -> list[tuple[str, str]]:
    template = read_template(ROOT / template_path)
    documented: list[tuple[str, str]] = []
    for route in template.routes:
        if route.function == PAGES_FUNCTION or route.path in CATCH_ALL_RESOURCES:
            continue  # pages, and the catch-all 404 of any other path (its method ANY is no OpenAPI method)
        if route.path == "/v1beta/models/{proxy+}":
            documented += [(route.method, f"/v1beta/models/{{model}}:{action}") for action in CONTENT_ACTIONS]
        else:
            documented.append((route.method, route.path))
    return sorted(documented, key=lambda item: (item[1], item[0]))


# The OpenAI-style text routes share one tag, files go with the batches they feed: Swagger UI 5
# stops drawing operations part-way once a document has 128 or more of them under 22 tags
# (tests/e2e/test_console_browser.py's docs page test), and a reader finds them together.
_TEXT_TAGS = {"chat", "responses", "messages", "embeddings", "models"}


def _tag(path: str) -> str:
    """An operation's tag: its route family (the first segment, or the second under /v1/)."""
    family = path.split("/")[2] if path.startswith("/v1/") else path.split("/")[1]
    if path.startswith("/v1/") and family in _TEXT_TAGS:
        return "text"
    return "batches" if family == "files" else family


def build(template_path: str = "template.yaml") -> dict[str, Any]:
    """The whole OpenAPI 3.1 document."""
    models = _request_models()
    definitions: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for method, path in _documented_paths(template_path):
        dialect = dialect_for_path(path)
        envelope = {"$ref": f"#/components/schemas/{_ENVELOPE_NAMES[dialect]}"}
        operation: dict[str, Any] = {
            "operationId": f"{method.lower()}_{''.join(c if c.isalnum() else '_' for c in path).strip('_')}",
            "tags": [_tag(path)],
            "responses": {"200": {"description": "the answer", "content": dict.fromkeys(_ANSWER_TYPES.get(path, (
                "text/event-stream" if "stream" in path else "text/csv" if path.endswith("/export")
                else "application/json",)), {"schema": {}})}},
            "security": ([] if path in _ANONYMOUS else
                         [{"accessToken": []}, {"session": []}] if path.startswith(_ACCOUNT_PATHS) else
                         [{"bearer": []}, {"apiKey": []}, {"googApiKey": []}, {"queryKey": []}]),
        }
        for status, description in ERROR_STATUSES.items():
            operation["responses"][status] = {"description": description,
                                              "content": {"application/json": {"schema": envelope}}}
        if path.startswith("/api/") and method in STATE_CHANGING:  # gateway.http.json_only
            operation["responses"]["415"] = {"description": "a body that is not application/json",
                                             "content": {"application/json": {"schema": envelope}}}
        if parameters := _parameters(method, path):
            operation["parameters"] = parameters
        if (method, path) in models:
            media_type, model = models[(method, path)]
            schema = _edit_form() if model is None else model if isinstance(model, dict) \
                else _schema_of(model, definitions)
            content = {media_type: {"schema": schema}}
            if path == "/v1/videos":  # the openai SDK sends this form
                content["multipart/form-data"] = {"schema": schema}
            operation["requestBody"] = {"required": not path.endswith("/cancel"), "content": content}
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Unified AI gateway", "version": "0.1.0",
                 "description": "Generated from the code by `make openapi` (local/gateway_local/openapi.py); "
                                "do not edit by hand. Errors come in the envelope of the route's family."},
        "paths": paths,
        "components": {
            "schemas": {**dict(sorted(definitions.items())), **_envelope_schemas()},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "the API key (sk-...)"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "googApiKey": {"type": "apiKey", "in": "header", "name": "x-goog-api-key"},
                "queryKey": {"type": "apiKey", "in": "query", "name": "key"},
                "accessToken": {"type": "apiKey", "in": "header", "name": "Authorization",
                                "description": "the user's system access token (not a bearer API key)"},
                "session": {"type": "apiKey", "in": "cookie", "name": "gateway_session",
                            "description": "the console's session (POST /api/user/login); X-Api-User too"},
            },
        },
    }


def render_document(template_path: str = "template.yaml") -> str:
    return json.dumps(build(template_path), indent=1, sort_keys=False, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    targets = [Path(argv[1])] if len(argv) > 1 else [DOCUMENT, SERVED_COPY]
    document = render_document()
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(document, encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
