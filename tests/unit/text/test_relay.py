"""The text relay with fake upstreams (`httpx.MockTransport`) and an in-memory bill: no AWS, no sockets."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from gateway.admission import billing
from gateway.api import text
from gateway.auth import Principal
from gateway.errors import InvalidRequest, NotFound, UpstreamFailed
from gateway.formats.usage import Usage
from gateway.prices import SHIPPED, usd_to_units
from gateway.routing.channel import Channel
from gateway.tokens import estimate_tokens
from tests.stand_in_support import stand_in

PRINCIPAL = Principal(user_id=1, key_hash="h", key_id="k", key_name="test", unlimited=True, allowed_models=None,
                      expires_at=0)


class Bill:
    """What billing was asked to do."""

    def __init__(self) -> None:
        self.settled: list[tuple[int, dict[str, Any]]] = []
        self.refunded: list[str] = []


@pytest.fixture
def bill(monkeypatch) -> Bill:
    record = Bill()
    monkeypatch.setattr(billing, "settle", stand_in(billing.settle, lambda call: record.settled.append(
        (call["units"], call["detail"])) or True))
    monkeypatch.setattr(billing, "refund", stand_in(billing.refund, lambda call: record.refunded.append(
        call["reason"]) or True))
    return record


def channels(*names: str) -> list[Channel]:
    return [Channel(name=name, protocol="chat", base_url=f"http://{name}", api_key="sk-up",
                    models=frozenset({"*"})) for name in names]


def prepared(body: dict[str, Any], chans: list[Channel], dialect: str = "chat") -> text._Prepared:
    path = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}[dialect]
    call = text.parse_call(text.GENERATE, dialect, text.Inbound(path=path, headers={}, query={},
                                                                body=json.dumps(body).encode()))
    reservation = billing.Reservation(reservation_id="r1", user_id=1, key_hash="h", key_id="k", limited_key=False,
                                      units=10_000, model="m-small", route="/v1/chat/completions")
    return text._Prepared(call, PRINCIPAL, SHIPPED["m-small"], chans, reservation)


def chunk(content: str | None = None, finish: str | None = None, usage: dict | None = None) -> bytes:
    data: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", "model": "up", "created": 1,
                            "choices": [] if usage else [{"index": 0, "delta": {"content": content} if content else {},
                                                          "finish_reason": finish}]}
    if usage:
        data["usage"] = usage
    return b"data: " + json.dumps(data).encode() + b"\n\n"


class BrokenBody(httpx.AsyncByteStream):
    """Sends some chunks, then the connection drops."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks

    async def __aiter__(self):
        for piece in self.chunks:
            yield piece
        raise httpx.ReadError("connection reset")


def serve(prep: text._Prepared, handler) -> tuple[text.Answer | Exception, bytes]:
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            try:
                answer = await text._first_answer(prep, http, None)
            except Exception as exc:
                return exc, b""
            sent: list[bytes] = []

            async def send(data: bytes) -> None:
                sent.append(data)

            await answer.send_to(send)
            return answer, b"".join(sent)

    return anyio.run(scenario)


STREAM = {"model": "m-small", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_a_failure_after_the_first_byte_is_never_retried_and_bills_what_was_relayed(bill):
    hosts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=BrokenBody([chunk("Hello"), chunk(" world")]))

    answer, data = serve(prepared(STREAM, channels("first", "second")), handler)
    assert hosts == ["first"]
    assert b"Hello" in data and b'"error"' in data  # the chat dialect's in-stream error
    (units, detail), = bill.settled
    assert detail["outcome"] == "cut" and units > 0
    # Two one-token deltas: the stream's structure says 2, the whole text's estimate 3; never
    # the sum of each delta's rounded-up estimate (4), which billed cut streams ~1.5x (issue 33).
    assert detail["output_tokens"] == max(2, estimate_tokens("Hello world")) == 3


def test_a_failure_before_the_first_event_moves_on_to_the_next_channel(bill):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "first":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=BrokenBody([]))
        body = chunk("Hi") + chunk(finish="stop") + chunk(usage={"prompt_tokens": 3, "completion_tokens": 1,
                                                                 "total_tokens": 4}) + b"data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    answer, data = serve(prepared(STREAM, channels("first", "second")), handler)
    assert answer.channel.name == "second" and data.endswith(b"data: [DONE]\n\n")
    assert b'"usage"' not in data  # the client did not ask for it
    (units, detail), = bill.settled
    assert (detail["input_tokens"], detail["output_tokens"], detail["outcome"]) == (3, 1, "completed")


def test_the_request_sent_upstream_keeps_unknown_fields_and_asks_for_stream_usage(bill):
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=chunk("Hi") + chunk(finish="stop") + b"data: [DONE]\n\n")

    serve(prepared(STREAM | {"vendor_knob": {"x": 1}}, channels("only")), handler)
    assert seen[0]["vendor_knob"] == {"x": 1} and seen[0]["stream_options"] == {"include_usage": True}


def test_an_upstream_4xx_is_relayed_with_its_status_and_nothing_retried(bill):
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        return httpx.Response(422, json={"error": {"message": "bad tool schema"}})

    error, _ = serve(prepared(STREAM, channels("first", "second")), handler)
    assert isinstance(error, InvalidRequest) and error.status == 422 and "bad tool schema" in error.message
    assert calls == ["first"] and not bill.settled


