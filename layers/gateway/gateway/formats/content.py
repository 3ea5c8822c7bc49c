"""The content-generation dialect: requests, answers and stream events, to and from the neutral shapes.

The model and streaming live in this dialect's URL, not its body: `render_request` leaves both
out and `parse_request` cannot know `stream` (the caller sets it). Field names are read in
camelCase or snake_case, since the upstream's JSON mapping takes both and clients send both.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .neutral import (
    ASSISTANT,
    CONTENT,
    CONTENT_FILTER,
    LENGTH,
    MESSAGES,
    STOP,
    STOP_SEQUENCE,
    TOOL_CALLS,
    USER,
    End,
    Failure,
    Finish,
    Media,
    Part,
    Reply,
    Request,
    ResponseFormat,
    Signed,
    Start,
    StreamEvent,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    Tool,
    ToolArgs,
    ToolCall,
    ToolChoice,
    ToolResult,
    ToolStart,
    UsageUpdate,
    append_text,
    arguments_object,
    dump_json,
    guess_mime_type,
    new_call_id,
    restyle_id,
    unsupported,
)
from .signatures import opened, sealed_thinking, unseal_bytes
from .usage import Usage, usage_from_content, usage_to_content

Event = tuple[str | None, dict[str, Any]]

_FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
             "LANGUAGE"}
_FINISH_OUT = {STOP: "STOP", STOP_SEQUENCE: "STOP", TOOL_CALLS: "STOP", LENGTH: "MAX_TOKENS",
               CONTENT_FILTER: "SAFETY"}
# thinkingLevel has four words; other dialects' efforts fold onto the nearest.
_LEVELS = {"none": "minimal", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
           "xhigh": "high"}
# What a function call the upstream did not sign gets instead: Google's documented value for calls
# made elsewhere (ai.google.dev/gemini-api/docs/thought-signatures, "skip_thought_signature_validator";
# new-api and gemini-cli send the same). Without one, a thinking model answers 400 "Function call
# is missing a thought_signature in functionCall parts".
PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"


def _get(source: dict[str, Any] | None, name: str) -> Any:
    """A field by its camelCase name, or its snake_case twin."""
    if not source:
        return None
    if name in source:
        return source[name]
    return source.get(re.sub(r"([A-Z])", r"_\1", name).lower())


def _finish_in(reason: str | None, called_tools: bool) -> str:
    if reason in _FILTERED:
        return CONTENT_FILTER
    if reason == "MAX_TOKENS":
        return LENGTH
    # The dialect says STOP after function calls; the others name that case.
    return TOOL_CALLS if called_tools else STOP


# ---- requests ----

def parse_request(body: dict[str, Any]) -> Request:
    config = _get(body, "generationConfig") or {}
    if (_get(config, "candidateCount") or 1) > 1:
        raise unsupported("candidateCount greater than 1", "generationConfig.candidateCount")
    request = Request(
        max_tokens=_get(config, "maxOutputTokens"), temperature=_get(config, "temperature"),
        top_p=_get(config, "topP"), top_k=_get(config, "topK"),
        stop=list(_get(config, "stopSequences") or []), seed=_get(config, "seed"),
        presence_penalty=_get(config, "presencePenalty"),
        frequency_penalty=_get(config, "frequencyPenalty"),
    )
    thinking = _get(config, "thinkingConfig") or {}
    if level := _get(thinking, "thinkingLevel"):
        request.reasoning_effort = str(level).lower()
    if (budget := _get(thinking, "thinkingBudget")) is not None:
        request.thinking_budget = budget
    request.include_thoughts = bool(_get(thinking, "includeThoughts"))
    if _get(config, "responseMimeType") == "application/json":
        schema = _get(config, "responseJsonSchema")
        if schema is None and _get(config, "responseSchema") is not None:
            schema = _json_schema(_get(config, "responseSchema"))
        request.response_format = ResponseFormat(schema)
    system = _get(body, "systemInstruction")
    if isinstance(system, str):  # not the wire form, but what SDK users write
        request.system = [system] if system else []
    elif system:
        request.system = [t for p in (system.get("parts") or []) if (t := p.get("text"))]

    calls = _CallIds()
    for i, item in enumerate(body.get("contents") or []):
        role = ASSISTANT if item.get("role") == "model" else USER
        parts: list[Part] = []
        for j, part in enumerate(item.get("parts") or []):
            parts.extend(_request_part(part, role, calls, f"contents[{i}].parts[{j}]"))
        request.add(role, parts)

    for i, tool in enumerate(body.get("tools") or []):
        declarations = _get(tool, "functionDeclarations")
        if declarations is None:
            raise unsupported(f"tool {next(iter(tool), '')!r}", f"tools[{i}]")
        for declaration in declarations:
            schema = _get(declaration, "parametersJsonSchema")
            if schema is None:
                schema = _json_schema(_get(declaration, "parameters") or {"type": "object", "properties": {}})
            request.tools.append(Tool(declaration.get("name") or "", declaration.get("description"), schema))
    calling = _get(_get(body, "toolConfig"), "functionCallingConfig") or {}
    mode, allowed = calling.get("mode"), _get(calling, "allowedFunctionNames") or []
    if mode == "ANY":
        request.tool_choice = ToolChoice("tool", allowed[0]) if len(allowed) == 1 else ToolChoice("required")
    elif mode == "NONE":
        request.tool_choice = ToolChoice("none")
    elif mode in ("AUTO", "VALIDATED"):
        request.tool_choice = ToolChoice("auto")
    return request


class _CallIds:
    """Ids for calls and answers that came without one (the dialect pairs them by name, in order)."""

    def __init__(self) -> None:
        self._count = 0
        self._waiting: dict[str, list[str]] = {}

    def call(self, name: str, given: str | None) -> str:
        call_id = given or f"call_{self._count}"
        self._count += 1
        self._waiting.setdefault(name, []).append(call_id)
        return call_id

    def answer(self, name: str, given: str | None) -> str:
        waiting = self._waiting.get(name) or []
        if given:
            if given in waiting:
                waiting.remove(given)
            return given
        return waiting.pop(0) if waiting else new_call_id()


def _request_part(part: dict[str, Any], role: str, calls: _CallIds, where: str) -> list[Part]:
    if "text" in part:
        if part.get("thought"):
            if role != ASSISTANT:
                return []
            # A messages upstream's thinking block, carried here by the gateway (formats.signatures).
            carried = opened(_get(part, "thoughtSignature"), as_bytes=True)
            return [carried if isinstance(carried, Thinking) else Thinking(part["text"])]
        return [Text(part["text"])] if part["text"] else []
    if (inline := _get(part, "inlineData")) is not None:
        return [Media(_get(inline, "mimeType") or "application/octet-stream", data=inline.get("data"))]
    if (file := _get(part, "fileData")) is not None:
        uri = _get(file, "fileUri") or ""
        return [Media(_get(file, "mimeType") or guess_mime_type(uri, "application/octet-stream"), url=uri)]
    if (call := _get(part, "functionCall")) is not None:
        name = call.get("name") or ""
        signature = _get(part, "thoughtSignature")
        return [ToolCall(calls.call(name, call.get("id")), name, dump_json(call.get("args") or {}),
                         signature if isinstance(signature, str) and signature else None)]
    if (answer := _get(part, "functionResponse")) is not None:
        name = answer.get("name") or ""
        text, is_error = _result_text(answer.get("response"))
        return [ToolResult(calls.answer(name, answer.get("id")), name, [Text(text)], is_error)]
    raise unsupported(f"part {next(iter(part), '')!r}", where)


def _result_text(response: Any) -> tuple[str, bool]:
    # The dialect's convention is {"output": ...} or {"error": ...}; anything else goes as JSON.
    if isinstance(response, dict) and len(response) == 1:
        (key, value), = response.items()
        if key in ("output", "result", "content", "error"):
            return (value if isinstance(value, str) else dump_json(value)), key == "error"
    return dump_json(response if response is not None else {}), False


def _result_object(text: str, is_error: bool) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and not is_error:
        return value
    return {"error" if is_error else "output": text}


def _json_schema(schema: Any) -> Any:
    """The dialect's OpenAPI-style schema (types in capitals) as JSON Schema."""
    if isinstance(schema, list):
        return [_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {k: _json_schema(v) for k, v in schema.items()}
    if isinstance(converted.get("type"), str):
        converted["type"] = converted["type"].lower()
    return converted


def render_request(request: Request, model: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": _contents(request)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": s} for s in request.system]}
    config: dict[str, Any] = {}
    for key, value in (("temperature", request.temperature), ("topP", request.top_p),
                       ("topK", request.top_k), ("maxOutputTokens", request.max_tokens),
                       ("seed", request.seed), ("presencePenalty", request.presence_penalty),
                       ("frequencyPenalty", request.frequency_penalty)):
        if value is not None:
            config[key] = value
    if request.stop:
        config["stopSequences"] = request.stop
    if request.response_format:
        config["responseMimeType"] = "application/json"
        if request.response_format.schema is not None:
            config["responseJsonSchema"] = request.response_format.schema
    # An exact budget travels as a budget (both model generations take one); an effort word
    # travels as the level word this dialect shares with the chat dialect.
    thinking_config: dict[str, Any] = {}
    if request.thinking_budget is not None:
        thinking_config["thinkingBudget"] = request.thinking_budget
    elif request.reasoning_effort in _LEVELS:
        thinking_config["thinkingLevel"] = _LEVELS[request.reasoning_effort]
    if request.include_thoughts and thinking_config:
        thinking_config["includeThoughts"] = True  # thoughts are only sent back when asked for
    if thinking_config:
        config["thinkingConfig"] = thinking_config
    if config:
        body["generationConfig"] = config
    if request.tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": t.name, **({"description": t.description} if t.description else {}),
             "parametersJsonSchema": t.parameters} for t in request.tools]}]
    if request.tool_choice:
        choice = request.tool_choice
        calling: dict[str, Any] = {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY",
                                            "tool": "ANY"}[choice.mode]}
        if choice.mode == "tool":
            calling["allowedFunctionNames"] = [choice.name]
        body["toolConfig"] = {"functionCallingConfig": calling}
    return body


