"""The responses dialect: requests, answers and stream events, to and from the neutral shapes.

No channel speaks this dialect, so there is no `render_request` and no `parse_response`; the
stream decoder exists for relaying a native stream (usage and text length for billing).
"""

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
    guess_mime_type,
    parse_data_url,
    restyle_id,
    unsupported,
)
from .signatures import opened, sealed_call, sealed_thinking, unseal
from .usage import Usage, usage_from_responses, usage_to_responses

Event = tuple[str | None, dict[str, Any]]

_INCOMPLETE = {LENGTH: "max_output_tokens", CONTENT_FILTER: "content_filter"}


# ---- requests ----

def parse_request(body: dict[str, Any]) -> Request:
    if body.get("previous_response_id"):
        # The gateway keeps no responses, so there is nothing to continue from.
        raise unsupported("previous_response_id", "previous_response_id")
    request = Request(
        max_tokens=body.get("max_output_tokens"), temperature=body.get("temperature"),
        top_p=body.get("top_p"), stream=bool(body.get("stream")), user=body.get("user"),
        parallel_tool_calls=body.get("parallel_tool_calls"),
        reasoning_effort=(body.get("reasoning") or {}).get("effort"),
        include_thoughts=bool((body.get("reasoning") or {}).get("summary")),
    )
    if body.get("instructions"):
        request.system.append(body["instructions"])
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_object":
        request.response_format = ResponseFormat()
    elif fmt.get("type") == "json_schema":
        request.response_format = ResponseFormat(fmt.get("schema"), fmt.get("name"), fmt.get("strict"))

    items = body.get("input")
    _read_input(request, [{"role": USER, "content": items}] if isinstance(items, str) else items or [])
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "function":
            raise unsupported(f"tool type {tool.get('type')!r}", f"tools[{i}].type")
        request.tools.append(Tool(tool.get("name") or "", tool.get("description"),
                                  tool.get("parameters") or {"type": "object", "properties": {}}))
    choice = body.get("tool_choice")
    if choice in ("auto", "none", "required"):
        request.tool_choice = ToolChoice(choice)
    elif isinstance(choice, dict) and choice.get("type") == "function":
        request.tool_choice = ToolChoice("tool", choice.get("name"))
    return request


def _read_input(request: Request, items: list[dict[str, Any]]) -> None:
    """The input items, in order, as turns of the request."""
    names_by_call_id: dict[str, str] = {}
    call_signature: str | None = None  # a content upstream's, carried in the reasoning item before its call
    for i, item in enumerate(items):
        kind, where = item.get("type", "message"), f"input[{i}]"
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                if text := "".join(p.text for p in _parts(item.get("content"), where) if isinstance(p, Text)):
                    request.system.append(text)
            elif role in (USER, ASSISTANT):
                request.add(role, _parts(item.get("content"), where + ".content"))
            else:
                raise InvalidRequest(f"{where}.role: unknown role {role!r}", param=f"{where}.role")
        elif kind == "function_call":
            call_id = item.get("call_id") or item.get("id") or ""
            names_by_call_id[call_id] = item.get("name") or ""
            request.add(ASSISTANT, [ToolCall(call_id, item.get("name") or "", item.get("arguments") or "{}",
                                             call_signature)])
            call_signature = None
        elif kind == "function_call_output":
            call_id = item.get("call_id") or ""
            output = item.get("output")
            content = [Text(output)] if isinstance(output, str) else _parts(output, where + ".output")
            request.add(USER, [ToolResult(call_id, names_by_call_id.get(call_id, call_id),
                                          [p for p in content if isinstance(p, (Text, Media))])])
        elif kind == "reasoning":
            # Only what the gateway sealed means anything to a channel of another dialect.
            carried = opened(item.get("encrypted_content"))
            if isinstance(carried, str):
                call_signature = carried
            elif carried is not None:
                request.add(ASSISTANT, [carried])
        else:
            raise unsupported(f"input item type {kind!r}", where + ".type")


