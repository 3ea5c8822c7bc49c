"""Simulated content-generation upstream (what the `google-genai` SDK speaks), mounted at
`/content`.

Routes: POST /v1beta/models/{model}:generateContent, :streamGenerateContent (SSE with
`?alt=sse`, otherwise one JSON array sent piece by piece), :countTokens, :embedContent,
:batchEmbedContents and GET /v1beta/models; Gemini's batch mode (:batchGenerateContent and
/v1beta/batches/..., `gemini_batch`); all also under /fault/{fault}/. The key goes in
`x-goog-api-key` or `?key=`.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.errors import GatewayError, InvalidRequest
from gateway.schemas.text.content import (
    CONTENT_ACTIONS,
    BatchEmbedContentsRequest,
    ContentRequest,
    CountTokensRequest,
    EmbedContentRequest,
    parse_model_action,
)
from gateway.sse import encode
from gateway.validation import parse_model

from . import gemini_batch, rules
from ._honour import Tools
from ._text import (
    Plan,
    before_answer,
    cut_json,
    error_json,
    fault_of,
    fault_status,
    json_body,
    new_id,
    paced_stream,
    plan_answer,
    with_fault_prefix,
)
from .chat import EMBEDDING_DIMENSIONS, MODELS, embedding_vector
from .provider_faults import with_provider_faults

_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
_FINISH = {"stop": "STOP", "stop_sequence": "STOP", "length": "MAX_TOKENS", "tool": "STOP"}


def error(status: int, message: str) -> JSONResponse:
    return error_json(status, {"error": {"code": status, "message": message,
                                         "status": _STATUSES.get(status, "UNKNOWN")}})


def _authenticated(request: Request) -> bool:
    return bool(request.headers.get("x-goog-api-key", "").strip() or request.query_params.get("key", "").strip())


def _prompt(contents: list[dict[str, Any]]) -> tuple[str, int]:
    users = [c for c in contents if c.get("role") == "user"]
    if not users:
        return "", 0
    parts = users[-1]["parts"]
    return (" ".join(p["text"] for p in parts if "text" in p and not p.get("thought")),
            sum(1 for p in parts if "inlineData" in p or "fileData" in p))


def _tools(data: dict[str, Any]) -> Tools:
    """The function declarations and `toolConfig.functionCallingConfig` (AUTO, ANY with its
    `allowedFunctionNames`, NONE); the conversation's turn is the user's unless its last parts
    are function responses."""
    offered: dict[str, Any] = {}
    for tool in data.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            if isinstance(declaration, dict) and declaration.get("name"):
                offered[declaration["name"]] = (declaration.get("parametersJsonSchema")
                                                or declaration.get("parameters_json_schema")
                                                or declaration.get("parameters"))
    config = data.get("toolConfig") or data.get("tool_config") or {}
    calling = config.get("functionCallingConfig") or config.get("function_calling_config") or {}
    mode = str(calling.get("mode", "AUTO")).upper()
    allowed = calling.get("allowedFunctionNames") or calling.get("allowed_function_names") or []
    choice = "none" if mode == "NONE" else "auto" if mode != "ANY" else allowed[0] if len(allowed) == 1 else "required"
    if allowed and mode == "ANY":
        offered = {name: schema for name, schema in offered.items() if name in allowed} or offered
    last = data["contents"][-1]
    responses = any("functionResponse" in part for part in last.get("parts") or [])
    return Tools(offered, choice=choice, user_turn=last.get("role", "user") == "user" and not responses)


def _schema(config: Any) -> Any:
    """The schema of `responseMimeType: application/json` (`responseJsonSchema`, else the
    OpenAPI-style `responseSchema`, else any object), else None."""
    if config is None or config.responseMimeType != "application/json":
        return None
    return config.responseJsonSchema or config.responseSchema or {}


def _usage(plan: Plan, candidates: int, *, emitted: int | None = None) -> dict[str, Any]:
    """usageMetadata; `emitted` answer tokens so far when streaming (the figures are cumulative)."""
    answer = len(plan.pieces) + len(plan.tool_arguments) if emitted is None else emitted
    usage = {"promptTokenCount": plan.input_tokens, "candidatesTokenCount": answer * candidates,
             "totalTokenCount": plan.input_tokens + (answer + len(plan.thinking)) * candidates,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": plan.input_tokens}]}
    if plan.thinking:
        usage["thoughtsTokenCount"] = len(plan.thinking) * candidates
    return usage


async def models_route(request: Request) -> Response:
    if not _authenticated(request):
        return error(401, "Method doesn't allow unregistered callers. Please use an API key.")
    return JSONResponse({"models": [
        {"name": f"models/{m}", "displayName": m, "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
         "supportedGenerationMethods": list(CONTENT_ACTIONS)} for m in MODELS]})


async def model_action(request: Request) -> Response:
    if not _authenticated(request):
        return error(401, "Method doesn't allow unregistered callers. Please use an API key.")
    batch_model, colon, batch_action = str(request.path_params["rest"]).rpartition(":")
    if colon and batch_action == "batchGenerateContent":  # Gemini's batch mode (`gemini_batch`)
        return await gemini_batch.create(request, batch_model)
    try:
        model, action = parse_model_action(request.path_params["rest"])
    except GatewayError as exc:
        return error(exc.status, exc.message)
    body = await json_body(request)
    if not isinstance(body, dict):
        return error(400, "Invalid JSON payload received.")
    if refused := rules.content.refusal(action, body):
        return error(400, refused[0])
    try:
        req: Any = parse_model(CONTENT_ACTIONS[action], body)  # the model of that action
    except InvalidRequest as exc:
        return error(400, exc.message)
    if action == "embedContent":
        return await _embed(request, req)
    if action == "batchEmbedContents":
        return await _batch_embed(request, req)
    if action == "countTokens":
        return await _count(request, req)
    return await _generate(request, model, req, stream=action == "streamGenerateContent")


async def _embed(request: Request, req: EmbedContentRequest) -> Response:
    text = " ".join(p.text or "" for p in req.content.parts)
    if status := fault_status(fault_of(request, text)):
        return error(status, f"Simulated failure {status}")
    values = embedding_vector(text, req.outputDimensionality or EMBEDDING_DIMENSIONS)
    return JSONResponse({"embedding": {"values": values}})


async def _batch_embed(request: Request, req: BatchEmbedContentsRequest) -> Response:
    texts = [" ".join(p.text or "" for p in r.content.parts) for r in req.requests]
    if status := fault_status(fault_of(request, " ".join(texts))):
        return error(status, f"Simulated failure {status}")
    return JSONResponse({"embeddings": [
        {"values": embedding_vector(text, r.outputDimensionality or EMBEDDING_DIMENSIONS)}
        for text, r in zip(texts, req.requests, strict=True)]})


async def _count(request: Request, req: CountTokensRequest) -> Response:
    inner = req.generateContentRequest
    contents = req.model_dump(exclude_none=True).get("contents")
    if not contents:
        assert inner is not None  # the schema takes contents or a generateContentRequest
        contents = inner.model_dump(exclude_none=True)["contents"]
    if status := fault_status(fault_of(request, _prompt(contents)[0])):
        return error(status, f"Simulated failure {status}")
    tokens = (inner or ContentRequest(contents=req.contents or [])).estimate_input_tokens()
    return JSONResponse({"totalTokens": tokens, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]})


async def _generate(request: Request, model: str, req: ContentRequest, *, stream: bool) -> Response:
    data = req.model_dump(exclude_none=True)
    prompt, attachments = _prompt(data["contents"])
    fault = fault_of(request, prompt)
    if status := fault_status(fault):
        message = "Resource has been exhausted (simulated)." if status == 429 else f"Simulated failure {status}"
        return error(status, message)
    await before_answer(fault)
    config = req.generationConfig
    thinking = bool(config and config.thinkingConfig and config.thinkingConfig.includeThoughts)
    plan = plan_answer(prompt, input_tokens=req.estimate_input_tokens(), max_tokens=req.output_limit(),
                       stop=config.stopSequences if config else None, tools=_tools(data),
                       json_schema=_schema(config), thinking=thinking, attachments=attachments,
                       choice_of=(config.responseSchema or {}).get("enum")
                       if config and config.responseMimeType == "text/x.enum" else None)
    candidates = (config.candidateCount if config else None) or 1
    head = {"modelVersion": model, "responseId": new_id("")}
    finish = _FINISH[plan.finish]

    def response(parts: list[dict[str, Any]], usage: dict[str, Any], done: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"candidates": [
            {"content": {"parts": parts, "role": "model"}, "index": i, **({"finishReason": finish} if done else {})}
            for i in range(candidates)], "usageMetadata": usage, **head}
        return body

    thought_parts = [{"text": "".join(plan.thinking), "thought": True}] if plan.thinking else []
    if plan.tool_name:
        # Signed as a Gemini 3 model signs a step's first call, thinking shown or not (rules.content).
        arguments = _arguments(plan)
        answer_parts: list[dict[str, Any]] = [{"functionCall": {"name": plan.tool_name, "args": arguments},
                                               "thoughtSignature": rules.content.signature_for(plan.tool_name,
                                                                                               arguments)}]
    else:
        answer_parts = [{"text": plan.text}]
    if not stream:
        body = response(thought_parts + answer_parts, _usage(plan, candidates), True)
        return cut_json(body) if fault == "cut" else JSONResponse(body)

    # Each streamed event is a whole response holding the new text and the usage so far.
    bodies = []
    if plan.thinking:
        bodies.append(response(thought_parts, _usage(plan, candidates, emitted=0), False))
    if plan.tool_name:
        bodies.append(response(answer_parts, _usage(plan, candidates), True))
    else:
        pieces = plan.pieces or [""]
        for n, piece in enumerate(pieces, start=1):
            bodies.append(response([{"text": piece}], _usage(plan, candidates, emitted=min(n, len(plan.pieces))),
                                   n == len(pieces)))
    if request.query_params.get("alt") == "sse":
        return paced_stream([encode(b) for b in bodies], fault)
    # Without alt=sse the upstream streams one JSON array, element by element.
    raw = [("[" if i == 0 else ",\r\n") + json.dumps(b) for i, b in enumerate(bodies)] + ["]"]
    return paced_stream([r.encode() for r in raw], fault, media_type="application/json")


def _arguments(plan: Plan) -> dict[str, Any]:
    try:
        return json.loads(plan.arguments)
    except ValueError:
        return {}


#: The route a batch's requests are answered by, in-process (`gemini_batch`).
routes_app = Starlette(routes=[Route("/v1beta/models/{rest:path}", model_action, methods=["POST"])])

app = Starlette(routes=with_fault_prefix([
    Route("/v1beta/models", models_route, methods=["GET"]),
    Route("/v1beta/models/{rest:path}", model_action, methods=["POST"]),
    Route("/v1beta/batches/{rest:path}", gemini_batch.batch_route, methods=["GET", "POST"]),  # batch mode
]))

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "google")
