"""The chat-completions dialect: requests, answers and stream chunks, to and from the neutral shapes."""

from __future__ import annotations

import time
from typing import Any

from gateway.errors import InvalidRequest

from .neutral import (
    ASSISTANT,
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
    cache_mark,
    data_url,
    effort_for,
    guess_mime_type,
    new_call_id,
    parse_data_url,
    restyle_id,
    text_of,
    unsupported,
)
from .signatures import detail_of_call, detail_of_thinking, read_details
from .usage import Usage, usage_from_chat, usage_to_chat

# The `data: [DONE]` line that ends a chat stream, as a stream event's data.
DONE = "[DONE]"

Event = tuple[str | None, dict[str, Any] | str]

_FINISH_IN = {"stop": STOP, "length": LENGTH, "tool_calls": TOOL_CALLS, "function_call": TOOL_CALLS,
              "content_filter": CONTENT_FILTER}
_FINISH_OUT = {STOP: "stop", STOP_SEQUENCE: "stop", LENGTH: "length", TOOL_CALLS: "tool_calls",
               CONTENT_FILTER: "content_filter"}
_AUDIO_FORMATS: dict[Any, str] = {"wav": "audio/wav", "mp3": "audio/mpeg"}


# ---- requests ----

def parse_request(body: dict[str, Any]) -> Request:
    if (body.get("n") or 1) > 1:
        raise unsupported("n greater than 1", "n")
    request = Request(
        max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        temperature=body.get("temperature"), top_p=body.get("top_p"),
        top_k=body.get("top_k"),  # not in the dialect, but compatible servers take it
        stop=_stop_list(body.get("stop")), seed=body.get("seed"),
        presence_penalty=body.get("presence_penalty"), frequency_penalty=body.get("frequency_penalty"),
        reasoning_effort=body.get("reasoning_effort"), stream=bool(body.get("stream")),
        user=body.get("user"), parallel_tool_calls=body.get("parallel_tool_calls"),
    )
    names_by_call_id: dict[str, str] = {}
    for i, message in enumerate(body.get("messages") or []):
        role, content, where = message.get("role"), message.get("content"), f"messages[{i}]"
        if role in ("system", "developer"):
            if text := _plain_text(content):
                request.system.append(text)
                # cache_control on a content part, as Anthropic-compatible chat servers take it
                if mark := _cache_of(content):
                    request.system_cache[len(request.system) - 1] = mark
        elif role == USER:
            request.add(USER, _user_parts(content, where + ".content"))
        elif role == ASSISTANT:
            parts: list[Part] = []
            # What a thinking upstream signed, as the gateway handed it out (formats.signatures).
            signed, call_signatures = read_details(message.get("reasoning_details"))
            parts.extend(signed)
            if not signed and (reasoning := message.get("reasoning_content")):
                parts.append(Thinking(reasoning))
            if text := _plain_text(content) or message.get("refusal"):
                parts.append(Text(text))
            calls = list(message.get("tool_calls") or [])
            if legacy := message.get("function_call"):
                calls.append({"id": legacy.get("name"), "function": legacy})
            for call in calls:
                function = call.get("function") or {}
                call_id = call.get("id") or new_call_id()
                names_by_call_id[call_id] = function.get("name") or ""
                parts.append(ToolCall(call_id, function.get("name") or "", function.get("arguments") or "{}",
                                      call_signatures.get(call_id) or _google_signature(call)))
            request.add(ASSISTANT, parts)
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id") or message.get("name") or ""
            name = names_by_call_id.get(call_id) or message.get("name") or call_id
            request.add(USER, [ToolResult(call_id, name, [Text(_plain_text(content))])])
        else:
            raise InvalidRequest(f"{where}.role: unknown role {role!r}", param=f"{where}.role")
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type", "function") != "function":
            raise unsupported(f"tool type {tool.get('type')!r}", f"tools[{i}].type")
        function = tool.get("function") or {}
        request.tools.append(Tool(function.get("name") or "", function.get("description"),
                                  function.get("parameters") or {"type": "object", "properties": {}}))
    request.tool_choice = _tool_choice_in(body.get("tool_choice"))
    request.response_format = _response_format_in(body.get("response_format"))
    return request


def _google_signature(call: dict[str, Any]) -> str | None:
    # Where Google's own OpenAI-compatible endpoint puts a call's thought signature
    # (ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility"); clients written for it send it back.
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) and signature else None


