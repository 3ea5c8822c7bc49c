"""A stream cut short is billed for what the upstream generated up to the cut (issue 33, row 5).

The upstream's own count at each cut point is read from the upstream's raw stream, independently
of the gateway: the simulators count one token per piece of their own tokenizer
(`simulators._text.tokenize`), and the content dialect's upstream says its cumulative count in
every chunk's `usageMetadata`. The gateway's bill (the ledger entry's output tokens) must be
within 5% of it at every cut point, in every client dialect through every channel protocol, and
never above the price of the whole answer. Before the fix the bill was the sum of a generous
estimate of each delta, about 1.5 times the upstream's count (50 tokens -> 73 billed).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from gateway.api import text
from gateway.formats import convert_request
from gateway.upstreams.clients import TEXT_CLIENTS
from gateway_local.server import simulators_app
from gateway_local.simulators._text import tokenize
from tests.integration.test_text import ENTRY, body_for, channel, inbound, ledger, run

# Words of every length, punctuation, digits and accented letters, so that the estimate meets
# what a per-chunk rounding gets wrong.
PROMPT = ("Please echo this: the quick brown fox, 42 times, jumps over the extraordinarily lazy dog; "
          "naive cafe owners -- and a jalapeño -- watched it happen twice, quietly!")
FULL = "#fault=cut999"  # as long a directive as a cut's, so every run's prompt costs the same


def upstream_dialect(dialect: str, protocol: str) -> str:
    return "responses" if (dialect, protocol) == ("responses", "chat") else protocol  # a chat channel's own route


def upstream_events(dialect: str, protocol: str) -> list[tuple[str | None, Any]]:
    """The upstream's whole stream for the request the gateway sends it, read directly."""
    body = body_for(dialect, f"{PROMPT} {FULL}", stream=True)
    if dialect == "messages":
        body["max_tokens"] = 400
    upstream = upstream_dialect(dialect, protocol)
    payload = convert_request(body, source=dialect, target=upstream, model="m-small", stream=True)

    async def scenario() -> list[tuple[str | None, Any]]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            client = TEXT_CLIENTS[protocol](f"http://sim/{protocol}", "sk-upstream", http, None)
            stream = text._open(client, upstream, "m-small", payload)
            events = []
            async for event in stream:
                events.append((event.event, event.data if event.data == "[DONE]" else event.json()))
            return events

    return anyio.run(scenario)


def counted_by_upstream(protocol: str, events: list[tuple[str | None, Any]]) -> int:
    """The output tokens the upstream had generated once it had sent `events`."""
    if protocol == "content":
        counts = [e["usageMetadata"].get("candidatesTokenCount", 0) for _, e in events
                  if isinstance(e, dict) and e.get("usageMetadata")]
        return counts[-1] if counts else 0
    pieces = []
    for _, data in events:
        if not isinstance(data, dict):
            continue
        if protocol == "chat":
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                pieces.append(delta.get("content") or "")
                pieces += [(c.get("function") or {}).get("arguments") or "" for c in delta.get("tool_calls") or []]
        elif protocol == "responses":
            if data.get("type") in ("response.output_text.delta", "response.function_call_arguments.delta"):
                pieces.append(data.get("delta") or "")
        elif data.get("type") == "content_block_delta":
            delta = data["delta"]
            pieces.append(delta.get("text") or delta.get("thinking") or delta.get("partial_json") or "")
    return sum(len(tokenize(piece)) for piece in pieces)


def cut_points(protocol: str, events: list[tuple[str | None, Any]]) -> list[int]:
    """Every point from the first generated token to before the event that completes the count
    (a content stream's last chunk also carries its finish reason: cut after it, it is whole)."""
    counts = [counted_by_upstream(protocol, events[:k]) for k in range(len(events) + 1)]
    first = counts.index(next(c for c in counts if c))
    return list(range(first, counts.index(counts[-1])))


def bill_of(dialect: str, key: str, directive: str) -> dict[str, Any]:
    body = body_for(dialect, f"{PROMPT} {directive}", stream=True)
    if dialect == "messages":
        body["max_tokens"] = 400
    request = inbound(dialect, key, stream=True, body=body)
    run(dialect, request)
    return ledger(request.request_id)


@pytest.mark.parametrize("protocol", ["chat", "messages", "content"])
@pytest.mark.parametrize("dialect", ["chat", "messages", "responses", "content"])
def test_a_cut_stream_is_billed_what_the_upstream_generated_at_every_cut_point(demo, catalog, dialect, protocol):
    catalog([channel(protocol)])
    events = upstream_events(dialect, protocol)
    protocol = upstream_dialect(dialect, protocol)
    whole = bill_of(dialect, demo["key"], FULL)
    assert whole["detail"]["outcome"] == "completed"
    assert int(whole["detail"]["output_tokens"]) == counted_by_upstream(protocol, events) >= 40
    points = cut_points(protocol, events)
    assert len(points) >= 40
    misses = []
    for k in points[::2]:  # every other point: ~25 per pair, 300 cut streams in all
        truth = counted_by_upstream(protocol, events[:k])
        entry = bill_of(dialect, demo["key"], f"#fault=cut{k:03d}")
        billed = int(entry["detail"]["output_tokens"])
        assert entry["detail"]["outcome"] == "cut"
        assert int(entry["units"]) <= int(whole["units"]), (k, entry, whole)
        if abs(billed - truth) > 0.05 * truth:
            misses.append((k, truth, billed))
    assert misses == []


def test_a_client_that_leaves_after_50_tokens_is_billed_50_not_73(demo, catalog):
    """The issue's own figure: the client reads the first 50 tokens of a long answer and leaves."""
    catalog([channel("chat")])
    prompt = " ".join(f"w{n}" for n in range(120))
    request = inbound("chat", demo["key"], prompt, stream=True)
    delivered: list[str] = []

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            answer = await ENTRY["chat"](request, http=http)

            async def send(chunk: bytes) -> None:
                for line in chunk.decode().splitlines():
                    if line.startswith("data: {"):
                        for choice in json.loads(line[6:])["choices"]:
                            if content := (choice.get("delta") or {}).get("content"):
                                delivered.append(content)
                if len(delivered) >= 50:
                    raise OSError("the client went away")

            with pytest.raises(OSError):
                await answer.send_to(send)

    anyio.run(scenario)
    entry = ledger(request.request_id)
    assert entry["detail"]["outcome"] == "client_gone"
    assert int(entry["detail"]["output_tokens"]) == len(tokenize("".join(delivered))) == 50
