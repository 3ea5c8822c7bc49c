"""The simulators speak each wire protocol as upstreams.md describes: event order, usage that
matches the text, limits, determinism, auth, faults."""

import asyncio
import base64
import json
import math
import struct
import time

import httpx
import pytest

from gateway.schemas.text.chat import ChatRequest
from gateway.schemas.text.messages import MessagesRequest
from gateway.sse import SSEParser
from gateway.tokens import estimate_tokens
from gateway_local.simulators._text import tokenize

from .conftest import simulators_app

CHAT = {"authorization": "Bearer sk-sim"}
MESSAGES = {"x-api-key": "sk-sim", "anthropic-version": "2023-06-01"}
CONTENT = {"x-goog-api-key": "sim"}


def post(path, body, headers, params=None):
    """POST to the simulators mounted as the local runner mounts them (buffered: fine here)."""
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as client:
            return await client.post(path, json=body, headers=headers, params=params)
    return asyncio.run(go())


def events(response):
    return SSEParser().feed(response.content)


def chat(content, **extra):
    return {"model": "m-small", "messages": [{"role": "user", "content": content}], **extra}


def msg(content, **extra):
    return {"model": "m-small", "max_tokens": 100, "messages": [{"role": "user", "content": content}], **extra}


def gen(text, **config):
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    if config:
        body["generationConfig"] = config
    return body


# --- chat ---------------------------------------------------------------------------------------------

def test_chat_stream_with_include_usage_has_null_usage_then_a_usage_chunk_then_done():
    response = post("/chat/v1/chat/completions",
                    chat("Hello there", stream=True, stream_options={"include_usage": True}), CHAT)
    assert response.headers["content-type"].startswith("text/event-stream")
    got = events(response)
    assert got[-1].data == "[DONE]" and all(e.event is None for e in got)
    chunks = [e.json() for e in got[:-1]]
    assert all(c["usage"] is None for c in chunks[:-1]) and chunks[-1]["choices"] == []
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(d or "" for d in deltas) == "You said: Hello there"
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == sum(1 for d in deltas if d) == len(tokenize("You said: Hello there"))
    assert usage["prompt_tokens"] == ChatRequest.model_validate(chat("Hello there")).estimate_input_tokens()
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_chat_stream_without_include_usage_has_no_usage_field():
    chunks = [e.json() for e in events(post("/chat/v1/chat/completions", chat("Hi", stream=True), CHAT))[:-1]]
    assert all("usage" not in c for c in chunks)


def test_chat_honours_max_tokens_n_and_stop():
    body = post("/chat/v1/chat/completions", chat("Hello there", max_completion_tokens=3, n=2), CHAT).json()
    assert [c["finish_reason"] for c in body["choices"]] == ["length", "length"]
    assert body["choices"][1]["message"]["content"] == "You said:"
    assert body["usage"]["completion_tokens"] == 6
    stopped = post("/chat/v1/chat/completions", chat("Hello there", stop=["llo"]), CHAT).json()["choices"][0]
    assert stopped["message"]["content"] == "You said: He" and stopped["finish_reason"] == "stop"


def test_answers_are_deterministic():
    first = post("/chat/v1/chat/completions", chat("same prompt"), CHAT).json()
    second = post("/chat/v1/chat/completions", chat("same prompt"), CHAT).json()
    assert first["choices"] == second["choices"] and first["usage"] == second["usage"]


def test_responses_stream_has_the_full_event_sequence():
    got = events(post("/chat/v1/responses", {"model": "m-small", "input": "Hello there", "stream": True}, CHAT))
    kinds = [e.event for e in got]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    data = [e.json() for e in got]
    assert [d["type"] for d in data] == kinds
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    usage = data[-1]["response"]["usage"]
    assert usage["output_tokens"] == kinds.count("response.output_text.delta")
    assert all(d.get("response", {}).get("usage") is None for d in data[:-1])
    assert not any(e.data == "[DONE]" for e in got)