def relayable(body: dict[str, Any]) -> dict[str, Any]:
    """A request of this dialect for a chat channel that serves it natively: as the client sent it,
    but without the reasoning items the gateway sealed for another upstream (a turn another
    channel served; this upstream could not read their `encrypted_content`)."""
    if isinstance(body.get("input"), list):
        body["input"] = [i for i in body["input"] if not (
            isinstance(i, dict) and i.get("type") == "reasoning" and unseal(i.get("encrypted_content")) is not None)]
    return body


def _parts(content: Any, where: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    parts: list[Part] = []
    for j, item in enumerate(content or []):
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(Text(item.get("text") or ""))
        elif kind == "refusal":
            parts.append(Text(item.get("refusal") or ""))
        elif kind == "input_image" and item.get("image_url"):
            url = item["image_url"]
            inline = parse_data_url(url)
            parts.append(Media(*inline) if inline else Media(guess_mime_type(url, "image/jpeg"), url=url))
        elif kind == "input_file" and (item.get("file_data") or item.get("file_url")):
            inline = parse_data_url(item.get("file_data") or "")
            if inline:
                parts.append(Media(inline[0], data=inline[1], filename=item.get("filename")))
            elif item.get("file_url"):
                parts.append(Media(guess_mime_type(item["file_url"], "application/pdf"), url=item["file_url"]))
            else:  # bare base64, as some clients send it
                parts.append(Media("application/pdf", data=item["file_data"], filename=item.get("filename")))
        else:
            raise unsupported(f"content type {kind!r} (files and images by id included)", f"{where}[{j}].type")
    return parts


# ---- whole answers ----

def _item_suffix(response_id: str) -> str:
    """Item ids repeat the response's unique part, so one answer's items are easy to find."""
    return response_id[len("resp_"):] if response_id.startswith("resp_") else response_id


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    # An item still streaming has no content yet; its part is announced by its own event.
    content = ([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
               if status == "completed" else [])
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name,
            "arguments": arguments}


def _reasoning_item(item_id: str, text: str | None, encrypted: str | None = None) -> dict[str, Any]:
    summary = [] if not text else [{"type": "summary_text", "text": text}]
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": summary}
    if encrypted:
        # What the upstream needs back, for a client that sends its output items back unchanged
        # (the dialect's place for state nothing stores: formats.signatures).
        item["encrypted_content"] = encrypted
    return item


def response_object(response_id: str, created: int, model: str, status: str,
                    output: list[dict[str, Any]], usage: Usage | None, finish: str | None = None,
                    error: dict[str, Any] | None = None) -> dict[str, Any]:
    """The response object, as non-streamed answers and every stream event that carries one hold it."""
    return {
        "id": response_id, "object": "response", "created_at": created, "status": status,
        "error": error,
        "incomplete_details": {"reason": _INCOMPLETE[finish]} if status == "incomplete" and finish else None,
        "instructions": None, "metadata": {}, "model": model, "output": output,
        "parallel_tool_calls": True, "temperature": None, "tool_choice": "auto", "tools": [],
        "top_p": None, "usage": usage_to_responses(usage) if usage else None,
    }


def _status(finish: str) -> str:
    return "incomplete" if finish in _INCOMPLETE else "completed"


def render_response(reply: Reply, model: str | None = None, now: int | None = None) -> dict[str, Any]:
    response_id = restyle_id(reply.id, "resp_")
    suffix = _item_suffix(response_id)
    output: list[dict[str, Any]] = []
    for part in reply.parts:
        index = len(output)
        if isinstance(part, Text):
            output.append(_message_item(f"msg_{suffix}_{index}", part.text))
        elif isinstance(part, Thinking):
            signed = part.origin == MESSAGES and part.signature
            output.append(_reasoning_item(f"rs_{suffix}_{index}", part.text,
                                          sealed_thinking(part) if signed else None))
        elif isinstance(part, ToolCall):
            if part.signature:
                output.append(_reasoning_item(f"rs_{suffix}_{index}", None, sealed_call(part.signature)))
                index += 1
            output.append(_call_item(f"fc_{suffix}_{index}", part.id, part.name, part.arguments))
    return response_object(response_id, reply.created or now or int(time.time()), model or reply.model or "",
                           _status(reply.finish), output, reply.usage, reply.finish)


def rename_model(data: dict[str, Any], model: str) -> dict[str, Any]:
    """A relayed answer or stream event of this dialect, showing the client's model name."""
    if isinstance(data.get("response"), dict):
        return {**data, "response": {**data["response"], "model": model}}
    return {**data, "model": model} if "model" in data else data


# ---- streams ----

class StreamDecoder:
    """Upstream responses events → neutral events (for relaying a native stream and billing it)."""

    def __init__(self) -> None:
        self._calls: set[Any] = set()

    def feed(self, event_name: str | None, data: Any) -> list[StreamEvent]:
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event_name
        if kind == "response.created":
            response = data.get("response") or {}
            return [Start(response.get("id"), response.get("model"), response.get("created_at"))]
        if kind == "response.output_text.delta" and data.get("delta"):
            return [TextDelta(data["delta"])]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta") and data.get("delta"):
            return [ThinkingDelta(data["delta"])]
        if kind == "response.output_item.added" and (data.get("item") or {}).get("type") == "function_call":
            item = data["item"]
            self._calls.add(data.get("output_index"))
            return [ToolStart(data.get("output_index"), item.get("call_id") or "", item.get("name") or "")]
        if kind == "response.function_call_arguments.delta" and data.get("delta"):
            return [ToolArgs(data.get("output_index"), data["delta"])]
        if kind in ("response.completed", "response.incomplete"):
            response = data.get("response") or {}
            reason = (response.get("incomplete_details") or {}).get("reason")
            finish = (LENGTH if reason == "max_output_tokens" else CONTENT_FILTER if reason
                      else TOOL_CALLS if self._calls else STOP)
            return [UsageUpdate(usage_from_responses(response.get("usage"))), Finish(finish), End()]
        if kind in ("response.failed", "error"):
            error = (data.get("response") or {}).get("error") or data
            return [Failure(error.get("message") or "upstream error")]
        return []

    def close(self) -> list[StreamEvent]:
        return []


class StreamEncoder:
    """Neutral events → client responses events, each with its type and a rising sequence_number;
    usage only in the terminal event."""

    def __init__(self, model: str | None = None, include_usage: bool = False, now: int | None = None):
        self._model = model
        self._now = now
        self._id: str | None = None
        self._created = 0
        self._sequence = 0
        self._output: list[dict[str, Any]] = []  # finished items
        self._open: dict[str, Any] | None = None  # the item being streamed, and what it holds so far
        self._finish: Finish | None = None
        self._usage: Usage | None = None

    def encode(self, event: StreamEvent) -> list[Event]:
        out: list[Event] = []
        if self._id is None:
            start = event if isinstance(event, Start) else Start(None, None)
            self._id = restyle_id(start.id, "resp_")
            self._created = start.created or self._now or int(time.time())
            self._model = self._model or start.model or ""
            if not isinstance(event, Failure):
                snapshot = self._response("in_progress")
                out.append(self._emit("response.created", response=snapshot))
                out.append(self._emit("response.in_progress", response=snapshot))
            if isinstance(event, Start):
                return out
        if isinstance(event, TextDelta):
            out += self._open_item("message")
            self._open["text"] += event.text  # type: ignore[index]
            out.append(self._emit("response.output_text.delta", **self._where(), content_index=0,
                                  delta=event.text, logprobs=[]))
        elif isinstance(event, ThinkingDelta):
            out += self._open_item("reasoning")
            if not self._open["text"]:  # type: ignore[index]
                # The summary part opens with its first text (a reasoning item may only carry a signature).
                out.append(self._emit("response.reasoning_summary_part.added", **self._where(), summary_index=0,
                                      part={"type": "summary_text", "text": ""}))
            self._open["text"] += event.text  # type: ignore[index]
            out.append(self._emit("response.reasoning_summary_text.delta", **self._where(), summary_index=0,
                                  delta=event.text))
        elif isinstance(event, Signed):
            if event.part.origin == MESSAGES and event.part.signature:
                out += self._open_item("reasoning")
                self._open["encrypted"] = sealed_thinking(event.part)  # type: ignore[index]
                out += self._close_item()
        elif isinstance(event, ToolStart):
            if event.signature:
                out += self._close_item()
                out += self._open_item("reasoning")
                self._open["encrypted"] = sealed_call(event.signature)  # type: ignore[index]
                out += self._close_item()
            out += self._open_item("function_call", key=event.key, call_id=event.id, name=event.name)
        elif isinstance(event, ToolArgs) and self._open and self._open.get("key") == event.key:
            self._open["text"] += event.delta
            out.append(self._emit("response.function_call_arguments.delta", **self._where(), delta=event.delta))
        elif isinstance(event, UsageUpdate):
            self._usage = event.usage
        elif isinstance(event, Finish):
            out += self._close_item()
            self._finish = event
        elif isinstance(event, End):
            out += self._close_item()
            finish = (self._finish or Finish(STOP)).reason
            status = _status(finish)
            out.append(self._emit(f"response.{status}", response=self._response(status, finish)))
        elif isinstance(event, Failure):
            error = {"code": "server_error", "message": event.message}
            out.append(self._emit("response.failed", response=self._response("failed", error=error)))
        return out

    def continue_after(self, sequence_number: int) -> None:
        """Number the next event after one the upstream sent (a relayed stream's own error)."""
        self._sequence = max(self._sequence, sequence_number + 1)

    def _response(self, status: str, finish: str | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
        usage = self._usage if status in ("completed", "incomplete") else None
        return response_object(self._id or "", self._created, self._model or "", status, list(self._output),
                               usage, finish, error)

    def _emit(self, kind: str, **fields: Any) -> Event:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return kind, data

    def _where(self) -> dict[str, Any]:
        assert self._open is not None
        return {"item_id": self._open["item"]["id"], "output_index": self._open["index"]}

    def _open_item(self, kind: str, key: Any = None, call_id: str = "", name: str = "") -> list[Event]:
        if self._open and self._open["item"]["type"] == kind and kind != "function_call":
            return []
        out = self._close_item()
        index = len(self._output)
        suffix = _item_suffix(self._id or "")
        if kind == "message":
            item = _message_item(f"msg_{suffix}_{index}", "", status="in_progress")
        elif kind == "reasoning":
            item = _reasoning_item(f"rs_{suffix}_{index}", None)
        else:
            item = _call_item(f"fc_{suffix}_{index}", call_id, name, "", status="in_progress")
        self._open = {"item": item, "index": index, "text": "", "key": key}
        out.append(self._emit("response.output_item.added", output_index=index, item=item))
        if kind == "message":
            out.append(self._emit("response.content_part.added", **self._where(), content_index=0,
                                  part={"type": "output_text", "text": "", "annotations": [], "logprobs": []}))
        return out

    def _close_item(self) -> list[Event]:
        if self._open is None:
            return []
        item, text, where = self._open["item"], self._open["text"], self._where()
        out: list[Event] = []
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            out.append(self._emit("response.output_text.done", **where, content_index=0, text=text, logprobs=[]))
            out.append(self._emit("response.content_part.done", **where, content_index=0, part=part))
            done = _message_item(item["id"], text)
        elif item["type"] == "reasoning":
            if text:
                part = {"type": "summary_text", "text": text}
                out.append(self._emit("response.reasoning_summary_text.done", **where, summary_index=0, text=text))
                out.append(self._emit("response.reasoning_summary_part.done", **where, summary_index=0, part=part))
            done = _reasoning_item(item["id"], text, self._open.get("encrypted"))
        else:
            out.append(self._emit("response.function_call_arguments.done", **where, name=item["name"],
                                  arguments=text))
            done = _call_item(item["id"], item["call_id"], item["name"], text)
        out.append(self._emit("response.output_item.done", output_index=where["output_index"], item=done))
        self._output.append(done)
        self._open = None
        return out