def _stop_list(stop: Any) -> list[str]:
    if not stop:
        return []
    return [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str)]


def _plain_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text") or p.get("refusal") or "" for p in content
                   if isinstance(p, dict) and p.get("type") in ("text", "refusal"))


def _cache_of(content: Any) -> str | None:
    marks = [cache_mark(p.get("cache_control")) for p in content if isinstance(p, dict)] \
        if isinstance(content, list) else []
    return next((m for m in reversed(marks) if m), None)


def _user_parts(content: Any, where: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    parts: list[Part] = []
    for j, item in enumerate(content or []):
        kind = item.get("type")
        if kind == "text":
            parts.append(Text(item.get("text") or ""))
        elif kind == "image_url":
            image = item.get("image_url")
            url = image if isinstance(image, str) else (image or {}).get("url") or ""  # some clients send a bare string
            parts.append(_media_from_url(url, "image/jpeg"))
        elif kind == "input_audio":
            audio = item.get("input_audio") or {}
            parts.append(Media(_AUDIO_FORMATS.get(audio.get("format"), "audio/wav"), data=audio.get("data")))
        elif kind == "file":
            file = item.get("file") or {}
            if not file.get("file_data"):
                raise unsupported("a file given by id", f"{where}[{j}].file")
            # A data URL, or bare base64 as some clients send it.
            mime_type, data = parse_data_url(file["file_data"]) or (
                guess_mime_type(file.get("filename") or "", "application/pdf"), file["file_data"])
            parts.append(Media(mime_type, data=data, filename=file.get("filename")))
        else:
            raise unsupported(f"content part type {kind!r}", f"{where}[{j}].type")
        if (mark := cache_mark(item.get("cache_control"))) and isinstance(parts[-1], (Text, Media)):
            parts[-1].cache = mark
    return parts


def _media_from_url(url: str, default_mime: str) -> Media:
    inline = parse_data_url(url)
    if inline:
        return Media(inline[0], data=inline[1])
    return Media(guess_mime_type(url, default_mime), url=url)


def _tool_choice_in(choice: Any) -> ToolChoice | None:
    if choice in ("auto", "none", "required"):
        return ToolChoice(choice)
    if isinstance(choice, dict):
        return ToolChoice("tool", (choice.get("function") or {}).get("name"))
    return None


def _response_format_in(fmt: Any) -> ResponseFormat | None:
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        return ResponseFormat()
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return ResponseFormat(spec.get("schema"), spec.get("name"), spec.get("strict"))
    return None


def render_request(request: Request, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": "\n\n".join(request.system)})
    for turn in request.turns:
        if turn.role == ASSISTANT:
            messages.append(_assistant_message(turn.parts))
        else:
            messages.extend(_user_messages(turn.parts))
    body: dict[str, Any] = {"model": model, "messages": messages}
    effort = effort_for(request)
    if request.max_tokens is not None:
        # Reasoning models refuse max_tokens; everything else still knows it best.
        body["max_completion_tokens" if effort else "max_tokens"] = request.max_tokens
    for key, value in (("temperature", request.temperature), ("top_p", request.top_p),
                       ("seed", request.seed), ("presence_penalty", request.presence_penalty),
                       ("frequency_penalty", request.frequency_penalty),
                       ("reasoning_effort", effort), ("user", request.user)):
        if value is not None:
            body[key] = value
    if request.stop:
        body["stop"] = request.stop
    if request.tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, **({"description": t.description} if t.description else {}),
            "parameters": t.parameters}} for t in request.tools]
    if request.tool_choice:
        choice = request.tool_choice
        body["tool_choice"] = ({"type": "function", "function": {"name": choice.name}}
                               if choice.mode == "tool" else choice.mode)
    if request.parallel_tool_calls is not None and request.tools:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.response_format:
        fmt = request.response_format
        body["response_format"] = {"type": "json_object"} if fmt.schema is None else {
            "type": "json_schema", "json_schema": {
                "name": fmt.name or "response", "schema": fmt.schema,
                **({"strict": fmt.strict} if fmt.strict is not None else {})}}
    if request.stream:
        # Usage only comes with the stream when asked for; the gateway bills from it.
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _assistant_message(parts: list[Part]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text_of(parts) or None}
    calls = [p for p in parts if isinstance(p, ToolCall)]
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    return message