def test_responses_end_incomplete_at_max_output_tokens():
    got = events(post("/chat/v1/responses", {"model": "m", "input": "Hello there " * 20, "stream": True,
                                             "max_output_tokens": 16}, CHAT))  # the upstream's least
    assert got[-1].event == "response.incomplete"
    assert got[-1].json()["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_embeddings_are_deterministic_unit_vectors_with_real_token_counts():
    body = post("/chat/v1/embeddings", {"model": "e", "input": ["alpha", "beta", "alpha"]}, CHAT).json()
    vectors = [d["embedding"] for d in body["data"]]
    assert vectors[0] == vectors[2] != vectors[1] and len(vectors[0]) == 16
    assert math.isclose(sum(x * x for x in vectors[0]), 1.0, abs_tol=1e-4)
    assert body["usage"] == {
        "prompt_tokens": sum(estimate_tokens(t) for t in ("alpha", "beta", "alpha")),
        "total_tokens": sum(estimate_tokens(t) for t in ("alpha", "beta", "alpha"))}
    tokens = post("/chat/v1/embeddings", {"model": "e", "input": [[1, 2, 3], [4]]}, CHAT).json()
    assert tokens["usage"]["prompt_tokens"] == 4
    packed = post("/chat/v1/embeddings", {"model": "e", "input": "alpha", "encoding_format": "base64",
                                          "dimensions": 8}, CHAT).json()["data"][0]["embedding"]
    decoded = struct.unpack("<8f", base64.b64decode(packed))
    assert decoded == pytest.approx(post("/chat/v1/embeddings", {"model": "e", "input": "alpha", "dimensions": 8},
                                         CHAT).json()["data"][0]["embedding"], abs=1e-6)


# --- messages ------------------------------------------------------------------------------------------

def test_messages_stream_order_and_usage():
    got = events(post("/messages/v1/messages", msg("Hello there", stream=True), MESSAGES))
    kinds = [e.event for e in got]
    assert kinds[:3] == ["message_start", "content_block_start", "ping"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(e.json()["type"] == e.event for e in got)
    start = got[0].json()["message"]
    assert start["content"] == [] and start["usage"]["input_tokens"] == \
        MessagesRequest.model_validate(msg("Hello there")).estimate_input_tokens()
    deltas = [e.json()["delta"]["text"] for e in got if e.event == "content_block_delta"]
    assert "".join(deltas) == "You said: Hello there"
    final = got[-2].json()
    assert final["delta"]["stop_reason"] == "end_turn" and final["usage"]["output_tokens"] == len(deltas)


def test_messages_max_tokens_and_stop_sequence():
    assert post("/messages/v1/messages", msg("Hello there", max_tokens=2),
                MESSAGES).json()["stop_reason"] == "max_tokens"
    body = post("/messages/v1/messages", msg("Hello there", stop_sequences=["zzz", "there"]), MESSAGES).json()
    assert body["stop_reason"] == "stop_sequence" and body["stop_sequence"] == "there"


def test_messages_needs_version_header_and_max_tokens():
    no_version = post("/messages/v1/messages", msg("hi"), {"x-api-key": "k"})
    assert no_version.status_code == 400 and no_version.json()["error"]["type"] == "invalid_request_error"
    no_max = post("/messages/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, MESSAGES)
    assert no_max.status_code == 400 and "max_tokens" in no_max.json()["error"]["message"]


def test_messages_prompt_cache_is_written_then_read():
    body = msg("hi", system=[{"type": "text", "text": "A long shared preamble. " * 20 + str(time.time()),
                              "cache_control": {"type": "ephemeral"}}])
    first = post("/messages/v1/messages", body, MESSAGES).json()["usage"]
    second = post("/messages/v1/messages", body, MESSAGES).json()["usage"]
    assert first["cache_creation_input_tokens"] > 0 and first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0 and second["input_tokens"] == first["input_tokens"]


# --- content generation ---------------------------------------------------------------------------------

def test_content_stream_usage_is_cumulative_and_only_the_last_event_finishes():
    got = [e.json() for e in events(post("/content/v1beta/models/m-small:streamGenerateContent", gen("Hello there"),
                                         CONTENT, params={"alt": "sse"}))]
    counts = [g["usageMetadata"]["candidatesTokenCount"] for g in got]
    assert counts == sorted(counts) and counts[-1] == len(got)
    assert all("finishReason" not in g["candidates"][0] for g in got[:-1])
    assert got[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "".join(g["candidates"][0]["content"]["parts"][0]["text"] for g in got) == "You said: Hello there"
    assert all(g["candidates"][0]["content"]["role"] == "model" for g in got)


def test_content_stream_without_alt_sse_is_one_json_array():
    response = post("/content/v1beta/models/m-small:streamGenerateContent", gen("Hello there", maxOutputTokens=2),
                    CONTENT)
    array = json.loads(response.content)
    assert response.headers["content-type"].startswith("application/json")
    assert array[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS" and len(array) == 2


def test_content_key_may_come_in_the_query():
    response = post("/content/v1beta/models/m-small:generateContent", gen("hi"), {}, params={"key": "sim"})
    assert response.status_code == 200


def test_content_thoughts_are_counted_apart():
    body = post("/content/v1beta/models/m:generateContent",
                gen("hi", thinkingConfig={"includeThoughts": True}), CONTENT).json()
    parts = body["candidates"][0]["content"]["parts"]
    assert parts[0]["thought"] is True
    assert body["usageMetadata"]["thoughtsTokenCount"] == len(tokenize(parts[0]["text"]))
    usage = body["usageMetadata"]
    assert usage["totalTokenCount"] == (usage["promptTokenCount"] + usage["candidatesTokenCount"]
                                        + usage["thoughtsTokenCount"])


# --- auth and faults, per protocol ------------------------------------------------------------------------

CASES = {
    "chat": ("/chat/v1/chat/completions", chat, CHAT, lambda b: b["error"]["message"]),
    "messages": ("/messages/v1/messages", msg, MESSAGES,
                 lambda b: b["error"]["message"] if b["type"] == "error" else None),
    "content": ("/content/v1beta/models/m-small:generateContent", gen, CONTENT,
                lambda b: b["error"]["message"] if "status" in b["error"] else None),
}


@pytest.mark.parametrize("protocol", CASES)
def test_no_credential_is_a_401_in_the_protocols_envelope(protocol):
    path, body, _, message = CASES[protocol]
    response = post(path, body("hi"), {"anthropic-version": "2023-06-01"})
    assert response.status_code == 401 and message(response.json())


@pytest.mark.parametrize("protocol", CASES)
@pytest.mark.parametrize("fault,status", [("500", 500), ("429", 429), ("503", 503)])
def test_fault_directive_and_path_prefix(protocol, fault, status):
    path, body, headers, message = CASES[protocol]
    by_directive = post(path, body(f"hello #fault={fault}"), headers)
    prefix, rest = path.split("/v1", 1)
    by_prefix = post(f"{prefix}/fault/{fault}/v1{rest}", body("hello"), headers)
    for response in (by_directive, by_prefix):
        assert response.status_code == status and message(response.json())
        assert (response.headers.get("retry-after") == "1") is (status == 429)


def test_the_error_envelopes_use_each_protocols_words():
    assert post("/chat/fault/429/v1/chat/completions", chat("x"), CHAT).json()["error"]["code"] == "rate_limit_exceeded"
    assert post("/messages/fault/429/v1/messages", msg("x"), MESSAGES).json()["error"]["type"] == "rate_limit_error"
    assert post("/content/fault/429/v1beta/models/m:generateContent", gen("x"), CONTENT).json()["error"]["status"] == \
        "RESOURCE_EXHAUSTED"
    assert post("/messages/v1/messages", msg("x #fault=529"), MESSAGES).json()["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize("path,body,headers,params,terminal", [
    ("/chat/v1/chat/completions", chat("one two three four five #fault=cut", stream=True), CHAT, None,
     lambda got: any(e.data == "[DONE]" for e in got)),
    ("/chat/v1/responses", {"model": "m", "input": "one two three #fault=cut", "stream": True}, CHAT, None,
     lambda got: got[-1].event == "response.completed"),
    ("/messages/v1/messages", msg("one two three #fault=cut", stream=True), MESSAGES, None,
     lambda got: any(e.event == "message_stop" for e in got)),
    ("/content/v1beta/models/m:streamGenerateContent", gen("one two three #fault=cut"), CONTENT, {"alt": "sse"},
     lambda got: "finishReason" in got[-1].data),
])
def test_cut_streams_stop_half_way_without_their_terminal_event(path, body, headers, params, terminal):
    got = events(post(path, body, headers, params))
    assert got and not terminal(got)
    uncut = events(post(path, json.loads(json.dumps(body).replace(" #fault=cut", "")), headers, params))
    assert terminal(uncut) and len(got) < len(uncut)


def _pauses(monkeypatch) -> list[float]:
    """The simulators' pauses, as asked for (the mechanism; how long they took is no test's)."""
    import types

    from gateway_local.simulators import _text

    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(_text, "asyncio", types.SimpleNamespace(sleep=sleep))
    return asked


def test_slow_fault_delays_the_answer(monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "0.3")
    pauses = _pauses(monkeypatch)
    assert post("/chat/v1/chat/completions", chat("hi #fault=slow"), CHAT).status_code == 200
    assert pauses == [0.3]


def test_token_delay_paces_the_stream(monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "20")
    pauses = _pauses(monkeypatch)
    got = events(post("/messages/v1/messages", msg("one two three", stream=True), MESSAGES))
    assert pauses == [0.02] * (len(got) - 1)  # one token delay between each two events


def test_the_simulators_validate_requests_in_their_own_envelope():
    bad = post("/content/v1beta/models/m:generateContent", {"contents": []}, CONTENT)
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "contents" in bad.json()["error"]["message"]
    bad = post("/chat/v1/chat/completions", chat("x", n=0), CHAT)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "n"
