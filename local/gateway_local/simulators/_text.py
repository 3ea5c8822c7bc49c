"""What the three text simulators (chat, messages, content) share: the deterministic answer,
its tokens, fault modes and pacing.

The answer echoes the last user text ("You said: ..."), one token per emitted piece of a few
characters, so usage is exact: output tokens = pieces emitted, input tokens = the gateway's own
`estimate_tokens` over the prompt. Limits are honoured the way upstreams do (max tokens ->
length, a stop sequence -> stop there). What the request asks of the answer is honoured too
(`_honour`): JSON valid against a given schema instead of the echo, and a tool call when the
request's `tool_choice` forces or names one, or under `auto` when the user's last words name a
tool (or say `#tool`), only ever when the conversation ends with a user turn.

Faults, for tests and demos:
- a directive in the last user text: `#fault=500` (any 4xx/5xx status), `#fault=429` (with
  `Retry-After: 1`), `#fault=slow` (the answer starts after GATEWAY_SIM_SLOW_SECONDS, default 3),
  `#fault=think` (a stream's status and headers at once, its first event after
  GATEWAY_SIM_SLOW_SECONDS: the gateway's keep-alives fill the silence),
  `#fault=cut` (a stream stops half-way without its final event; a plain answer is truncated
  JSON), `#fault=cutN` (a stream stops after its first N events: tests bill cuts at every point);
- a path prefix on the mount, so a whole channel fails: base URL `.../chat/fault/500`.
Another directive, `#tool`, makes the model call the first tool it was given (under `auto`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount

from ._honour import Tools, schema_value, strip_tool_directive

_FAULT = re.compile(r"#fault=([A-Za-z0-9]+)")
# One piece = one token: up to 4 letters or digits, or one other character, with the
# whitespace before it. Joined together, the pieces give back the text exactly.
_PIECES = re.compile(r"\s*[A-Za-z0-9]{1,4}|\s*[^\sA-Za-z0-9]|\s+")

THINKING_TEXT = "The user wants their words echoed back."


def tokenize(text: str) -> list[str]:
    return _PIECES.findall(text)


def token_delay() -> float:
    return float(os.environ.get("GATEWAY_SIM_TOKEN_DELAY_MS", "5")) / 1000


def slow_seconds() -> float:
    return float(os.environ.get("GATEWAY_SIM_SLOW_SECONDS", "3"))


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class Plan:
    """Everything one simulated answer will say, decided before the first byte."""

    input_tokens: int
    pieces: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    tool_name: str | None = None
    tool_arguments: list[str] = field(default_factory=list)  # the JSON arguments, in pieces
    finish: str = "stop"  # stop | length | stop_sequence | tool
    stop_sequence: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def arguments(self) -> str:
        return "".join(self.tool_arguments)

    @property
    def output_tokens(self) -> int:
        return len(self.pieces) + len(self.thinking) + len(self.tool_arguments)


def plan_answer(prompt: str, *, input_tokens: int, max_tokens: int | None = None, stop: list[str] | None = None,
                tools: Tools | None = None, json_schema: Any = None, choice_of: list[Any] | None = None,
                thinking: bool = False, attachments: int = 0) -> Plan:
    """`json_schema`: the schema the answer's text must be a JSON value of (`{}` for any JSON
    object); `choice_of`: the values the answer must be one of, as plain text (google's
    `text/x.enum`); neither: the echo."""
    plan = Plan(input_tokens=input_tokens)
    budget = max_tokens if max_tokens is not None else 1 << 30
    clean = " ".join(strip_tool_directive(_FAULT.sub("", prompt)).split())
    if thinking:
        plan.thinking = tokenize(THINKING_TEXT)[:budget]
        budget -= len(plan.thinking)
    if picked := (tools.pick(prompt) if tools else None):
        plan.tool_name, parameters = picked
        arguments = tokenize(json.dumps(schema_value(parameters or {"type": "object"}, clean)))
        plan.tool_arguments = arguments[:max(budget, 0)]
        plan.finish = "tool" if len(arguments) <= budget else "length"
        return plan
    if choice_of:
        text = str(choice_of[0])
    elif json_schema is not None:
        text = json.dumps(schema_value(json_schema or {"type": "object"}, clean))
    else:
        text = f"You said: {clean}" if clean else "You said nothing."
        if attachments:
            text += f" (and sent {attachments} attachment{'s' if attachments > 1 else ''})"
    # The earliest stop sequence in the answer ends it, as upstreams do.
    found = [(text.find(seq), seq) for seq in stop or [] if seq and seq in text]
    if found:
        at, plan.stop_sequence = min(found)
        text, plan.finish = text[:at], "stop_sequence"
    pieces = tokenize(text)
    if len(pieces) > budget:
        pieces, plan.finish, plan.stop_sequence = pieces[:max(budget, 0)], "length", None
    plan.pieces = pieces
    return plan


def fault_of(request: Request, prompt: str) -> str | None:
    """The fault asked for by the mount's path prefix, else by a directive in the prompt."""
    if fault := request.path_params.get("fault"):
        return fault
    match = _FAULT.search(prompt)
    return match.group(1) if match else None


def fault_status(fault: str | None) -> int | None:
    if fault and fault.isdigit() and 400 <= int(fault) <= 599:
        return int(fault)
    return None


async def before_answer(fault: str | None) -> None:
    if fault == "slow":
        await asyncio.sleep(slow_seconds())


def with_fault_prefix(routes: list[BaseRoute]) -> list[BaseRoute]:
    """The routes, plus the same routes under /fault/{fault} for channel-wide failures."""
    return [*routes, Mount("/fault/{fault}", routes=routes)]


def error_json(status: int, body: dict[str, Any]) -> JSONResponse:
    headers = {"retry-after": "1"} if status == 429 else None
    return JSONResponse(body, status_code=status, headers=headers)


async def json_body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        return None


def cut_json(body: dict[str, Any]) -> Response:
    """A 200 whose JSON body stops half-way, as when a connection drops mid-answer."""
    raw = json.dumps(body).encode()
    return Response(raw[: len(raw) // 2], media_type="application/json")


def cut_point(total_events: int) -> int:
    return max(1, total_events // 2)


def paced_stream(events: list[bytes], fault: str | None, media_type: str = "text/event-stream") -> StreamingResponse:
    """Send `events` one by one, a token delay apart; `cut` drops the second half, `cutN` all
    but the first N."""
    if fault == "cut":
        events = events[:cut_point(len(events))]
    elif fault and fault.startswith("cut") and fault[3:].isdigit():
        events = events[:int(fault[3:])]

    async def body():
        delay = token_delay()
        if fault == "think":  # headers now, then silence: a reasoning model before its first token
            await asyncio.sleep(slow_seconds())
        for index, event in enumerate(events):
            if index and delay:
                await asyncio.sleep(delay)
            yield event

    return StreamingResponse(body(), media_type=media_type, headers={"cache-control": "no-cache"})
