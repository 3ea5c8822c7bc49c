"""Simulated chat-dialect upstream (what the `openai` SDK speaks), mounted at `/chat`.

Routes: POST /v1/chat/completions, /v1/responses, /v1/responses/compact, /v1/embeddings and
GET /v1/models (images: `images`; speech, transcriptions, translations, moderations: `audio`),
each also under /fault/{fault}/; OpenAI's Files and Batch API (`openai_batch`). Answers, usage
and faults: see `_text`.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.errors import InvalidRequest
from gateway.schemas.text.chat import ChatRequest
from gateway.schemas.text.embeddings import EmbeddingsRequest
from gateway.schemas.text.responses import ResponsesRequest
from gateway.sse import DONE, encode
from gateway.validation import parse_model
from gateway_local.simulators import rules
from gateway_local.simulators.audio import routes as audio_routes
from gateway_local.simulators.images import routes as image_routes
from gateway_local.simulators.openai_batch import routes as batch_routes

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
    tokenize,
    with_fault_prefix,
)
from .provider_faults import with_provider_faults

MODELS = ("m-small", "m-large", "e-small")
EMBEDDING_DIMENSIONS = 16

_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                404: "invalid_request_error", 429: "rate_limit_error"}
_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


def error(status: int, message: str, param: str | None = None) -> JSONResponse:
    return error_json(status, {"error": {"message": message, "type": _ERROR_TYPES.get(status, "server_error"),
                                         "param": param, "code": _ERROR_CODES.get(status)}})


def fault_error(status: int) -> JSONResponse:
    return error(status, "Rate limit reached for requests (simulated)" if status == 429
                 else f"The simulated upstream failed with {status} as asked.")


async def _parse(request: Request, model: type) -> Any:
    """The validated body, or the error answer the upstream would give."""
    header = request.headers.get("authorization", "")
    if not header.startswith("Bearer ") or not header[7:].strip():
        return error(401, "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.")
    body = await json_body(request)
    if body is None:
        return error(400, "We could not parse the JSON body of your request.")
    if refused := rules.chat.refusal(request.url.path, body):
        return error(400, *refused)
    try:
        return parse_model(model, body)
    except InvalidRequest as exc:
        return error(400, exc.message, exc.param)


def _text_of(content: Any) -> tuple[str, int]:
    """The text of a message's content and how many non-text parts it holds."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return "", 0
    parts = [p for p in content if isinstance(p, dict)]
    texts = [p.get("text", "") for p in parts if p.get("type") in ("text", "input_text")]
    return " ".join(texts), sum(1 for p in parts if p.get("type") not in ("text", "input_text"))


def _choice(tool_choice: Any) -> str:
    """"auto", "none", "required" or the one tool's name, from the chat and responses forms."""
    if isinstance(tool_choice, str):
        return tool_choice
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else tool_choice.get("name")
        return str(name) if name else "required"
    return "auto"


def _chat_schema(response_format: Any) -> Any:
    """The schema `response_format` asks the answer to follow (`{}`: any JSON object), else None."""
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema") or {}
    return {} if kind == "json_object" else None


# --- /v1/chat/completions ----------------------------------------------------------------------

_FINISH = {"stop": "stop", "stop_sequence": "stop", "length": "length", "tool": "tool_calls"}


