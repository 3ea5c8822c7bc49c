"""The converse dialect (Amazon Bedrock's Converse and ConverseStream), spoken by channels only:
requests written from the neutral shapes, answers and stream events read into them.

Shapes from botocore's service model of `bedrock-runtime` (2023-09-30: `ConverseRequest`,
`ContentBlock`, `ToolConfiguration`, `ConverseResponse`, `ConverseStreamOutput`) and AWS's API
reference (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html). Claude's
own fields (`thinking`, `top_k`) go in `additionalModelRequestFields`, passed to the model as is.
Claude's thinking comes back as `reasoningContent` signed by Anthropic: it is carried as the
messages dialect's thinking (same text, same signature; `redactedContent` as a
`redacted_thinking` block's data), so each client dialect hands it back where it keeps the
messages upstream's (`formats.signatures`).
"""

from __future__ import annotations

import re
from typing import Any

from .messages import ANSWER_TOOL, DEFAULT_MAX_TOKENS, _answer_tool
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
    Finish,
    Media,
    Part,
    Reply,
    Request,
    Signed,
    Start,
    StreamEvent,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolArgs,
    ToolCall,
    ToolResult,
    ToolStart,
    UsageUpdate,
    append_text,
    arguments_object,
    budget_for,
    dump_json,
    unsupported,
)
from .usage import usage_from_converse

_FINISH_IN = {"end_turn": STOP, "tool_use": TOOL_CALLS, "max_tokens": LENGTH, "stop_sequence": STOP_SEQUENCE,
              "guardrail_intervened": CONTENT_FILTER, "content_filtered": CONTENT_FILTER,
              "model_context_window_exceeded": LENGTH}
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif",
                  "image/webp": "webp"}
_DOCUMENT_FORMATS = {"application/pdf": "pdf", "text/csv": "csv", "application/msword": "doc",
                     "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
                     "application/vnd.ms-excel": "xls",
                     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
                     "text/html": "html", "text/plain": "txt", "text/markdown": "md"}
# toolUseId's pattern in the service model: [a-zA-Z0-9_-]+ (1..64)
_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")
# A document's name: letters, digits, spaces, hyphens, parentheses and square brackets (the service model).
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9 \-()\[\]]")
ANY_OBJECT = {"type": "object"}


def is_claude(model: str) -> bool:
    """Whether a model id (foundation model, profile id or ARN) names an Anthropic model, whose
    own fields (`thinking`, `top_k`) the gateway may pass in additionalModelRequestFields."""
    return "anthropic." in model or "claude" in model


# ---- requests ----

def render_request(request: Request, model: str) -> dict[str, Any]:
    claude = is_claude(model)
    messages = [_message(t.role, t.parts) for t in request.turns]
    body: dict[str, Any] = {}
    if request.system:
        body["system"] = _system(request)
    config, extra = _sampling(request, claude, _opens_with_thinking(messages))
    if "thinking" not in extra:
        _strip_final_thinking(messages)
    body["messages"] = [m for m in messages if m["content"]]
    if request.stop:
        config["stopSequences"] = request.stop
    if config:
        body["inferenceConfig"] = config
    if extra:
        body["additionalModelRequestFields"] = extra
    if tool_config := _tool_config(request, body["messages"]):
        body["toolConfig"] = tool_config
    return body


def _cache_point(ttl: str | None) -> dict[str, Any]:
    return {"cachePoint": {"type": "default", **({"ttl": ttl} if ttl == "1h" else {})}}


