"""The messages dialect: requests, answers and stream events, to and from the neutral shapes."""

from __future__ import annotations

import base64
from typing import Any

from gateway.errors import InvalidRequest

from .neutral import (
    ASSISTANT,
    CONTENT_FILTER,
    LENGTH,
    MESSAGES,
    MIN_THINKING_BUDGET,
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
    budget_for,
    cache_mark,
    dump_json,
    guess_mime_type,
    restyle_id,
    safe_tool_id,
    unsupported,
)
from .signatures import opened, sealed_call, thinking_block, thinking_from_block, unseal
from .usage import Usage, usage_from_messages, usage_to_messages

Event = tuple[str | None, dict[str, Any]]

# The dialect requires max_tokens; this is what a source that set none gets. 4096 is the
# smallest output ceiling among the models this dialect serves, so it is never refused.
DEFAULT_MAX_TOKENS = 4096

_FINISH_IN = {"end_turn": STOP, "max_tokens": LENGTH, "tool_use": TOOL_CALLS,
              "stop_sequence": STOP_SEQUENCE, "refusal": CONTENT_FILTER, "pause_turn": STOP,
              "model_context_window_exceeded": LENGTH}
_FINISH_OUT = {STOP: "end_turn", LENGTH: "max_tokens", TOOL_CALLS: "tool_use",
               STOP_SEQUENCE: "stop_sequence", CONTENT_FILTER: "refusal"}

# JSON output (a chat `response_format`, a responses `text.format`, a content `responseMimeType`)
# has no field of its own in this dialect: it becomes one forced tool whose input is the answer,
# and that tool's call comes back to the client as the answer's text.
ANSWER_TOOL = "gateway_json_answer"
ANY_OBJECT = {"type": "object"}


def _answer_tool(request: Request) -> dict[str, Any]:
    fmt = request.response_format
    assert fmt is not None
    if request.tools:
        raise unsupported("response_format together with tools (the JSON answer is carried as a forced tool)",
                          "response_format")
    schema = fmt.schema if fmt.schema is not None else ANY_OBJECT
    if schema.get("type") != "object":
        raise unsupported("a JSON schema whose root is not an object (a tool input must be one)",
                          "response_format.json_schema.schema")
    description = "Give the whole answer as this tool's input."
    if fmt.name:
        description += f" The answer is a {fmt.name}."
    return {"name": ANSWER_TOOL, "description": description, "input_schema": schema}


# ---- requests ----

def parse_request(body: dict[str, Any]) -> Request:
    metadata = body.get("metadata") or {}
    request = Request(
        max_tokens=body.get("max_tokens"), temperature=body.get("temperature"),
        top_p=body.get("top_p"), top_k=body.get("top_k"), stop=list(body.get("stop_sequences") or []),
        stream=bool(body.get("stream")), user=metadata.get("user_id"),
    )
    system = body.get("system")
    if isinstance(system, str):
        request.system = [system] if system else []
    elif isinstance(system, list):
        texts = [b for b in system if b.get("type") == "text"]
        request.system = [b.get("text") or "" for b in texts]
        request.system_cache = {i: mark for i, b in enumerate(texts) if (mark := cache_mark(b.get("cache_control")))}
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled":
        request.thinking_budget = thinking.get("budget_tokens")
        request.include_thoughts = True  # this dialect always answers with its thinking blocks
    elif thinking.get("type") == "disabled":
        request.thinking_budget = 0
    names_by_id: dict[str, str] = {}
    for i, message in enumerate(body.get("messages") or []):
        role, where = message.get("role"), f"messages[{i}]"
        if role not in (USER, ASSISTANT):
            raise InvalidRequest(f"{where}.role: unknown role {role!r}", param=f"{where}.role")
        request.add(role, _parts(message.get("content"), names_by_id, where + ".content"))
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
            raise unsupported(f"tool type {tool.get('type')!r}", f"tools[{i}].type")
        request.tools.append(Tool(tool.get("name") or "", tool.get("description"), tool["input_schema"],
                                  cache_mark(tool.get("cache_control"))))
    choice = body.get("tool_choice") or {}
    modes: dict[Any, str] = {"auto": "auto", "any": "required", "tool": "tool", "none": "none"}
    mode = modes.get(choice.get("type"))
    if mode:
        request.tool_choice = ToolChoice(mode, choice.get("name"))  # type: ignore[arg-type]
    if "disable_parallel_tool_use" in choice:
        request.parallel_tool_calls = not choice["disable_parallel_tool_use"]
    output = body.get("output_format") or {}  # the dialect's structured output
    if output.get("type") == "json_schema":
        request.response_format = ResponseFormat(output.get("schema"))
    return request


