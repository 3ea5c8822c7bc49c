"""The dialect-neutral shapes every dialect module reads into and writes from.

A conversion is `<target>.render_*(<source>.parse_*(body))`: one reader and one writer per
dialect instead of a converter per pair, so adding a dialect is adding a module. The shapes
keep what at least two dialects can express; what only one can (safety settings, logprobs) stays
behind. Prompt-cache marks (`cache`: a messages `cache_control`, the time to keep, "5m" or "1h")
ride on the parts, tools and system entries they follow, for the converse dialect's `cachePoint`.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.errors import InvalidRequest

from .usage import Usage

CHAT, MESSAGES, CONTENT, RESPONSES = "chat", "messages", "content", "responses"
DIALECTS = (CHAT, MESSAGES, CONTENT, RESPONSES)
#: Amazon Bedrock's Converse API: spoken by channels only (no client route takes it).
CONVERSE = "converse"

# Finish reasons: the chat dialect's words, plus stop_sequence, which only messages tells apart.
STOP, LENGTH, TOOL_CALLS, CONTENT_FILTER, STOP_SEQUENCE = (
    "stop", "length", "tool_calls", "content_filter", "stop_sequence")

USER, ASSISTANT = "user", "assistant"


# ---- parts of a turn ----

@dataclass
class Text:
    text: str
    cache: str | None = None  # a prompt-cache mark after this part (module docstring)


@dataclass
class Media:
    """An image, document or audio clip, inline (base64 `data`) or by `url`."""
    mime_type: str
    data: str | None = None
    url: str | None = None
    filename: str | None = None
    cache: str | None = None

    @property
    def kind(self) -> str:
        if self.mime_type.startswith("image/"):
            return "image"
        if self.mime_type.startswith("audio/"):
            return "audio"
        return "document"


@dataclass
class Thinking:
    """The model's thinking. `signature` is what its upstream signed it with (a messages
    `thinking` block's signature, or a `redacted_thinking` block's data when `redacted`), to be
    sent back only to a channel of the `origin` dialect (`formats.signatures`)."""
    text: str
    signature: str | None = None
    origin: str | None = None
    redacted: bool = False


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the chat dialect carries it
    signature: str | None = None  # a content upstream's thoughtSignature on this call, to send back there
    cache: str | None = None


@dataclass
class ToolResult:
    id: str
    name: str
    content: list[Text | Media]
    is_error: bool = False
    cache: str | None = None


Part = Text | Media | Thinking | ToolCall | ToolResult


@dataclass
class Turn:
    role: Literal["user", "assistant"]
    parts: list[Part]


@dataclass
class Tool:
    name: str
    description: str | None
    parameters: dict[str, Any]
    cache: str | None = None


@dataclass
class ToolChoice:
    mode: Literal["auto", "none", "required", "tool"]
    name: str | None = None


@dataclass
class ResponseFormat:
    """JSON output; `schema` None means any JSON object."""
    schema: dict[str, Any] | None = None
    name: str | None = None
    strict: bool | None = None


@dataclass
class Request:
    system: list[str] = field(default_factory=list)
    system_cache: dict[int, str] = field(default_factory=dict)  # prompt-cache marks after system entries, by index
    turns: list[Turn] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    # Thinking as the source said it: an effort word (chat, responses, content levels) and/or an
    # exact token budget (messages, content budgets). Writers convert only what they must.
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    include_thoughts: bool = False  # the client wants the thinking text back, not just the answer
    response_format: ResponseFormat | None = None
    stream: bool = False
    user: str | None = None

    def add(self, role: str, parts: list[Part]) -> None:
        """Append parts, merging into the last turn when the role repeats (every target accepts that)."""
        if not parts:
            return
        if self.turns and self.turns[-1].role == role:
            self.turns[-1].parts.extend(parts)
        else:
            self.turns.append(Turn(role, list(parts)))  # type: ignore[arg-type]


@dataclass
class Reply:
    """A whole non-streamed answer."""
    id: str | None
    model: str | None
    parts: list[Part]
    finish: str
    usage: Usage
    created: int | None = None
    stop_sequence: str | None = None


# ---- stream events between a decoder (upstream side) and an encoder (client side) ----

@dataclass
class Start:
    id: str | None
    model: str | None
    created: int | None = None
    usage: Usage | None = None


@dataclass
class TextDelta:
    text: str


@dataclass
class ThinkingDelta:
    text: str


@dataclass
class ToolStart:
    key: Any  # the decoder's handle for this call; ToolArgs refer to it
    id: str
    name: str
    signature: str | None = None  # as ToolCall.signature


@dataclass
class Signed:
    """A thinking block closed with its upstream's signature: the whole block, to carry back."""
    part: Thinking