def _system(request: Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, text in enumerate(request.system):
        if text:
            out.append({"text": text})
        if (ttl := request.system_cache.get(i)) and out:
            out.append(_cache_point(ttl))
    return out


def _sampling(request: Request, claude: bool, thinking_allowed: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """inferenceConfig and Claude's own fields: the rules are Anthropic's, as the messages dialect
    writes them (a budget of at least 1024 under maxTokens; with thinking on, temperature 1 only
    and top_p from 0.95; no thinking with a forced tool)."""
    config: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    budget = budget_for(request) if claude and thinking_allowed else None
    forced = (request.tool_choice is not None and request.tool_choice.mode in ("required", "tool")) \
        or request.response_format is not None
    if forced:
        budget = None
    max_tokens = request.max_tokens
    if budget is not None:
        budget = max(budget, MIN_THINKING_BUDGET)
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        elif budget >= max_tokens:
            budget = max_tokens - 1 if max_tokens - 1 >= MIN_THINKING_BUDGET else None
    if max_tokens is not None:
        config["maxTokens"] = max_tokens
    if budget is not None:
        extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if request.temperature == 1:
            config["temperature"] = 1
        if request.top_p is not None and request.top_p >= 0.95:
            config["topP"] = request.top_p
        return config, extra
    if request.temperature is not None:
        config["temperature"] = min(request.temperature, 1.0)  # the service model's range is 0..1
    # Claude 4.5 refuses both at once ("`temperature` and `top_p` cannot both be specified for this
    # model", aws-samples/sample-connector-for-bedrock#87): temperature is kept.
    if request.top_p is not None and not (claude and "temperature" in config):
        config["topP"] = request.top_p
    if request.top_k is not None and claude:
        extra["top_k"] = request.top_k
    return config, extra


def _tool_config(request: Request, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The tools; when the client sent none but the history holds tool blocks, tools named after
    them, since Bedrock refuses those blocks without a toolConfig ("The toolConfig field must be
    defined when using toolUse and toolResult content blocks.": langgenius/dify#17545,
    patriceckhart/zot#18; `tools` has at least one item in the service model)."""
    if any(t.name == ANSWER_TOOL for t in request.tools):
        raise unsupported(f"a tool named {ANSWER_TOOL} (the gateway's own)", "tools")
    tools: list[dict[str, Any]] = []
    choice: dict[str, Any] | None = None
    if request.response_format is not None:
        answer = _answer_tool(request)
        tools = [{"toolSpec": {"name": answer["name"], "description": answer["description"],
                               "inputSchema": {"json": answer["input_schema"]}}}]
        choice = {"tool": {"name": ANSWER_TOOL}}
    elif request.tools and not (request.tool_choice and request.tool_choice.mode == "none"):
        for tool in request.tools:
            spec: dict[str, Any] = {"name": tool.name, "inputSchema": {"json": _object_schema(tool.parameters)}}
            if tool.description:
                spec["description"] = tool.description
            tools.append({"toolSpec": spec})
            if tool.cache:
                tools.append(_cache_point(tool.cache))
        mode = request.tool_choice.mode if request.tool_choice else "auto"
        named = request.tool_choice.name if request.tool_choice else ""
        choices: dict[str, dict[str, Any]] = {"auto": {"auto": {}}, "required": {"any": {}},
                                              "tool": {"tool": {"name": named}}}
        choice = choices.get(mode)
    if not tools:
        names: dict[str, None] = {}
        for message in messages:
            for block in message["content"]:
                if "toolUse" in block:
                    names[block["toolUse"]["name"]] = None
        known = {t.name: t for t in request.tools}
        for name in names:
            schema = _object_schema(known[name].parameters) if name in known else ANY_OBJECT
            tools.append({"toolSpec": {"name": name, "inputSchema": {"json": schema}}})
        if not tools and any("toolResult" in b for m in messages for b in m["content"]):
            # Results of calls no longer in the history: a tool is still needed; one the model is
            # told never to call.
            tools.append({"toolSpec": {"name": "gateway_no_tool", "description": "Never call this tool.",
                                       "inputSchema": {"json": ANY_OBJECT}}})
        choice = None
    if not tools:
        return None
    config: dict[str, Any] = {"tools": tools}
    if choice:
        config["toolChoice"] = choice
    return config


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return schema if schema.get("type") == "object" else {"type": "object", "properties": {}, **schema}


def _message(role: str, parts: list[Part]) -> dict[str, Any]:
    ordered = sorted(parts, key=lambda p: not isinstance(p, ToolResult)) if role == USER else parts
    content: list[dict[str, Any]] = []
    for part in ordered:
        block = _block(part)
        if block is None:
            continue
        content.append(block)
        if getattr(part, "cache", None):
            content.append(_cache_point(part.cache))  # type: ignore[union-attr]
    return {"role": role, "content": content}


def tool_id(value: str) -> str:
    return (_UNSAFE_ID.sub("_", value) or "tooluse")[:64]


def _block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return {"text": part.text} if part.text else None  # text has at least one character
    if isinstance(part, Media):
        return _media(part)
    if isinstance(part, Thinking):
        # Only what Anthropic signed goes back (a Claude model on Bedrock checks it).
        if part.origin != MESSAGES or not part.signature:
            return None
        if part.redacted:
            return {"reasoningContent": {"redactedContent": part.signature}}
        return {"reasoningContent": {"reasoningText": {"text": part.text, "signature": part.signature}}}
    if isinstance(part, ToolCall):
        return {"toolUse": {"toolUseId": tool_id(part.id), "name": part.name,
                            "input": arguments_object(part.arguments)}}
    assert isinstance(part, ToolResult)
    inner = [b for b in map(_block, part.content) if b is not None]
    result: dict[str, Any] = {"toolUseId": tool_id(part.id), "content": inner or [{"text": "(no output)"}]}
    if part.is_error:
        result["status"] = "error"
    return {"toolResult": result}


def _media(part: Media) -> dict[str, Any]:
    if part.url or part.data is None:
        # The service model takes bytes or an s3:// location: a web link is not fetched for it.
        raise unsupported("an image or document given by URL (a Bedrock channel takes them inline, as base64)")
    if part.kind == "image":
        fmt = _IMAGE_FORMATS.get(part.mime_type)
        if fmt is None:
            raise unsupported(f"an image of type {part.mime_type}")
        return {"image": {"format": fmt, "source": {"bytes": part.data}}}
    fmt = _DOCUMENT_FORMATS.get(part.mime_type)
    if fmt is None:
        raise unsupported(f"{part.kind} input of type {part.mime_type}")
    name = " ".join(_UNSAFE_NAME.sub(" ", (part.filename or "document").rsplit(".", 1)[0]).split())[:200]
    return {"document": {"format": fmt, "name": name or "document", "source": {"bytes": part.data}}}


def _opens_with_thinking(messages: list[dict[str, Any]]) -> bool:
    """Anthropic's rule on Bedrock as on its own API (`formats.messages._opens_with_thinking`): with
    thinking on, a tool loop's assistant turn must open with the thinking the model signed."""
    start = 0
    for i, message in enumerate(messages):
        if message["role"] == USER and any("toolResult" not in b for b in message["content"]):
            start = i + 1
    turn = [m for m in messages[start:] if m["role"] == ASSISTANT and m["content"]]
    if not any("toolUse" in b for m in turn for b in m["content"]):
        return True
    return "reasoningContent" in turn[0]["content"][0]


def _strip_final_thinking(messages: list[dict[str, Any]]) -> None:
    if messages and messages[-1]["role"] == ASSISTANT:
        messages[-1]["content"] = [b for b in messages[-1]["content"] if "reasoningContent" not in b]


# ---- whole answers ----

def parse_response(body: dict[str, Any]) -> Reply:
    message = (body.get("output") or {}).get("message") or {}
    parts: list[Part] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            append_text(parts, block["text"])
        elif isinstance(block.get("reasoningContent"), dict):
            parts.append(_thinking(block["reasoningContent"]))
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            if use.get("name") == ANSWER_TOOL:
                append_text(parts, dump_json(use.get("input") or {}))
            else:
                parts.append(ToolCall(use.get("toolUseId") or "", use.get("name") or "",
                                      dump_json(use.get("input") or {})))
    finish = _FINISH_IN.get(body.get("stopReason") or "end_turn", STOP)
    if finish == TOOL_CALLS and not any(isinstance(p, ToolCall) for p in parts):
        finish = STOP  # the only call was the JSON answer
    return Reply(id=None, model=None, parts=parts, finish=finish, usage=usage_from_converse(body.get("usage")))


def _thinking(content: dict[str, Any]) -> Thinking:
    if isinstance(content.get("redactedContent"), str):
        return Thinking("", content["redactedContent"], MESSAGES, redacted=True)
    text = content.get("reasoningText") or {}
    signature = text.get("signature")
    if isinstance(signature, str) and signature:
        return Thinking(str(text.get("text") or ""), signature, MESSAGES)
    return Thinking(str(text.get("text") or ""))


# ---- streams ----

class StreamDecoder:
    """ConverseStream's events (by `:event-type`, the payload as JSON) → neutral events. The
    stream is whole at `metadata`, which carries the usage and comes after `messageStop`."""

    def __init__(self) -> None:
        self._thinking: dict[Any, dict[str, str]] = {}  # open reasoning blocks by index
        self._answer_blocks: set[Any] = set()
        self._tool_calls = 0
        self._finish: str | None = None

    def feed(self, event_name: str | None, data: Any) -> list[StreamEvent]:
        if not isinstance(data, dict):
            return []
        index = data.get("contentBlockIndex", 0)
        if event_name == "messageStart":
            return [Start(None, None)]
        if event_name == "contentBlockStart":
            use = (data.get("start") or {}).get("toolUse")
            if not isinstance(use, dict):
                return []
            if use.get("name") == ANSWER_TOOL:
                self._answer_blocks.add(index)
                return []
            self._tool_calls += 1
            return [ToolStart(index, use.get("toolUseId") or "", use.get("name") or "")]
        if event_name == "contentBlockDelta":
            return self._delta(index, data.get("delta") or {})
        if event_name == "contentBlockStop":
            block = self._thinking.pop(index, None)
            if block is None:
                return []
            if block["redacted"]:
                return [Signed(Thinking("", block["redacted"], MESSAGES, redacted=True))]
            return [Signed(Thinking(block["text"], block["signature"], MESSAGES))] if block["signature"] else []
        if event_name == "messageStop":
            reason = _FINISH_IN.get(data.get("stopReason") or "end_turn", STOP)
            if reason == TOOL_CALLS and self._answer_blocks and not self._tool_calls:
                reason = STOP
            return [Finish(reason)]
        if event_name == "metadata":
            return [UsageUpdate(usage_from_converse(data.get("usage"))), End()]
        return []

    def _delta(self, index: Any, delta: dict[str, Any]) -> list[StreamEvent]:
        if isinstance(delta.get("text"), str):
            return [TextDelta(delta["text"])] if delta["text"] else []
        if isinstance(delta.get("toolUse"), dict):
            piece = delta["toolUse"].get("input")
            if not isinstance(piece, str) or not piece:
                return []
            return [TextDelta(piece)] if index in self._answer_blocks else [ToolArgs(index, piece)]
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, dict):
            block = self._thinking.setdefault(index, {"text": "", "signature": "", "redacted": ""})
            if isinstance(reasoning.get("signature"), str):
                block["signature"] += reasoning["signature"]
            if isinstance(reasoning.get("redactedContent"), str):
                block["redacted"] += reasoning["redactedContent"]
            if isinstance(reasoning.get("text"), str) and reasoning["text"]:
                block["text"] += reasoning["text"]
                return [ThinkingDelta(reasoning["text"])]
        return []

    def close(self) -> list[StreamEvent]:
        return []