def _parts(content: Any, names_by_id: dict[str, str], where: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    parts: list[Part] = []
    call_signature: str | None = None  # a content upstream's, carried in the thinking block before its call
    for j, block in enumerate(content or []):
        kind, here = block.get("type"), f"{where}[{j}]"
        if kind == "text":
            append_text(parts, block.get("text") or "")
        elif kind in ("image", "document"):
            parts.extend(_media(block, here))
        elif kind == "tool_use":
            names_by_id[block.get("id") or ""] = block.get("name") or ""
            parts.append(ToolCall(block.get("id") or "", block.get("name") or "",
                                  dump_json(block.get("input") or {}), call_signature))
            call_signature = None
        elif kind == "tool_result":
            tool_id = block.get("tool_use_id") or ""
            inner = block.get("content")
            result = [Text(inner)] if isinstance(inner, str) else _parts(inner, names_by_id, here + ".content")
            parts.append(ToolResult(tool_id, names_by_id.get(tool_id, tool_id),
                                    [p for p in result if isinstance(p, (Text, Media))],
                                    bool(block.get("is_error"))))
        elif kind in ("thinking", "redacted_thinking"):
            carried = opened(block.get("signature"))
            if isinstance(carried, str):
                call_signature = carried  # the next call's
                continue
            parts.append(carried or thinking_from_block(block) or Thinking(str(block.get("thinking") or "")))
        else:
            raise unsupported(f"content block type {kind!r}", here + ".type")
        if (mark := cache_mark(block.get("cache_control"))) and parts \
                and isinstance(parts[-1], (Text, Media, ToolCall, ToolResult)):
            parts[-1].cache = mark
    return parts


def _media(block: dict[str, Any], where: str) -> list[Part]:
    source = block.get("source") or {}
    default = "image/jpeg" if block.get("type") == "image" else "application/pdf"
    if source.get("type") == "base64":
        return [Media(source.get("media_type") or default, data=source.get("data"), filename=block.get("title"))]
    if source.get("type") == "url":
        return [Media(guess_mime_type(source.get("url") or "", default), url=source.get("url"))]
    if source.get("type") == "text":
        return [Text(source.get("data") or "")]
    if source.get("type") == "content":
        return _parts(source.get("content"), {}, where + ".source.content")
    raise unsupported(f"a {block.get('type')} source of type {source.get('type')!r}", where + ".source")


def render_request(request: Request, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model}
    if request.system:
        body["system"] = (request.system[0] if len(request.system) == 1
                          else [{"type": "text", "text": s} for s in request.system])
    messages = [_message(t.role, t.parts) for t in request.turns]
    _render_sampling(request, body, _opens_with_thinking(messages))
    if "thinking" not in body:
        _strip_final_thinking(messages)
    body["messages"] = [m for m in messages if m["content"]]
    if request.stop:
        body["stop_sequences"] = request.stop
    _render_tools(request, body)
    if request.user:
        body["metadata"] = {"user_id": request.user}
    if request.stream:
        body["stream"] = True
    return body


_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def _opens_with_thinking(messages: list[dict[str, Any]]) -> bool:
    """Whether thinking may be on: with thinking on, the upstream refuses a tool loop whose
    assistant turn (its messages since the last user message that is not only tool results) does
    not open with a thinking block ("messages.N.content.0.type: Expected `thinking` or
    `redacted_thinking`, but found `tool_use`. ... To avoid this requirement, disable `thinking`":
    its 400; docs.claude.com/en/docs/build-with-claude/extended-thinking, "Preserving thinking
    blocks": the whole assistant turn, tool calls and results included, runs in one thinking mode,
    and only its first response need think). A client of another dialect that dropped the blocks
    gets its answer with thinking off for that request, instead of that 400."""
    start = 0
    for i, message in enumerate(messages):
        if message["role"] == USER and any(b.get("type") != "tool_result" for b in message["content"]):
            start = i + 1
    turn = [m for m in messages[start:] if m["role"] == ASSISTANT and m["content"]]
    if not any(b.get("type") == "tool_use" for m in turn for b in m["content"]):
        return True
    return turn[0]["content"][0].get("type") in _THINKING_BLOCKS


def _strip_final_thinking(messages: list[dict[str, Any]]) -> None:
    # With thinking off the upstream refuses thinking blocks in an assistant message in the final
    # position ("When thinking is disabled, an `assistant` message in the final position cannot
    # contain `thinking`"); earlier ones it accepts and ignores.
    if messages and messages[-1]["role"] == ASSISTANT:
        messages[-1]["content"] = [b for b in messages[-1]["content"] if b.get("type") not in _THINKING_BLOCKS]


def relayable(body: dict[str, Any]) -> dict[str, Any]:
    """A request of this dialect for a channel of this dialect: as the client sent it, but without
    the thinking blocks the gateway sealed for a content upstream (a turn another channel served;
    this upstream would refuse their signature), and with thinking off if that leaves a tool loop's
    final assistant message without its thinking."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    removed = False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in _THINKING_BLOCKS
                                               and unseal(b.get("signature")) is not None)]
            removed = removed or len(kept) != len(content)
            message["content"] = kept
    if removed:
        body["messages"] = [m for m in messages if not (isinstance(m, dict) and m.get("content") == [])]
        shaped = [{"role": m.get("role"), "content": [b for b in m["content"] if isinstance(b, dict)]
                   if isinstance(m.get("content"), list) else [{"type": "text"}]}
                  for m in body["messages"] if isinstance(m, dict)]
        if "thinking" in body and not _opens_with_thinking(shaped):
            del body["thinking"]
    return body


def _render_sampling(request: Request, body: dict[str, Any], thinking_allowed: bool = True) -> None:
    """max_tokens, thinking and the sampling knobs, which this dialect ties together."""
    budget = budget_for(request)
    forced_tool = (request.tool_choice is not None and request.tool_choice.mode in ("required", "tool")) \
        or request.response_format is not None
    if forced_tool or not thinking_allowed:
        budget = None  # the dialect refuses thinking together with a forced tool
    max_tokens = request.max_tokens
    if budget is not None:
        budget = max(budget, MIN_THINKING_BUDGET)
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        elif budget >= max_tokens:
            # The budget must stay under max_tokens; the client's ceiling wins.
            budget = max_tokens - 1 if max_tokens - 1 >= MIN_THINKING_BUDGET else None
    body["max_tokens"] = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        # With thinking on the dialect only takes temperature 1, top_p from 0.95 and no top_k.
        if request.temperature == 1:
            body["temperature"] = 1
        if request.top_p is not None and request.top_p >= 0.95:
            body["top_p"] = request.top_p
    else:
        if request.temperature is not None:
            body["temperature"] = min(request.temperature, 1.0)  # this dialect's range ends at 1
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.top_k is not None:
            body["top_k"] = request.top_k


def _render_tools(request: Request, body: dict[str, Any]) -> None:
    """The client's tools and tool choice, or the gateway's answer tool for a response format."""
    if request.tools:
        body["tools"] = [{"name": t.name, **({"description": t.description} if t.description else {}),
                          "input_schema": _object_schema(t.parameters)} for t in request.tools]
        choice: dict[str, Any] | None = None
        if request.tool_choice:
            mode = request.tool_choice.mode
            choice = {"type": {"auto": "auto", "none": "none", "required": "any", "tool": "tool"}[mode]}
            if mode == "tool":
                choice["name"] = request.tool_choice.name
        if request.parallel_tool_calls is False:
            choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
        if choice:
            body["tool_choice"] = choice
    if any(t.name == ANSWER_TOOL for t in request.tools):
        raise unsupported(f"a tool named {ANSWER_TOOL} (the gateway's own)", "tools")
    if request.response_format is not None:
        body["tools"] = [_answer_tool(request)]
        body["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return schema if schema.get("type") == "object" else {"type": "object", "properties": {}, **schema}


def _message(role: str, parts: list[Part]) -> dict[str, Any]:
    # Tool results must open a user message.
    ordered = sorted(parts, key=lambda p: not isinstance(p, ToolResult)) if role == USER else parts
    return {"role": role, "content": [b for b in map(_block, ordered) if b is not None]}


def _decoded_text(data: str) -> str:
    try:
        return base64.b64decode(data).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise unsupported("a text document that is not base64 UTF-8") from None


def _block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text} if part.text else None  # empty text is refused
    if isinstance(part, Media):
        if part.kind == "audio":
            raise unsupported("audio input")
        source: dict[str, Any]
        if part.url:
            source = {"type": "url", "url": part.url}
        elif part.kind == "document" and part.mime_type.startswith("text/"):
            # Plain-text documents travel as text here, not base64.
            source = {"type": "text", "media_type": "text/plain", "data": _decoded_text(part.data or "")}
        elif part.kind == "document" and part.mime_type != "application/pdf":
            raise unsupported(f"a document of type {part.mime_type}")
        else:
            source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
        return {"type": "image" if part.kind == "image" else "document", "source": source}
    if isinstance(part, Thinking):
        # Only a block this dialect's upstream signed may be sent back; others came from another vendor.
        if part.origin != MESSAGES or not part.signature:
            return None
        return thinking_block(part)
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": safe_tool_id(part.id), "name": part.name,
                "input": arguments_object(part.arguments)}
    assert isinstance(part, ToolResult)
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": safe_tool_id(part.id)}
    if inner := [b for b in map(_block, part.content) if b is not None]:
        result["content"] = inner
    if part.is_error:
        result["is_error"] = True
    return result


# ---- whole answers ----

def parse_response(body: dict[str, Any]) -> Reply:
    parts: list[Part] = []
    for block in body.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            append_text(parts, block.get("text") or "")
        elif kind in _THINKING_BLOCKS:
            parts.append(thinking_from_block(block) or Thinking(str(block.get("thinking") or "")))
        elif kind == "tool_use" and block.get("name") == ANSWER_TOOL:
            append_text(parts, dump_json(block.get("input") or {}))
        elif kind == "tool_use":
            parts.append(ToolCall(block.get("id") or "", block.get("name") or "",
                                  dump_json(block.get("input") or {})))
    finish = _FINISH_IN.get(body.get("stop_reason") or "end_turn", STOP)
    if finish == TOOL_CALLS and not any(isinstance(p, ToolCall) for p in parts):
        finish = STOP  # the only call was the JSON answer
    return Reply(id=body.get("id"), model=body.get("model"), parts=parts,
                 finish=finish,
                 usage=usage_from_messages(body.get("usage")), stop_sequence=body.get("stop_sequence"))


def render_response(reply: Reply, model: str | None = None) -> dict[str, Any]:
    content = [b for part in reply.parts for b in _reply_blocks(part)]
    return {
        "id": restyle_id(reply.id, "msg_"), "type": "message", "role": "assistant",
        "model": model or reply.model or "", "content": content,
        "stop_reason": _FINISH_OUT.get(reply.finish, "end_turn"),
        "stop_sequence": reply.stop_sequence if reply.finish == STOP_SEQUENCE else None,
        "usage": usage_to_messages(reply.usage),
    }


def _reply_blocks(part: Part) -> list[dict[str, Any]]:
    if isinstance(part, Thinking):
        if part.origin == MESSAGES and part.signature:
            return [thinking_block(part)]
        return [{"type": "thinking", "thinking": part.text, "signature": ""}]
    block = _block(part)
    if isinstance(part, ToolCall) and part.signature:
        # A content upstream's signature for this call rides in a thinking block just before it,
        # the place this dialect's clients keep and send back (formats.signatures).
        return [{"type": "thinking", "thinking": "", "signature": sealed_call(part.signature)}, block]  # type: ignore[list-item]
    return [block] if block is not None else []


def rename_model(data: dict[str, Any], model: str) -> dict[str, Any]:
    """A relayed answer or stream event of this dialect, showing the client's model name."""
    if data.get("type") == "message_start" and isinstance(data.get("message"), dict):
        return {**data, "message": {**data["message"], "model": model}}
    return {**data, "model": model} if "model" in data else data


# ---- streams ----

class StreamDecoder:
    """Upstream messages events → neutral events. The stream is whole at message_stop."""

    def __init__(self) -> None:
        self._usage: dict[str, Any] = {}  # raw counts, merged: message_delta may repeat or add some
        self._answer_blocks: set[Any] = set()  # blocks of the JSON answer tool: relayed as text
        self._tool_calls = 0
        self._thinking: dict[Any, dict[str, Any]] = {}  # open thinking blocks by index, as they build up

    def feed(self, event_name: str | None, data: Any) -> list[StreamEvent]:
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event_name
        if kind == "message_start":
            message = data.get("message") or {}
            self._merge_usage(message.get("usage"))
            return [Start(message.get("id"), message.get("model"), None, usage_from_messages(self._usage))]
        if kind == "content_block_start":
            return self._block_start(data.get("index", 0), data.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(data.get("index", 0), data.get("delta") or {})
        if kind == "message_delta":
            self._merge_usage(data.get("usage"))
            events: list[StreamEvent] = [UsageUpdate(usage_from_messages(self._usage))]
            delta = data.get("delta") or {}
            if delta.get("stop_reason"):
                reason = _FINISH_IN.get(delta["stop_reason"], STOP)
                if reason == TOOL_CALLS and self._answer_blocks and not self._tool_calls:
                    reason = STOP  # the only call was the JSON answer
                events.append(Finish(reason, delta.get("stop_sequence")))
            return events
        if kind == "content_block_stop":
            block = self._thinking.pop(data.get("index", 0), None)
            signed = thinking_from_block(block) if block else None
            return [Signed(signed)] if signed else []
        if kind == "message_stop":
            return [End()]
        if kind == "error":
            error = data.get("error") or {}
            return [Failure(error.get("message") or error.get("type") or "upstream error")]
        return []  # ping

    def _block_delta(self, index: Any, delta: dict[str, Any]) -> list[StreamEvent]:
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [TextDelta(delta["text"])]
        if delta.get("type") == "thinking_delta" and delta.get("thinking"):
            if (block := self._thinking.get(index)) is not None:
                block["thinking"] += delta["thinking"]
            return [ThinkingDelta(delta["thinking"])]
        if delta.get("type") == "signature_delta" and delta.get("signature"):
            if (block := self._thinking.get(index)) is not None:
                block["signature"] += delta["signature"]
            return []
        if delta.get("type") == "input_json_delta" and delta.get("partial_json"):
            if index in self._answer_blocks:
                return [TextDelta(delta["partial_json"])]
            return [ToolArgs(index, delta["partial_json"])]
        return []

    def _merge_usage(self, usage: dict[str, Any] | None) -> None:
        self._usage.update({k: v for k, v in (usage or {}).items() if v is not None})

    def _block_start(self, index: int, block: dict[str, Any]) -> list[StreamEvent]:
        kind = block.get("type")
        if kind == "tool_use" and block.get("name") == ANSWER_TOOL:
            self._answer_blocks.add(index)
            return [TextDelta(dump_json(block["input"]))] if block.get("input") else []
        if kind == "tool_use":
            self._tool_calls += 1
        if kind == "text" and block.get("text"):
            return [TextDelta(block["text"])]
        if kind in _THINKING_BLOCKS:
            self._thinking[index] = {"type": kind, "thinking": str(block.get("thinking") or ""),
                                     "signature": str(block.get("signature") or ""), "data": block.get("data")}
            return [ThinkingDelta(block["thinking"])] if block.get("thinking") else []
        if kind == "tool_use":
            events: list[StreamEvent] = [ToolStart(index, block.get("id") or "", block.get("name") or "")]
            if block.get("input"):
                events.append(ToolArgs(index, dump_json(block["input"])))
            return events
        return []

    def close(self) -> list[StreamEvent]:
        return []


class StreamEncoder:
    """Neutral events → client messages events: message_start, blocks, message_delta, message_stop."""

    def __init__(self, model: str | None = None, include_usage: bool = False, now: int | None = None):
        self._model = model
        self._started = False
        self._index = -1
        self._open: Any = None  # "text", "thinking", ("tool", key) or None
        self._finish: Finish | None = None
        self._usage: Usage | None = None

    def encode(self, event: StreamEvent) -> list[Event]:
        out: list[Event] = []
        if not self._started and not isinstance(event, Failure):
            out.append(self._message_start(event if isinstance(event, Start) else Start(None, None)))
            if isinstance(event, Start):
                return out
        if isinstance(event, TextDelta):
            out += self._open_block("text", {"type": "text", "text": ""})
            out.append(self._delta({"type": "text_delta", "text": event.text}))
        elif isinstance(event, ThinkingDelta):
            out += self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta({"type": "thinking_delta", "thinking": event.text}))
        elif isinstance(event, Signed):
            out += self._signed(event.part)
        elif isinstance(event, ToolStart):
            if event.signature:  # a content upstream's, in a thinking block before the call (as in answers)
                out += self._open_block("carrier", {"type": "thinking", "thinking": "", "signature": ""})
                out.append(self._delta({"type": "signature_delta", "signature": sealed_call(event.signature)}))
            out += self._open_block(("tool", event.key), {"type": "tool_use", "id": safe_tool_id(event.id),
                                                          "name": event.name, "input": {}})
        elif isinstance(event, ToolArgs) and self._open == ("tool", event.key):
            # Arguments of one call arrive before the next call starts (as chat upstreams send them).
            out.append(self._delta({"type": "input_json_delta", "partial_json": event.delta}))
        elif isinstance(event, UsageUpdate):
            self._usage = event.usage
        elif isinstance(event, Finish):
            out += self._close_block()
            self._finish = event
        elif isinstance(event, End):
            out += self._close_block()
            finish = self._finish or Finish(STOP)
            out.append(("message_delta", {
                "type": "message_delta",
                "delta": {"stop_reason": _FINISH_OUT.get(finish.reason, "end_turn"),
                          "stop_sequence": finish.stop_sequence if finish.reason == STOP_SEQUENCE else None},
                # Complete counts: a chat upstream only reports input at the end.
                "usage": usage_to_messages(self._usage or Usage(0, 0))}))
            out.append(("message_stop", {"type": "message_stop"}))
        elif isinstance(event, Failure):
            out.append(("error", {"type": "error", "error": {"type": "api_error", "message": event.message}}))
        return out

    def _signed(self, part: Thinking) -> list[Event]:
        if part.origin != MESSAGES or not part.signature:
            return []
        if part.redacted:
            out = self._open_block("redacted", thinking_block(part))
            return out + self._close_block()
        out = self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
        out.append(self._delta({"type": "signature_delta", "signature": part.signature}))
        return out + self._close_block()

    def _message_start(self, start: Start) -> Event:
        self._started = True
        if start.usage:
            self._usage = start.usage
        return ("message_start", {"type": "message_start", "message": {
            "id": restyle_id(start.id, "msg_"), "type": "message", "role": "assistant",
            "model": self._model or start.model or "", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": usage_to_messages(start.usage or Usage(0, 0))}})

    def _open_block(self, kind: Any, block: dict[str, Any]) -> list[Event]:
        if self._open == kind:
            return []
        out = self._close_block()
        self._index += 1
        self._open = kind
        out.append(("content_block_start", {"type": "content_block_start", "index": self._index,
                                            "content_block": block}))
        return out

    def _close_block(self) -> list[Event]:
        if self._open is None:
            return []
        self._open = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self._index})]

    def _delta(self, delta: dict[str, Any]) -> Event:
        return ("content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta})