def test_an_upstream_401_is_the_gateway_s_problem_not_the_client_key(bill):
    error, _ = serve(prepared(STREAM, channels("only")),
                     lambda request: httpx.Response(401, json={"error": {"message": "bad key sk-up"}}))
    assert isinstance(error, UpstreamFailed) and "sk-up" not in error.message


def test_a_completed_stream_without_usage_is_billed_from_the_gateway_s_estimate(bill):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=chunk("Hello there") + chunk(finish="stop") + b"data: [DONE]\n\n")

    prep = prepared(STREAM, channels("only"))
    serve(prep, handler)
    (units, detail), = bill.settled
    assert detail["input_tokens"] == prep.call.input_tokens
    assert detail["output_tokens"] == estimate_tokens("Hello there")


# --- parsing -------------------------------------------------------------------------------------------

def content_inbound(proxy: str, query: dict[str, str] | None = None) -> text.Inbound:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 7}}
    return text.Inbound(path=f"/v1beta/models/{proxy}", headers={}, query=query or {}, body=json.dumps(body).encode(),
                        proxy=proxy)


def test_content_routes_split_model_and_action_and_want_alt_sse_to_stream():
    call = text.parse_call(text.GENERATE, "content", content_inbound("m-small:streamGenerateContent", {"alt": "sse"}))
    assert (call.model, call.stream, call.output_tokens) == ("m-small", True, 7)
    with pytest.raises(InvalidRequest) as caught:
        text.parse_call(text.GENERATE, "content", content_inbound("m-small:streamGenerateContent", {"alt": "json"}))
    assert caught.value.param == "alt"
    with pytest.raises(NotFound):
        text.parse_call(text.GENERATE, "content", content_inbound("m-small:predict"))


def test_the_reservation_covers_the_prompt_and_the_output_limit():
    call = text.parse_call(text.GENERATE, "chat", text.Inbound(
        path="/v1/chat/completions", headers={}, query={},
        body=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}).encode()))
    assert call.output_tokens == 50 and call.input_tokens > 0
    unbounded = text.parse_call(text.GENERATE, "responses", text.Inbound(
        path="/v1/responses", headers={}, query={}, body=b'{"model": "m", "input": "hi"}'))
    assert unbounded.output_tokens == text.DEFAULT_OUTPUT_TOKENS


def test_a_compaction_cannot_stream():
    with pytest.raises(InvalidRequest) as caught:
        text.parse_call(text.COMPACT, "responses", text.Inbound(
            path="/v1/responses/compact", headers={}, query={}, body=b'{"model": "m", "input": "hi", "stream": true}'))
    assert caught.value.param == "stream"


def test_a_cut_stream_bills_the_larger_of_reported_and_relayed_output():
    answer = text.StreamedAnswer.__new__(text.StreamedAnswer)
    answer.call = text.parse_call(text.GENERATE, "chat", text.Inbound(
        path="/v1/chat/completions", headers={}, query={}, body=json.dumps(STREAM).encode()))

    class Converter:
        completed, output_tokens = False, 9
        usage = Usage(input_tokens=40, output_tokens=3, cached_input_tokens=10)

    answer.converter = Converter()
    assert answer._usage() == Usage(input_tokens=40, output_tokens=9, cached_input_tokens=10)


def test_one_pooled_upstream_client_serves_every_request_of_an_event_loop():
    async def twice():
        return text.http_client(), text.http_client()

    first, second = anyio.run(twice)
    assert first is second


# --- cache writes the upstream reports, at the cache-write rate ------------------------------------

def _chat_answer(usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "up", "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}]}


def _responses_answer(usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "up",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}],
            "usage": usage}


@pytest.mark.parametrize("dialect,answer,usage", [
    ("chat", _chat_answer, {"prompt_tokens": 3000, "completion_tokens": 10, "total_tokens": 3010,
                            "prompt_tokens_details": {"cached_tokens": 500, "cache_write_tokens": 2000}}),
    ("responses", _responses_answer, {"input_tokens": 3000, "output_tokens": 10, "total_tokens": 3010,
                                      "input_tokens_details": {"cached_tokens": 500, "cache_write_tokens": 2000},
                                      "output_tokens_details": {"reasoning_tokens": 0}}),
])
def test_cache_writes_an_upstream_reports_are_billed_at_the_cache_write_rate(bill, dialect, answer, usage):
    # Given an upstream whose usage says 2000 of the 3000 prompt tokens were written to its cache
    prep = prepared({"model": "m-small", **({"messages": [{"role": "user", "content": "hi"}]} if dialect == "chat"
                                             else {"input": "hi"})}, channels("only"), dialect)
    serve(prep, lambda request: httpx.Response(200, json=answer(usage)))
    # Then 500 fresh tokens at the input rate, 500 cached reads, 2000 writes at the write rate
    (units, detail), = bill.settled
    small = SHIPPED["m-small"]
    usd = (500 * small.input_per_million + 500 * small.cached_input_per_million
           + 2000 * small.cache_write_per_million + 10 * small.output_per_million) / 1_000_000
    assert units == usd_to_units(usd) and detail["cache_write_tokens"] == 2000
    assert units > usd_to_units((2500 * small.input_per_million + 500 * small.cached_input_per_million
                                 + 10 * small.output_per_million) / 1_000_000)