def _user_messages(parts: list[Part]) -> list[dict[str, Any]]:
    # Tool answers must directly follow the assistant's calls, so they go first; media inside a
    # tool answer cannot ride in a tool message and joins the user message after them.
    messages: list[dict[str, Any]] = []
    rest: list[Part] = []
    for part in parts:
        if isinstance(part, ToolResult):
            text = text_of(part.content)  # type: ignore[arg-type]
            messages.append({"role": "tool", "tool_call_id": part.id,
                             "content": text if text or not part.is_error else "error"})
            rest.extend(p for p in part.content if isinstance(p, Media))
        elif isinstance(part, (Text, Media)):
            rest.append(part)
    if rest:
        if len(rest) == 1 and isinstance(rest[0], Text):
            messages.append({"role": "user", "content": rest[0].text})
        else:
            messages.append({"role": "user", "content": [_content_part(p) for p in rest]})
    return messages


def _content_part(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    assert isinstance(part, Media)
    if part.kind == "image":
        return {"type": "image_url",
                "image_url": {"url": part.url or data_url(part.mime_type, part.data or "")}}
    if part.data is None:
        raise unsupported(f"a {part.kind} given by URL")
    if part.kind == "audio":
        fmt = next((f for f, m in _AUDIO_FORMATS.items() if m == part.mime_type), None)
        if fmt is None:
            raise unsupported(f"audio of type {part.mime_type}")
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": fmt}}
    return {"type": "file", "file": {"filename": part.filename or _default_filename(part.mime_type),
                                     "file_data": data_url(part.mime_type, part.data)}}


def _default_filename(mime_type: str) -> str:
    return "document." + (mime_type.rsplit("/", 1)[-1] if "/" in mime_type else "bin")


# ---- whole answers ----

def parse_response(body: dict[str, Any]) -> Reply:
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    parts: list[Part] = []
    if reasoning := message.get("reasoning_content") or message.get("reasoning"):
        parts.append(Thinking(reasoning))
    if text := _plain_text(message.get("content")) or message.get("refusal"):
        parts.append(Text(text))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(ToolCall(call.get("id") or new_call_id(), function.get("name") or "",
                              function.get("arguments") or "{}"))
    return Reply(id=body.get("id"), model=body.get("model"), parts=parts,
                 finish=_FINISH_IN.get(choice.get("finish_reason") or "stop", STOP),
                 usage=usage_from_chat(body.get("usage")), created=body.get("created"))


def render_response(reply: Reply, model: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text_of(reply.parts) or None,
                               "refusal": None}
    thinking = "".join(p.text for p in reply.parts if isinstance(p, Thinking))
    if thinking:
        message["reasoning_content"] = thinking  # the common extension; the SDK keeps extra fields
    calls = [p for p in reply.parts if isinstance(p, ToolCall)]
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    details: list[dict[str, Any]] = []
    for part in reply.parts:
        if isinstance(part, Thinking) and part.origin == MESSAGES and part.signature:
            details.append(detail_of_thinking(part, len(details)))
        elif isinstance(part, ToolCall) and part.signature:
            details.append(detail_of_call(part.id, part.signature, len(details)))
    if details:
        # What the upstream needs back on the next turn; the SDK keeps it on the message it returns
        # and sends it back when that message is appended unchanged (formats.signatures).
        message["reasoning_details"] = details
    return {
        "id": restyle_id(reply.id, "chatcmpl-"), "object": "chat.completion",
        "created": reply.created or int(time.time()), "model": model or reply.model or "",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": _FINISH_OUT.get(reply.finish, "stop")}],
        "usage": usage_to_chat(reply.usage),
    }


def rename_model(data: dict[str, Any], model: str) -> dict[str, Any]:
    """A relayed answer or chunk of this dialect, showing the client's model name."""
    return {**data, "model": model} if "model" in data else data


# ---- streams ----

class StreamDecoder:
    """Upstream chat chunks → neutral events.

    The answer is whole once a finish_reason has come and the stream then ends, with `[DONE]` or
    (as some compatible servers do) by closing; without a finish_reason it was cut.
    """

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._ended = False
        self._tools: dict[int, str] = {}

    def feed(self, event_name: str | None, data: Any) -> list[StreamEvent]:
        if data == DONE:
            self._ended = True
            return [End()] if self._finished else []
        if not isinstance(data, dict):
            return []
        if data.get("error"):
            error = data["error"]
            return [Failure(error.get("message") if isinstance(error, dict) else str(error))]
        events: list[StreamEvent] = []
        if not self._started:
            self._started = True
            events.append(Start(data.get("id"), data.get("model"), data.get("created")))
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if reasoning := delta.get("reasoning_content") or delta.get("reasoning"):
                events.append(ThinkingDelta(reasoning))
            if text := delta.get("content") or delta.get("refusal"):
                events.append(TextDelta(text))
            for call in delta.get("tool_calls") or []:
                index = call.get("index", 0)
                function = call.get("function") or {}
                if index not in self._tools:
                    self._tools[index] = call.get("id") or new_call_id()
                    events.append(ToolStart(index, self._tools[index], function.get("name") or ""))
                if function.get("arguments"):
                    events.append(ToolArgs(index, function["arguments"]))
            if reason := choice.get("finish_reason"):
                self._finished = True
                events.append(Finish(_FINISH_IN.get(reason, STOP)))
        if data.get("usage"):
            events.append(UsageUpdate(usage_from_chat(data["usage"])))
        return events

    def close(self) -> list[StreamEvent]:
        return [End()] if self._finished and not self._ended else []


class StreamEncoder:
    """Neutral events → client chat chunks (data-only), ending with the usage chunk if asked, then DONE."""

    def __init__(self, model: str | None = None, include_usage: bool = False, now: int | None = None):
        self._model = model
        self._include_usage = include_usage
        self._now = now
        self._id: str | None = None
        self._created = 0
        self._tools: dict[Any, int] = {}
        self._details = 0  # reasoning_details items sent so far
        self._usage: Usage | None = None

    def encode(self, event: StreamEvent) -> list[Event]:
        out: list[Event] = []
        if self._id is None and not isinstance(event, Failure):
            start = event if isinstance(event, Start) else Start(None, None)
            self._id = restyle_id(start.id, "chatcmpl-")
            self._created = start.created or self._now or int(time.time())
            self._model = self._model or start.model or ""
            out.append(self._chunk({"role": "assistant", "content": ""}))
            if isinstance(event, Start):
                return out
        if isinstance(event, TextDelta):
            out.append(self._chunk({"content": event.text}))
        elif isinstance(event, ThinkingDelta):
            out.append(self._chunk({"reasoning_content": event.text}))
        elif isinstance(event, Signed):
            if event.part.origin == MESSAGES and event.part.signature:
                # Each item whole, with its own index: the SDK's stream helper merges list items by index.
                out.append(self._chunk({"reasoning_details": [detail_of_thinking(event.part, self._details)]}))
                self._details += 1
        elif isinstance(event, ToolStart):
            self._tools[event.key] = len(self._tools)
            delta: dict[str, Any] = {"tool_calls": [{
                "index": self._tools[event.key], "id": event.id, "type": "function",
                "function": {"name": event.name, "arguments": ""}}]}
            if event.signature:
                delta["reasoning_details"] = [detail_of_call(event.id, event.signature, self._details)]
                self._details += 1
            out.append(self._chunk(delta))
        elif isinstance(event, ToolArgs) and event.key in self._tools:
            out.append(self._chunk({"tool_calls": [{
                "index": self._tools[event.key], "function": {"arguments": event.delta}}]}))
        elif isinstance(event, UsageUpdate):
            self._usage = event.usage
        elif isinstance(event, Finish):
            out.append(self._chunk({}, _FINISH_OUT.get(event.reason, "stop")))
        elif isinstance(event, End):
            if self._include_usage:
                _, chunk = self._chunk(None)
                chunk["usage"] = usage_to_chat(self._usage or Usage(0, 0))  # type: ignore[index]
                out.append((None, chunk))
            out.append((None, DONE))
        elif isinstance(event, Failure):
            # The openai SDK raises on a chunk carrying `error`.
            out.append((None, {"error": {"message": event.message, "type": "upstream_error",
                                         "param": None, "code": "upstream_error"}}))
        return out

    def _chunk(self, delta: dict[str, Any] | None, finish_reason: str | None = None) -> Event:
        # delta None makes the usage chunk, which has no choices.
        chunk: dict[str, Any] = {
            "id": self._id, "object": "chat.completion.chunk", "created": self._created,
            "model": self._model,
            "choices": [] if delta is None else [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self._include_usage:
            chunk["usage"] = None
        return None, chunk