def _chat_usage(plan: Plan, choices: int) -> dict[str, Any]:
    completion = plan.output_tokens * choices
    return {"prompt_tokens": plan.input_tokens, "completion_tokens": completion,
            "total_tokens": plan.input_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


async def chat_completions(request: Request) -> Response:
    req = await _parse(request, ChatRequest)
    if isinstance(req, Response):
        return req
    data = req.model_dump(exclude_none=True)
    users = [m for m in data["messages"] if m["role"] == "user"]
    prompt, attachments = _text_of(users[-1]["content"]) if users else ("", 0)
    fault = fault_of(request, prompt)
    if status := fault_status(fault):
        return fault_error(status)
    await before_answer(fault)
    stop = [req.stop] if isinstance(req.stop, str) else req.stop
    turns = [m["role"] for m in data["messages"] if m["role"] not in ("system", "developer")]
    tools = Tools({t["function"]["name"]: t["function"].get("parameters") for t in data.get("tools", [])
                   if t.get("type") == "function" and isinstance(t.get("function"), dict)},
                  choice=_choice(data.get("tool_choice")), user_turn=bool(turns) and turns[-1] == "user")
    plan = plan_answer(prompt, input_tokens=req.estimate_input_tokens(), max_tokens=req.output_limit(), stop=stop,
                       tools=tools, json_schema=_chat_schema(data.get("response_format")), attachments=attachments)
    choices, call_id = req.n or 1, new_id("call_")
    head = {"id": new_id("chatcmpl-"), "created": int(time.time()), "model": req.model,
            "system_fingerprint": "fp_simulated", "service_tier": "default"}
    finish = _FINISH[plan.finish]
    if not req.stream:
        message: dict[str, Any] = {"role": "assistant", "content": plan.text if not plan.tool_name else None,
                                   "refusal": None, "annotations": []}
        if plan.tool_name:
            message["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": plan.tool_name, "arguments": plan.arguments}}]
        body = {**head, "object": "chat.completion",
                "choices": [{"index": i, "message": message, "logprobs": None, "finish_reason": finish}
                            for i in range(choices)],
                "usage": _chat_usage(plan, choices)}
        return cut_json(body) if fault == "cut" else JSONResponse(body)

    include_usage = bool(req.stream_options and req.stream_options.include_usage)

    def chunk(index: int, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        body = {**head, "object": "chat.completion.chunk",
                "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
        if include_usage:
            body["usage"] = None  # every chunk says so when the final one will carry the usage
        return encode(body)

    events = [chunk(i, {"role": "assistant", "content": "" if not plan.tool_name else None, "refusal": None})
              for i in range(choices)]
    if plan.tool_name:
        events += [chunk(i, {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                             "function": {"name": plan.tool_name, "arguments": ""}}]})
                   for i in range(choices)]
        for piece in plan.tool_arguments:
            events += [chunk(i, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                       for i in range(choices)]
    for piece in plan.pieces:
        events += [chunk(i, {"content": piece}) for i in range(choices)]
    events += [chunk(i, {}, finish) for i in range(choices)]
    if include_usage:
        events.append(encode({**head, "object": "chat.completion.chunk", "choices": [],
                              "usage": _chat_usage(plan, choices)}))
    events.append(DONE)
    return paced_stream(events, fault)


# --- /v1/responses --------------------------------------------------------------------------------

def _responses_prompt(req: ResponsesRequest) -> tuple[str, int]:
    if isinstance(req.input, str):
        return req.input, 0
    users = [item for item in (req.model_dump(exclude_none=True).get("input") or [])
             if item.get("role") == "user"]
    return _text_of(users[-1]["content"]) if users else ("", 0)


def _responses_usage(plan: Plan) -> dict[str, Any]:
    return {"input_tokens": plan.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": plan.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": plan.input_tokens + plan.output_tokens}


def _response_object(req: ResponsesRequest, response_id: str, created: int, *, status: str,
                     output: list[dict[str, Any]], usage: dict[str, Any] | None,
                     incomplete: bool = False) -> dict[str, Any]:
    data = req.model_dump(exclude_none=True)
    return {
        "id": response_id, "object": "response", "created_at": created, "status": status,
        "background": False, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": req.instructions, "max_output_tokens": req.max_output_tokens, "max_tool_calls": None,
        "model": req.model, "output": output, "parallel_tool_calls": True,
        "previous_response_id": req.previous_response_id, "reasoning": {"effort": None, "summary": None},
        "service_tier": "default", "store": req.store if req.store is not None else True,
        "temperature": req.temperature if req.temperature is not None else 1.0,
        "text": data.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": data.get("tool_choice", "auto"), "tools": data.get("tools", []), "top_logprobs": 0,
        "top_p": req.top_p if req.top_p is not None else 1.0, "truncation": req.truncation or "disabled",
        "usage": usage, "user": req.user, "metadata": req.metadata or {},
    }


async def responses(request: Request) -> Response:
    req = await _parse(request, ResponsesRequest)
    if isinstance(req, Response):
        return req
    prompt, attachments = _responses_prompt(req)
    fault = fault_of(request, prompt)
    if fault_code := fault_status(fault):
        return fault_error(fault_code)
    await before_answer(fault)
    data = req.model_dump(exclude_none=True)
    items = [data["input"]] if isinstance(data.get("input"), str) else data.get("input") or []
    last = items[-1] if items else None
    tools = Tools({t["name"]: t.get("parameters") for t in data.get("tools") or [] if t.get("type") == "function"},
                  choice=_choice(data.get("tool_choice")),
                  user_turn=isinstance(last, str) or (isinstance(last, dict) and last.get("role") == "user"))
    text_format = (data.get("text") or {}).get("format") or {}
    schema = text_format.get("schema") or {} if text_format.get("type") == "json_schema" else \
        {} if text_format.get("type") == "json_object" else None
    plan = plan_answer(prompt, input_tokens=req.estimate_input_tokens(), max_tokens=req.max_output_tokens,
                       tools=tools, json_schema=schema, attachments=attachments)
    response_id, created = new_id("resp_"), int(time.time())
    incomplete = plan.finish == "length"
    status = "incomplete" if incomplete else "completed"
    item: dict[str, Any]
    if plan.tool_name:
        item_id, call_id = new_id("fc_"), new_id("call_")
        item = {"id": item_id, "type": "function_call", "status": status, "arguments": plan.arguments,
                "call_id": call_id, "name": plan.tool_name}
    else:
        item_id = new_id("msg_")
        part = {"type": "output_text", "text": plan.text, "annotations": [], "logprobs": []}
        item = {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}
    final = _response_object(req, response_id, created, status=status, output=[item],
                             usage=_responses_usage(plan), incomplete=incomplete)
    if not req.stream:
        return cut_json(final) if fault == "cut" else JSONResponse(final)

    sequence = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        return encode({"type": kind, "sequence_number": next(sequence), **fields}, event=kind)

    started = _response_object(req, response_id, created, status="in_progress", output=[], usage=None)
    events = [event("response.created", response=started), event("response.in_progress", response=started)]
    if plan.tool_name:
        events.append(event("response.output_item.added", output_index=0,
                            item={**item, "status": "in_progress", "arguments": ""}))
        events += [event("response.function_call_arguments.delta", item_id=item_id, output_index=0, delta=piece)
                   for piece in plan.tool_arguments]
        events.append(event("response.function_call_arguments.done", item_id=item_id, output_index=0,
                            name=plan.tool_name, arguments=plan.arguments))
    else:
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        events.append(event("response.output_item.added", output_index=0,
                            item={**item, "status": "in_progress", "content": []}))
        events.append(event("response.content_part.added", **where,
                            part={"type": "output_text", "text": "", "annotations": [], "logprobs": []}))
        events += [event("response.output_text.delta", **where, delta=piece, logprobs=[]) for piece in plan.pieces]
        events.append(event("response.output_text.done", **where, text=plan.text, logprobs=[]))
        events.append(event("response.content_part.done", **where, part=item["content"][0]))
    events.append(event("response.output_item.done", output_index=0, item=item))
    events.append(event("response.incomplete" if incomplete else "response.completed", response=final))
    return paced_stream(events, fault)


async def compact_responses(request: Request) -> Response:
    """The conversation's user messages, then one opaque compaction item standing for the rest."""
    req = await _parse(request, ResponsesRequest)
    if isinstance(req, Response):
        return req
    prompt, _ = _responses_prompt(req)
    fault = fault_of(request, prompt)
    if status := fault_status(fault):
        return fault_error(status)
    await before_answer(fault)
    items = [{"role": "user", "content": req.input}] if isinstance(req.input, str) else \
        [i for i in (req.model_dump(exclude_none=True).get("input") or []) if i.get("role") == "user"]
    output = [{"id": new_id("msg_"), "type": "message", "status": "completed", "role": "user",
               "content": [{"type": "input_text", "text": _text_of(i["content"])[0]}]} for i in items]
    summary = f"Summary of {len(items)} user message(s)."
    output.append({"id": new_id("cmp_"), "type": "compaction",
                   "encrypted_content": base64.b64encode(summary.encode()).decode()})
    plan = Plan(input_tokens=req.estimate_input_tokens(), pieces=tokenize(summary))
    body = {"id": new_id("resp_"), "object": "response.compaction", "created_at": int(time.time()),
            "output": output, "usage": _responses_usage(plan)}
    return cut_json(body) if fault == "cut" else JSONResponse(body)


# --- /v1/embeddings and /v1/models ------------------------------------------------------------------

def embedding_vector(value: str | list[int], dimensions: int) -> list[float]:
    """A unit vector derived from a hash of the input: the same input always gives the same one."""
    seed = hashlib.sha256(repr(value).encode()).digest()
    numbers: list[float] = []
    counter = 0
    while len(numbers) < dimensions:
        block = hashlib.sha256(seed + counter.to_bytes(4, "big")).digest()
        numbers += [(b / 127.5) - 1.0 for b in block]
        counter += 1
    numbers = numbers[:dimensions]
    norm = math.sqrt(sum(x * x for x in numbers)) or 1.0
    return [round(x / norm, 6) for x in numbers]


async def embeddings(request: Request) -> Response:
    req = await _parse(request, EmbeddingsRequest)
    if isinstance(req, Response):
        return req
    inputs = req.inputs()
    fault = fault_of(request, " ".join(i for i in inputs if isinstance(i, str)))
    if status := fault_status(fault):
        return fault_error(status)
    await before_answer(fault)
    dimensions = req.dimensions or EMBEDDING_DIMENSIONS
    data = []
    for index, value in enumerate(inputs):
        vector = embedding_vector(value, dimensions)
        if req.encoding_format == "base64":
            encoded: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        else:
            encoded = vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(req.token_counts())
    body = {"object": "list", "data": data, "model": req.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
    return cut_json(body) if fault == "cut" else JSONResponse(body)


async def models(request: Request) -> Response:
    header = request.headers.get("authorization", "")
    if not header.startswith("Bearer ") or not header[7:].strip():
        return error(401, "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.")
    if status := fault_status(fault_of(request, "")):
        return fault_error(status)
    return JSONResponse({"object": "list", "data": [
        {"id": model, "object": "model", "created": 1700000000, "owned_by": "simulator"} for model in MODELS]})


_TEXT_ROUTES = [
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/responses", responses, methods=["POST"]),
    Route("/v1/responses/compact", compact_responses, methods=["POST"]),
    Route("/v1/embeddings", embeddings, methods=["POST"]),
]
#: The routes a batch's lines are answered by, in-process (`openai_batch`).
routes_app = Starlette(routes=_TEXT_ROUTES)

app = Starlette(routes=with_fault_prefix([
    *_TEXT_ROUTES,
    Route("/v1/models", models, methods=["GET"]),
    *image_routes,  # the chat protocol's images endpoints and the files they hand out
    *audio_routes,  # speech, transcriptions, translations and moderations
    *batch_routes,  # OpenAI's Files and Batch API (`openai_batch`)
]))

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "openai")
