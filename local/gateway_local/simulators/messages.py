"""Simulated messages-dialect upstream (what the `anthropic` SDK speaks), mounted at `/messages`.

Routes: POST /v1/messages and /v1/messages/count_tokens, also under /fault/{fault}/; Anthropic's
Message Batches (`anthropic_batch`). Requires
`x-api-key` (or a bearer token), `anthropic-version` and `max_tokens`, as the real upstream does.
Prompt caching is simulated: the prefix up to the last `cache_control` mark is written to the
cache the first time it is seen and read from it afterwards (usage shows both, like the upstream).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.errors import InvalidRequest
from gateway.schemas.text.messages import MessagesRequest
from gateway.sse import encode
from gateway.tokens import estimate_value_tokens
from gateway.validation import parse_model
from gateway_local.simulators.anthropic_batch import routes as batch_routes

from . import rules
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
from .provider_faults import with_provider_faults

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                529: "overloaded_error"}
_STOP_REASONS = {"stop": "end_turn", "stop_sequence": "stop_sequence", "length": "max_tokens", "tool": "tool_use"}

_cached_prefixes: set[str] = set()


def error(status: int, message: str) -> JSONResponse:
    return error_json(status, {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"),
                                                          "message": message}})


async def _parse(request: Request) -> MessagesRequest | Response:
    # The key goes in x-api-key; newer SDK releases send it as a bearer token, which the
    # upstream accepts too.
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if not request.headers.get("x-api-key", "").strip() and not bearer:
        return error(401, "x-api-key header is required")
    if not request.headers.get("anthropic-version"):
        return error(400, "anthropic-version: header is required")
    body = await json_body(request)
    if not isinstance(body, dict):
        return error(400, "request body must be a JSON object")
    if refused := rules.messages.refusal(request.url.path, body):
        return error(400, refused[0])  # the upstream's own rules (max_tokens required, no unknown field, ...)
    try:
        return parse_model(MessagesRequest, body)
    except InvalidRequest as exc:
        return error(400, exc.message)


def _prompt(data: dict[str, Any]) -> tuple[str, int]:
    users = [m for m in data["messages"] if m["role"] == "user"]
    if not users:
        return "", 0
    content = users[-1]["content"]
    if isinstance(content, str):
        return content, 0
    texts = [p["text"] for p in content if p.get("type") == "text"]
    media = sum(1 for p in content if p.get("type") in ("image", "document"))
    return " ".join(texts), media


def _cache_usage(data: dict[str, Any]) -> tuple[int, int, int]:
    """(cache_creation, cache_read, of the creation those kept for an hour) tokens of the prefix
    ending at the last cache_control mark (`"ttl": "1h"` on that mark: written for an hour)."""
    blocks: list[Any] = list(data.get("tools") or [])
    system = data.get("system")
    blocks += system if isinstance(system, list) else [system] if system else []
    for message in data["messages"]:
        content = message["content"]
        blocks += content if isinstance(content, list) else [content]
    marked = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    if not marked:
        return 0, 0, 0
    prefix = blocks[: marked[-1] + 1]
    tokens = estimate_value_tokens(prefix)
    key = hashlib.sha256(json.dumps([data["model"], prefix], sort_keys=True).encode()).hexdigest()
    if key in _cached_prefixes:
        return 0, tokens, 0
    _cached_prefixes.add(key)
    return tokens, 0, tokens if blocks[marked[-1]]["cache_control"].get("ttl") == "1h" else 0


async def messages(request: Request) -> Response:
    req = await _parse(request)
    if isinstance(req, Response):
        return req
    data = req.model_dump(exclude_none=True)
    prompt, media = _prompt(data)
    fault = fault_of(request, prompt)
    if status := fault_status(fault):
        return error(status, "Overloaded (simulated)" if status == 529 else
                     "Rate limited (simulated)" if status == 429 else f"Simulated failure {status}")
    await before_answer(fault)
    created, read, hour = _cache_usage(data)
    plan = plan_answer(prompt, input_tokens=max(0, req.estimate_input_tokens() - created - read),
                       max_tokens=req.max_tokens, stop=req.stop_sequences,
                       tools=_tools(data), json_schema=_schema(data), thinking=req.thinking is not None,
                       attachments=media)
    message_id, tool_id = new_id("msg_"), new_id("toolu_")
    # Signed as the upstream signs its thinking; what comes back is checked (rules.messages).
    signature = rules.messages.signature_for("thinking", "".join(plan.thinking))
    usage = {"input_tokens": plan.input_tokens, "cache_creation_input_tokens": created,
             "cache_read_input_tokens": read, "output_tokens": plan.output_tokens, "service_tier": "standard",
             "cache_creation": {"ephemeral_5m_input_tokens": created - hour, "ephemeral_1h_input_tokens": hour}}
    blocks: list[dict[str, Any]] = []
    if plan.thinking:
        blocks.append({"type": "thinking", "thinking": "".join(plan.thinking), "signature": signature})
        if rules.messages.REDACTED_TRIGGER in prompt:  # the docs' way to see a redacted_thinking block
            blocks.append({"type": "redacted_thinking",
                           "data": rules.messages.signature_for("redacted_thinking", rules.messages.REDACTED_TRIGGER)})
    if plan.tool_name:
        blocks.append({"type": "tool_use", "id": tool_id, "name": plan.tool_name, "input": _arguments(plan)})
    else:
        blocks.append({"type": "text", "text": plan.text})
    stop_reason = _STOP_REASONS[plan.finish]
    head = {"id": message_id, "type": "message", "role": "assistant", "model": req.model}
    if not req.stream:
        body = {**head, "content": blocks, "stop_reason": stop_reason, "stop_sequence": plan.stop_sequence,
                "usage": usage}
        return cut_json(body) if fault == "cut" else JSONResponse(body)

    def event(kind: str, **fields: Any) -> bytes:
        return encode({"type": kind, **fields}, event=kind)

    events = [event("message_start", message={**head, "content": [], "stop_reason": None, "stop_sequence": None,
                                              "usage": {**usage, "output_tokens": 1}})]
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            start, deltas = {**block, "thinking": "", "signature": ""}, [
                {"type": "thinking_delta", "thinking": piece} for piece in plan.thinking] + [
                {"type": "signature_delta", "signature": signature}]
        elif block["type"] == "redacted_thinking":
            start, deltas = block, []  # whole in its start event
        elif block["type"] == "tool_use":
            start, deltas = {**block, "input": {}}, [
                {"type": "input_json_delta", "partial_json": piece} for piece in plan.tool_arguments]
        else:
            start, deltas = {"type": "text", "text": ""}, [
                {"type": "text_delta", "text": piece} for piece in plan.pieces]
        events.append(event("content_block_start", index=index, content_block=start))
        if index == 0:
            events.append(event("ping"))
        events += [event("content_block_delta", index=index, delta=delta) for delta in deltas]
        events.append(event("content_block_stop", index=index))
    events.append(event("message_delta", delta={"stop_reason": stop_reason, "stop_sequence": plan.stop_sequence},
                        usage={"output_tokens": plan.output_tokens}))
    events.append(event("message_stop"))
    return paced_stream(events, fault)


def _arguments(plan: Plan) -> dict[str, Any]:
    try:
        return json.loads(plan.arguments)
    except ValueError:
        return {}  # cut short by max_tokens


def _tools(data: dict[str, Any]) -> Tools:
    """The tools and `tool_choice` (`auto`, `any`, `tool` with its name, `none`); a user message
    holding tool results is the tools' turn, not the user's."""
    choice = data.get("tool_choice") or {}
    kind = choice.get("type", "auto")
    last = data["messages"][-1]
    content = last["content"]
    tool_results = isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
    return Tools({t["name"]: t.get("input_schema") for t in data.get("tools") or [] if t.get("name")},
                 choice={"any": "required", "tool": str(choice.get("name") or "required")}.get(kind, kind),
                 user_turn=last["role"] == "user" and not tool_results)


def _schema(data: dict[str, Any]) -> Any:
    """The JSON schema of structured outputs (`output_format`, or `output_config.format`), else None."""
    fmt = data.get("output_format") or (data.get("output_config") or {}).get("format") or {}
    return fmt.get("schema") or {} if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None


async def count_tokens(request: Request) -> Response:
    req = await _parse(request)
    if isinstance(req, Response):
        return req
    if status := fault_status(fault_of(request, _prompt(req.model_dump(exclude_none=True))[0])):
        return error(status, f"Simulated failure {status}")
    return JSONResponse({"input_tokens": req.estimate_input_tokens()})


#: The route a message batch's requests are answered by, in-process (`anthropic_batch`).
routes_app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])

app = Starlette(routes=with_fault_prefix([
    Route("/v1/messages", messages, methods=["POST"]),
    Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    *batch_routes,  # Anthropic's Message Batches (`anthropic_batch`)
]))

# The provider's own refusals of the channel's key or account (`provider_faults`).
app = with_provider_faults(app, "anthropic")
