"""Converting a request, an answer or a stream from one text dialect to another.

Every direction goes through the neutral shapes: read with the source dialect's module, write
with the target's. Channels speak chat, messages, content or converse (Bedrock); clients speak
chat, messages, content and responses.
"""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

from gateway.tokens import estimate_tokens

from . import chat, content, converse, messages, responses
from .carry import refuse_uncarried
from .neutral import (
    CHAT,
    CONTENT,
    CONVERSE,
    MESSAGES,
    RESPONSES,
    End,
    Failure,
    Finish,
    Start,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolArgs,
    ToolStart,
    UsageUpdate,
)
from .stops import StopFilter, applied_by_gateway, cut_reply
from .usage import (
    Usage,
    usage_from_chat,
    usage_from_content,
    usage_from_converse,
    usage_from_messages,
    usage_from_responses,
)

_MODULES: dict[str, ModuleType] = {CHAT: chat, MESSAGES: messages, CONTENT: content, RESPONSES: responses,
                                   CONVERSE: converse}
_CHANNEL_DIALECTS = (CHAT, MESSAGES, CONTENT, CONVERSE)

Event = tuple[str | None, dict[str, Any] | str]

CUT_MESSAGE = "the upstream stream ended before its final event"


def _name(dialect: str) -> str:
    """The dialect's name; the errors module's Dialect members are accepted too."""
    name = str(getattr(dialect, "value", dialect))
    if name not in _MODULES:
        raise ValueError(f"unknown text dialect {dialect!r}")
    return name


def _module(dialect: str) -> ModuleType:
    return _MODULES[_name(dialect)]


def convert_request(body: dict[str, Any], *, source: str, target: str, model: str,
                    stream: bool | None = None) -> dict[str, Any]:
    """The body to send a channel speaking `target` for a client request in `source`.

    `model` is the channel's name for the model. For a content target the model and streaming
    belong in the URL and are left out of the body; for a content source `stream` says whether
    the client called the streaming operation (its body cannot say).
    """
    source, target = _name(source), _name(target)
    if source == target:  # a chat channel also serves the responses dialect natively
        return _same_dialect_request(body, target, model, stream)
    if target not in _CHANNEL_DIALECTS:
        raise ValueError(f"no channel speaks the {target!r} dialect")
    refuse_uncarried(body, source, target)
    request = _module(source).parse_request(body)
    if stream is not None:
        request.stream = stream
    if applied_by_gateway(source, target):
        request.stop = []  # the gateway ends the answer at them itself, and can then say which one
    return _module(target).render_request(request, model)


def _same_dialect_request(body: dict[str, Any], dialect: str, model: str, stream: bool | None) -> dict[str, Any]:
    # What the gateway sealed for an upstream of another dialect (a turn another channel served)
    # is taken out; everything else goes as the client sent it.
    relayed = _module(dialect).relayable(copy.deepcopy(body)) if dialect != CHAT else copy.deepcopy(body)
    if dialect == CONTENT:
        return relayed
    relayed["model"] = model
    if dialect == CHAT and (relayed.get("stream") if stream is None else stream):
        # Usage comes with a chat stream only when asked for; the gateway bills from it.
        relayed["stream"] = True
        relayed["stream_options"] = {**(relayed.get("stream_options") or {}), "include_usage": True}
    return relayed


def convert_response(body: dict[str, Any], *, source: str, target: str, model: str | None = None,
                     now: int | None = None, stop: list[str] | None = None) -> dict[str, Any]:
    """A channel's non-streamed answer in `source`, as the client's dialect `target` writes it.

    `model` is the public model name to show the client (default: the upstream's); `stop` the
    client's stop sequences, which the gateway applies when the channel cannot (`formats.stops`).
    """
    source, target = _name(source), _name(target)
    if source == target:
        relayed = copy.deepcopy(body)
        return _module(source).rename_model(relayed, model) if model else relayed
    if source not in _CHANNEL_DIALECTS:
        raise ValueError(f"no channel speaks the {source!r} dialect")
    reply = _module(source).parse_response(body)
    if now is not None and reply.created is None:
        reply.created = now
    if stop and applied_by_gateway(target, source):
        reply = cut_reply(reply, stop)
    return _module(target).render_response(reply, model)


_USAGE_READERS = {CHAT: (usage_from_chat, "usage"), MESSAGES: (usage_from_messages, "usage"),
                  CONTENT: (usage_from_content, "usageMetadata"), RESPONSES: (usage_from_responses, "usage"),
                  CONVERSE: (usage_from_converse, "usage")}


def usage_of_response(body: dict[str, Any], dialect: str) -> Usage:
    """The usage of a non-streamed answer in any dialect (to bill a natively relayed answer)."""
    read, key = _USAGE_READERS[_name(dialect)]
    return read(body.get(key))