@dataclass
class ToolArgs:
    key: Any
    delta: str


@dataclass
class UsageUpdate:
    usage: Usage  # cumulative


@dataclass
class Finish:
    reason: str
    stop_sequence: str | None = None


@dataclass
class End:
    """The upstream's terminal event arrived: the answer is whole."""


@dataclass
class Failure:
    message: str | None


StreamEvent = (Start | TextDelta | ThinkingDelta | Signed | ToolStart | ToolArgs | UsageUpdate | Finish | End
               | Failure)


# ---- helpers shared by the dialect modules ----

_ID_PREFIXES = ("chatcmpl-", "msg_", "resp_")


def restyle_id(source_id: str | None, prefix: str) -> str:
    """An id in the target's style that keeps the source's unique part, so logs still match."""
    if not source_id:
        return prefix + uuid.uuid4().hex[:24]
    if prefix and source_id.startswith(prefix):
        return source_id
    for known in _ID_PREFIXES:
        if source_id.startswith(known):
            source_id = source_id[len(known):]
            break
    return prefix + source_id


def new_call_id(prefix: str = "call_") -> str:
    return prefix + uuid.uuid4().hex[:24]


_SAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")


def safe_tool_id(tool_id: str) -> str:
    # The messages dialect only accepts [a-zA-Z0-9_-] in tool ids; applied to calls and results
    # alike, so they still pair up.
    return _SAFE_ID.sub("_", tool_id) or new_call_id("toolu_")


def arguments_object(arguments: str | None) -> dict[str, Any]:
    """Tool arguments as the object messages and content need; unparsable text becomes {}."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text_of(parts: list[Part]) -> str:
    return "".join(p.text for p in parts if isinstance(p, Text))


def append_text(parts: list[Part], text: str) -> None:
    """Add text, joining it to a text part just before it (dialects that split text in parts)."""
    if not text:
        return
    if parts and isinstance(parts[-1], Text) and parts[-1].cache is None:  # a cache mark ends its part
        parts[-1].text += text
    else:
        parts.append(Text(text))


def parse_data_url(url: str) -> tuple[str, str] | None:
    """(mime type, base64 data) of a `data:<mime>;base64,<data>` URL, else None."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")] or "application/octet-stream", data


def data_url(mime_type: str, data: str) -> str:
    return f"data:{mime_type};base64,{data}"


_EXTENSION_TYPES = {
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
    "webp": "image/webp", "heic": "image/heic", "pdf": "application/pdf", "txt": "text/plain",
    "mp3": "audio/mpeg", "wav": "audio/wav",
}


def guess_mime_type(url: str, default: str) -> str:
    path = url.split("?", 1)[0].split("#", 1)[0]
    extension = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    return _EXTENSION_TYPES.get(extension, default)


# Effort words and token budgets, for dialects that only speak one of them. The budgets are the
# messages dialect's: its floor is 1024 tokens.
EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
MIN_THINKING_BUDGET = 1024


def effort_for_budget(budget: int | None) -> str | None:
    if budget is None or budget <= 0:  # 0 turns thinking off, -1 asks for the upstream's own choice
        return None
    if budget <= 4096:
        return "low"
    if budget <= 16384:
        return "medium"
    return "high"


def budget_for(request: Request) -> int | None:
    """The exact budget if the source gave one, else the budget of its effort word."""
    if request.thinking_budget is not None:
        return request.thinking_budget if request.thinking_budget > 0 else None
    return EFFORT_BUDGETS.get(request.reasoning_effort or "")


def effort_for(request: Request) -> str | None:
    return request.reasoning_effort or effort_for_budget(request.thinking_budget)


def cache_mark(value: Any) -> str | None:
    """The time to keep of a messages `cache_control` mark ("5m" or "1h"), None when there is none."""
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        return None
    return "1h" if value.get("ttl") == "1h" else "5m"


def unsupported(what: str, param: str | None = None) -> InvalidRequest:
    return InvalidRequest(f"{what} cannot be relayed to the channel serving this model", param=param)
