"""Server-Sent Events: encoding one event, and parsing a byte stream incrementally.

Every text upstream streams SSE and every streamed gateway answer is SSE, so both directions
live here. The parser follows the WHATWG event-stream rules that matter in practice: lines end
with CRLF, LF or CR; several `data:` lines join with a newline; `:` lines are comments; a blank
line dispatches the event. Chunks may split anywhere, even inside a UTF-8 sequence.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

DONE = b"data: [DONE]\n\n"


def encode(data: str | dict[str, Any], event: str | None = None) -> bytes:
    """One complete event, ending with the blank line that dispatches it."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False) if isinstance(data, dict) else data
    out = f"event: {event}\n" if event else ""
    # A newline inside data would end the field early, so each line gets its own `data:`.
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        out += f"data: {line}\n"
    return (out + "\n").encode("utf-8")


@dataclass(frozen=True)
class SSEEvent:
    event: str | None
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def is_done(self) -> bool:
        """The chat dialect's end marker, `data: [DONE]`."""
        return self.data == "[DONE]"


class SSEParser:
    """Feed it bytes as they arrive; it returns the events completed so far."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._skip_lf = False  # the last chunk ended in CR: a LF opening the next one is its pair
        self._reset()

    def _reset(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        text = self._decoder.decode(chunk)
        if self._skip_lf and text:
            text = text.removeprefix("\n")
            self._skip_lf = False
        self._buffer += text
        if not self._started and self._buffer:
            self._started = True
            self._buffer = self._buffer.removeprefix("\ufeff")
        events: list[SSEEvent] = []
        while True:
            line = self._next_line()
            if line is None:
                return events
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _next_line(self) -> str | None:
        buf = self._buffer
        cut = len(buf)
        for sep in ("\n", "\r"):
            at = buf.find(sep)
            if at != -1 and at < cut:
                cut = at
        if cut == len(buf):
            return None
        end = cut + 1
        if buf[cut] == "\r":
            if end == len(buf):
                self._skip_lf = True  # dispatch now rather than wait to see if a LF follows
            elif buf[end] == "\n":
                end += 1
        self._buffer = buf[end:]
        return buf[:cut]

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value or None
        elif name == "id" and "\0" not in value:
            self._id = value
        # `retry` and unknown fields are ignored, as the standard says.
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._reset()  # an event with no data is not dispatched
            return None
        event = SSEEvent(event=self._event, data="\n".join(self._data), id=self._id)
        self._reset()
        return event


async def aiter_events(byte_iter: AsyncIterable[bytes]) -> AsyncIterator[SSEEvent]:
    """The events of a byte stream, each yielded as soon as its blank line has arrived."""
    parser = SSEParser()
    async for chunk in byte_iter:
        for event in parser.feed(chunk):
            yield event