def _contents(request: Request) -> list[dict[str, Any]]:
    contents = []
    for turn in request.turns:
        parts = [p for part in turn.parts for p in _parts_out(part)]
        if turn.role == ASSISTANT:
            _sign_first_call(parts)
        if parts:
            contents.append({"role": "model" if turn.role == ASSISTANT else "user", "parts": parts})
    return contents


def _sign_first_call(parts: list[dict[str, Any]]) -> None:
    """The upstream checks the signature of the first function call of each model step (parallel
    calls after it carry none); one the client did not hand back gets the placeholder."""
    first = next((p for p in parts if isinstance(p, dict) and ("functionCall" in p or "function_call" in p)), None)
    if first is not None and not (first.get("thoughtSignature") or first.get("thought_signature")):
        first["thoughtSignature"] = PLACEHOLDER_SIGNATURE


def relayable(body: dict[str, Any]) -> dict[str, Any]:
    """A request of this dialect for a channel of this dialect: as the client sent it, but without
    the thoughts the gateway sealed for a messages upstream (a turn another channel served), and
    with the placeholder on a model step's first call that came unsigned (a call another channel
    made: this upstream refuses it otherwise)."""
    for item in body.get("contents") or []:
        if not isinstance(item, dict) or item.get("role") != "model" or not isinstance(item.get("parts"), list):
            continue
        item["parts"] = [p for p in item["parts"] if not (
            isinstance(p, dict) and unseal_bytes(p.get("thoughtSignature") or p.get("thought_signature")))]
        _sign_first_call(item["parts"])
    return body


