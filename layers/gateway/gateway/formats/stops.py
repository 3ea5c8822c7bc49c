"""Stop sequences the gateway applies itself.

A messages client is told which of its `stop_sequences` ended the answer (`stop_reason:
"stop_sequence"`, `stop_sequence: "<it>"`). A chat or content channel never says: both report a
plain "stop" whether the text ended by itself or at a sequence (a converse channel says
`stop_sequence` but not which one). So when a messages client is
served by one of them, the sequences are not sent upstream; the gateway ends the answer at the
first one itself and says which. The upstream then writes on to its own end (or `max_tokens`),
and the bill is what it generated (its usage), as for any answer.
"""

from __future__ import annotations

from .neutral import (
    CHAT,
    CONTENT,
    CONVERSE,
    MESSAGES,
    STOP_SEQUENCE,
    End,
    Failure,
    Finish,
    Part,
    Reply,
    StreamEvent,
    Text,
    TextDelta,
    ThinkingDelta,
    UsageUpdate,
)

# Channel dialects whose answers cannot tell a stop sequence from a natural end.
_SILENT_UPSTREAMS = (CHAT, CONTENT, CONVERSE)


def applied_by_gateway(client: str, upstream: str) -> bool:
    return client == MESSAGES and upstream in _SILENT_UPSTREAMS


def _sequences(stops: list[str] | None) -> list[str]:
    return [s for s in stops or [] if isinstance(s, str) and s]


def _earliest(text: str, stops: list[str]) -> tuple[int, str] | None:
    found = [(text.find(s), s) for s in stops if s in text]
    return min(found) if found else None


def cut_reply(reply: Reply, stops: list[str] | None) -> Reply:
    """A whole answer ended at the first stop sequence in its text, if any."""
    stops = _sequences(stops)
    kept: list[Part] = []
    for part in reply.parts:
        match = _earliest(part.text, stops) if isinstance(part, Text) and stops else None
        if match is None or not isinstance(part, Text):
            kept.append(part)
            continue
        at, sequence = match
        if at:
            kept.append(Text(part.text[:at]))
        reply.parts, reply.finish, reply.stop_sequence = kept, STOP_SEQUENCE, sequence
        return reply
    return reply


class StopFilter:
    """The same for a stream: text is held back by the longest sequence's length minus one, so
    a sequence split across events is still found; after it, only usage and the end go on."""

    def __init__(self, stops: list[str] | None):
        self.stops = _sequences(stops)
        self._hold = max((len(s) for s in self.stops), default=1) - 1
        self._buffer = ""
        self.matched: str | None = None

    def filter(self, events: list[StreamEvent]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event in events:
            if self.matched is not None:
                if isinstance(event, Finish):
                    out.append(Finish(STOP_SEQUENCE, self.matched))
                elif isinstance(event, (UsageUpdate, End, Failure)):
                    out.append(event)
                continue  # the answer has ended for the client: the rest of the text is dropped
            if isinstance(event, TextDelta):
                out.extend(self._text(event.text))
            elif isinstance(event, ThinkingDelta):
                out.append(event)  # sequences end the answer, not the thinking
            else:
                out.extend(self._release())
                out.append(event)
        return out

    def _text(self, text: str) -> list[StreamEvent]:
        self._buffer += text
        match = _earliest(self._buffer, self.stops)
        if match is not None:
            at, self.matched = match
            before, self._buffer = self._buffer[:at], ""
            return [TextDelta(before)] if before else []
        if len(self._buffer) <= self._hold:
            return []
        ready = self._buffer[:len(self._buffer) - self._hold] if self._hold else self._buffer
        self._buffer = self._buffer[len(ready):]
        return [TextDelta(ready)]

    def _release(self) -> list[StreamEvent]:
        held, self._buffer = self._buffer, ""
        return [TextDelta(held)] if held else []