class StreamConverter:
    """Relays one upstream stream to the client, converting between dialects when they differ.

    `feed(event_name, data)` takes one upstream event (data is the parsed JSON, or `DONE` for
    the chat sentinel) and returns the client events to send, as `(event_name, data)` tuples:
    event_name is None for the data-only dialects (chat, content), data is a dict or `DONE`.
    `finish()` is called once when the upstream ends and returns the last client events; if the
    upstream never sent its terminal event, the stream was cut: `truncated` becomes True and the
    client gets its dialect's error event (`reason` says why, when the caller knows better).

    For billing: `usage` is the latest cumulative usage the upstream reported (None if none),
    `output_chars` the generated characters relayed (text, thinking, tool names and arguments),
    `output_tokens` what the upstream generated so far on the best evidence the stream holds
    (see the property), for a stream that ends without its final usage,
    `completed` whether the upstream's terminal event arrived, `error` the upstream's own error,
    `ending` whether the answer has begun to end (a finish reason, the terminal event or an
    error has come): what follows is the stream's close, which the caller may hold back until
    the request is billed.

    With the same dialect on both sides events pass through, renamed to `model` when given,
    except that a chat client that did not ask for usage does not get the usage the gateway
    asked for.
    """

    def __init__(self, upstream: str, client: str, *, model: str | None = None,
                 include_usage: bool = False, now: int | None = None, stop: list[str] | None = None):
        upstream, client = _name(upstream), _name(client)
        self._stops = StopFilter(stop) if stop and applied_by_gateway(client, upstream) else None
        self._decoder = _module(upstream).StreamDecoder()
        self._encoder = _module(client).StreamEncoder(model=model, include_usage=include_usage, now=now)
        self._passthrough = upstream == client
        self._client = client
        self._rename = _module(client).rename_model if model else None
        self._model = model
        self._strip_usage = self._passthrough and upstream == CHAT and not include_usage
        self._closed = False  # the client has had its terminal event
        self._finished = False
        self.usage: Usage | None = None
        self.output_chars = 0
        # What was generated since the upstream last counted its output mid-stream (a content
        # stream's cumulative usageMetadata in every chunk): the pieces of text, and how many
        # non-empty deltas carried them.
        self._counted_output = 0
        self._texts_since: list[str] = []
        self._deltas_since = 0
        self.completed = False
        self.ending = False
        self.truncated = False
        self.error: str | None = None

    def feed(self, event_name: str | None, data: dict[str, Any] | str) -> list[Event]:
        decoded = self._decoder.feed(event_name, data)
        self._track(decoded)
        if self._passthrough:
            # So that a cut-stream error names the same response and continues its numbering.
            for event in decoded:
                if isinstance(event, Start):
                    self._encoder.encode(event)
            if self._client == RESPONSES and isinstance(data, dict) and isinstance(data.get("sequence_number"), int):
                self._encoder.continue_after(data["sequence_number"])
            return self._relay(event_name, data)
        return self._encode(self._stops.filter(decoded) if self._stops else decoded)

    def finish(self, reason: str | None = None) -> list[Event]:
        if self._finished:
            return []
        self._finished = True
        decoded = self._decoder.close()
        self._track(decoded)
        if not self.completed and self.error is None:
            self.truncated = True
            decoded.append(Failure(reason or CUT_MESSAGE))
        if self._passthrough:
            out = self._encode([e for e in decoded if isinstance(e, Failure)])
            if self._client == CHAT and any(isinstance(e, End) for e in decoded):
                out.append((None, chat.DONE))  # the upstream closed without it; a chat client still gets it
            return out
        return self._encode(self._stops.filter(decoded) if self._stops else decoded)

    def _track(self, events: list[StreamEvent]) -> None:
        for event in events:
            if isinstance(event, (Finish, End, Failure)):
                self.ending = True
            if isinstance(event, (Start, UsageUpdate)) and event.usage is not None:
                self.usage = event.usage
                # A mid-stream count covers everything generated before it. A start event's
                # count does not (messages' message_start says `output_tokens: 1` before any text).
                if isinstance(event, UsageUpdate) and event.usage.output_tokens >= max(self._counted_output, 1):
                    self._counted_output = event.usage.output_tokens
                    self._texts_since, self._deltas_since = [], 0
            elif isinstance(event, (TextDelta, ThinkingDelta)):
                self._count(event.text)
            elif isinstance(event, ToolStart):
                self._count(event.name, delta=False)
            elif isinstance(event, ToolArgs):
                self._count(event.delta)
            elif isinstance(event, End):
                self.completed = True
            elif isinstance(event, Failure) and not self.completed and self.error is None:
                self.error = event.message

    def _count(self, text: str, *, delta: bool = True) -> None:
        self.output_chars += len(text)
        self._texts_since.append(text)
        self._deltas_since += 1 if delta and text else 0

    @property
    def output_tokens(self) -> int:
        """The output tokens generated so far, on the best evidence the stream holds: the
        upstream's last mid-stream count, plus what came after it, estimated from the stream's
        structure (a chat upstream streams about one token per delta) or from the text, whichever
        says more. The text is estimated whole, never delta by delta: each estimate rounds up, so a
        sum over one-token deltas would bill about 1.5 times what was generated."""
        since = max(self._deltas_since, estimate_tokens("".join(self._texts_since)))
        return self._counted_output + since

    def _encode(self, events: list[StreamEvent]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if self._closed:
                break
            out.extend(self._encoder.encode(event))
            self._closed = isinstance(event, (End, Failure))
        return out

    def _relay(self, event_name: str | None, data: dict[str, Any] | str) -> list[Event]:
        if not isinstance(data, dict):
            return [(event_name, data)]
        if self._strip_usage:
            if not data.get("choices") and data.get("usage"):
                return []
            if "usage" in data:
                data = {k: v for k, v in data.items() if k != "usage"}
        if self._rename:
            data = self._rename(data, self._model)
        return [(event_name, data)]