def _parts_out(part: Part) -> list[dict[str, Any]]:
    if isinstance(part, Text):
        return [{"text": part.text}] if part.text else []
    if isinstance(part, Media):
        if part.url:
            return [{"fileData": {"mimeType": part.mime_type, "fileUri": part.url}}]
        return [{"inlineData": {"mimeType": part.mime_type, "data": part.data or ""}}]
    if isinstance(part, Thinking):
        return []  # thoughts are the model's own; this dialect does not take them back
    if isinstance(part, ToolCall):
        out: dict[str, Any] = {"functionCall": {"name": part.name, "args": arguments_object(part.arguments)}}
        if part.signature:
            out["thoughtSignature"] = part.signature
        return [out]
    assert isinstance(part, ToolResult)
    text = "".join(p.text for p in part.content if isinstance(p, Text))
    answer = [{"functionResponse": {"name": part.name, "response": _result_object(text, part.is_error)}}]
    return answer + [p for media in part.content if isinstance(media, Media) for p in _parts_out(media)]


# ---- whole answers ----

def _answer_parts(candidate: dict[str, Any]) -> list[Part]:
    parts: list[Part] = []
    for part in (candidate.get("content") or {}).get("parts") or []:
        if "text" in part:
            if part.get("thought"):
                parts.append(Thinking(part["text"], _get(part, "thoughtSignature"), CONTENT))
            else:
                append_text(parts, part["text"])
        elif (call := _get(part, "functionCall")) is not None:
            signature = _get(part, "thoughtSignature")
            parts.append(ToolCall(call.get("id") or new_call_id(), call.get("name") or "",
                                  dump_json(call.get("args") or {}),
                                  signature if isinstance(signature, str) and signature else None))
    return parts


def parse_response(body: dict[str, Any]) -> Reply:
    candidate = (body.get("candidates") or [{}])[0]
    parts = _answer_parts(candidate)
    if not body.get("candidates") and _get(_get(body, "promptFeedback"), "blockReason"):
        finish = CONTENT_FILTER
    else:
        finish = _finish_in(_get(candidate, "finishReason"), any(isinstance(p, ToolCall) for p in parts))
    return Reply(id=_get(body, "responseId"), model=_get(body, "modelVersion"), parts=parts,
                 finish=finish, usage=usage_from_content(_get(body, "usageMetadata")))


def render_response(reply: Reply, model: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in reply.parts:
        if isinstance(part, Thinking):
            parts.append(_thought_part(part))
        else:
            parts.extend(_parts_out(part))
    return {
        "candidates": [{"content": {"parts": parts, "role": "model"},
                        "finishReason": _FINISH_OUT.get(reply.finish, "STOP"), "index": 0}],
        "usageMetadata": usage_to_content(reply.usage),
        "modelVersion": model or reply.model or "",
        "responseId": restyle_id(reply.id, ""),
    }


def _thought_part(part: Thinking) -> dict[str, Any]:
    out: dict[str, Any] = {"text": part.text, "thought": True}
    if part.origin == MESSAGES and part.signature:
        # A messages upstream's block, whole, in the part's signature (formats.signatures).
        out["thoughtSignature"] = sealed_thinking(part, as_bytes=True)
    return out


def rename_model(data: dict[str, Any], model: str) -> dict[str, Any]:
    """A relayed answer or stream event of this dialect, showing the client's model name."""
    return {**data, "modelVersion": model} if "modelVersion" in data else data


# ---- streams ----

class StreamDecoder:
    """Upstream content events → neutral events.

    The dialect has no terminal event: the answer is whole when a finishReason has come and the
    upstream then closes, so End is given by `close()`.
    """

    def __init__(self) -> None:
        self._started = False
        self._calls = 0
        self._finish: str | None = None

    def feed(self, event_name: str | None, data: Any) -> list[StreamEvent]:
        if not isinstance(data, dict):
            return []
        if data.get("error"):
            error = data["error"]
            return [Failure(error.get("message") if isinstance(error, dict) else str(error))]
        events: list[StreamEvent] = []
        metadata = _get(data, "usageMetadata")
        if not self._started:
            self._started = True
            events.append(Start(_get(data, "responseId"), _get(data, "modelVersion"), None,
                                usage_from_content(metadata) if metadata else None))
        candidate = (data.get("candidates") or [{}])[0]
        for part in _answer_parts(candidate):
            if isinstance(part, Thinking):
                events.append(ThinkingDelta(part.text))
            elif isinstance(part, Text):
                events.append(TextDelta(part.text))
            elif isinstance(part, ToolCall):
                # Calls come whole in one event.
                self._calls += 1
                events.append(ToolStart(self._calls, part.id, part.name, part.signature))
                events.append(ToolArgs(self._calls, part.arguments))
        if metadata:
            events.append(UsageUpdate(usage_from_content(metadata)))
        reason = _get(candidate, "finishReason")
        if not data.get("candidates") and _get(_get(data, "promptFeedback"), "blockReason"):
            reason = "SAFETY"
        if reason and self._finish is None:
            self._finish = reason
            events.append(Finish(_finish_in(reason, self._calls > 0)))
        return events

    def close(self) -> list[StreamEvent]:
        return [End()] if self._finish else []


class StreamEncoder:
    """Neutral events → client content events: each a whole response object; the last one
    carries finishReason and the cumulative usageMetadata. Function calls are sent whole."""

    def __init__(self, model: str | None = None, include_usage: bool = False, now: int | None = None):
        self._model = model
        self._id: str | None = None
        self._calls: dict[Any, list[Any]] = {}  # key → [name, arguments so far, signature], in call order
        self._finish: Finish | None = None
        self._usage: Usage | None = None

    def encode(self, event: StreamEvent) -> list[Event]:
        if self._id is None and not isinstance(event, Failure):
            start = event if isinstance(event, Start) else Start(None, None)
            self._id = restyle_id(start.id, "")
            self._model = self._model or start.model or ""
            self._usage = start.usage
        if isinstance(event, TextDelta):
            return self._flush_calls() + [self._event([{"text": event.text}])]
        if isinstance(event, ThinkingDelta):
            return self._flush_calls() + [self._event([{"text": event.text, "thought": True}])]
        if isinstance(event, Signed):
            if event.part.origin == MESSAGES and event.part.signature:
                # Its text has streamed already: an empty thought carrying the whole block.
                carrier = {"text": "", "thought": True, "thoughtSignature": sealed_thinking(event.part, as_bytes=True)}
                return self._flush_calls() + [self._event([carrier])]
            return []
        if isinstance(event, ToolStart):
            self._calls[event.key] = [event.name, "", event.signature]
        elif isinstance(event, ToolArgs) and event.key in self._calls:
            self._calls[event.key][1] += event.delta
        elif isinstance(event, UsageUpdate):
            self._usage = event.usage
        elif isinstance(event, Finish):
            self._finish = event
        elif isinstance(event, End):
            parts = self._call_parts() or [{"text": ""}]
            reason = _FINISH_OUT.get((self._finish or Finish(STOP)).reason, "STOP")
            return [self._event(parts, reason)]
        elif isinstance(event, Failure):
            return [(None, {"error": {"code": 502, "message": event.message, "status": "UNAVAILABLE"}})]
        return []

    def _call_parts(self) -> list[dict[str, Any]]:
        parts = [{"functionCall": {"name": name, "args": arguments_object(arguments)},
                  **({"thoughtSignature": signature} if signature else {})}
                 for name, arguments, signature in self._calls.values()]
        self._calls.clear()
        return parts

    def _flush_calls(self) -> list[Event]:
        parts = self._call_parts()
        return [self._event(parts)] if parts else []

    def _event(self, parts: list[dict[str, Any]], finish_reason: str | None = None) -> Event:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        response: dict[str, Any] = {"candidates": [candidate]}
        if finish_reason:
            candidate["finishReason"] = finish_reason
            response["usageMetadata"] = usage_to_content(self._usage or Usage(0, 0))
        response["modelVersion"] = self._model
        response["responseId"] = self._id
        return None, response
