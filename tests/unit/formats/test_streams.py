"""Streams: an upstream's events relayed to the client in the client's own event sequence."""

import json

import pytest

from gateway.formats import CUT_MESSAGE, DONE, StreamConverter, Usage
from gateway.formats.neutral import Thinking
from gateway.formats.signatures import sealed_thinking

NOW = 1700000001


def relay(converter, upstream_events):
    out = []
    for name, data in upstream_events:
        out += converter.feed(name, data)
    return out + converter.finish()


# ---- realistic upstream streams ----

def chat_chunk(choices, usage=None):
    return (None, {"id": "chatcmpl-7xQ", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": "gpt-up", "system_fingerprint": "fp_1", "choices": choices, "usage": usage})


def chat_delta(delta, finish_reason=None):
    return chat_chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])


CHAT_USAGE = {"prompt_tokens": 19, "completion_tokens": 3, "total_tokens": 22,
              "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}

CHAT_TEXT_STREAM = [
    chat_delta({"role": "assistant", "content": "", "refusal": None}),
    chat_delta({"content": "Hello"}),
    chat_delta({"content": " there"}),
    chat_delta({}, "stop"),
    chat_chunk([], CHAT_USAGE),
    (None, DONE),
]

CHAT_TOOL_STREAM = [
    chat_delta({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
    chat_delta({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
    chat_delta({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
    chat_delta({"tool_calls": [
        {"index": 1, "id": "call_B", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}),
    chat_delta({}, "tool_calls"),
    chat_chunk([], CHAT_USAGE),
    (None, DONE),
]


def messages_event(kind, **fields):
    return kind, {"type": kind, **fields}


MESSAGES_STREAM = [
    messages_event("message_start", message={
        "id": "msg_01Q", "type": "message", "role": "assistant", "model": "claude-up", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 25, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100,
                  "output_tokens": 1}}),
    messages_event("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
    messages_event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Simple."}),
    messages_event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "EqQB"}),
    messages_event("content_block_stop", index=0),
    messages_event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
    messages_event("ping"),
    messages_event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hi"}),
    messages_event("content_block_delta", index=1, delta={"type": "text_delta", "text": "!"}),
    messages_event("content_block_stop", index=1),
    messages_event("content_block_start", index=2, content_block={
        "type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
    messages_event("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": ""}),
    messages_event("content_block_delta", index=2,
                   delta={"type": "input_json_delta", "partial_json": "{\"city\": \"Oslo\"}"}),
    messages_event("content_block_stop", index=2),
    messages_event("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None},
                   usage={"output_tokens": 42}),
    messages_event("message_stop"),
]


def content_event(parts, finish_reason=None, usage=None):
    candidate = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish_reason:
        candidate["finishReason"] = finish_reason
    event = {"candidates": [candidate], "modelVersion": "gemini-up", "responseId": "Xk9aZ"}
    if usage:
        event["usageMetadata"] = usage
    return None, event


CONTENT_STREAM = [
    content_event([{"text": "The sum"}], usage={"promptTokenCount": 8, "totalTokenCount": 8}),
    content_event([{"text": " is 4."}],
                  usage={"promptTokenCount": 8, "candidatesTokenCount": 4, "totalTokenCount": 12}),
    content_event([{"text": ""}], "STOP", {"promptTokenCount": 8, "candidatesTokenCount": 5,
                                           "thoughtsTokenCount": 30, "totalTokenCount": 43}),
]

CONTENT_TOOL_STREAM = [
    content_event([{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}], "STOP",
                  {"promptTokenCount": 40, "candidatesTokenCount": 6, "totalTokenCount": 46}),
]


# ---- chat upstream ----

def test_chat_stream_to_messages_client_is_the_exact_messages_sequence():
    converter = StreamConverter("chat", "messages", model="public-model", now=NOW)
    out = relay(converter, CHAT_TEXT_STREAM)
    assert out == [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_7xQ", "type": "message", "role": "assistant", "model": "public-model", "content": [],
            "stop_reason": None, "stop_sequence": None,
            # A chat upstream reports usage only at the end; message_delta carries the full counts.
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}}),
        ("content_block_start",
         {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta",
         {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
        ("content_block_delta",
         {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"input_tokens": 19, "output_tokens": 3, "cache_creation_input_tokens": 0,
                                     "cache_read_input_tokens": 0}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    assert converter.usage == Usage(19, 3)
    assert converter.output_chars == len("Hello there")
    assert converter.completed and not converter.truncated and converter.error is None


def test_chat_tool_stream_to_messages_client_streams_input_json():
    out = relay(StreamConverter("chat", "messages", now=NOW), CHAT_TOOL_STREAM)
    names = [name for name, _ in out]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert out[1][1]["content_block"] == {"type": "tool_use", "id": "call_A", "name": "get_weather", "input": {}}
    assert [e[1]["delta"]["partial_json"] for e in out if e[0] == "content_block_delta"] == [
        "{\"city\":", "\"Paris\"}", "{}"]
    assert out[5][1] == {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "call_B", "name": "get_time", "input": {}}}
    assert out[8][1]["delta"]["stop_reason"] == "tool_use"


def test_chat_stream_to_content_client_sends_whole_response_objects():
    converter = StreamConverter("chat", "content", model="public-model", now=NOW)
    out = relay(converter, CHAT_TEXT_STREAM)

    def event(parts, **extra):
        candidate = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if "finishReason" in extra:
            candidate["finishReason"] = extra.pop("finishReason")
        return None, {"candidates": [candidate], **extra, "modelVersion": "public-model", "responseId": "7xQ"}

    assert out == [
        event([{"text": "Hello"}]),
        event([{"text": " there"}]),
        event([{"text": ""}], finishReason="STOP",
              usageMetadata={"promptTokenCount": 19, "candidatesTokenCount": 3, "totalTokenCount": 22}),
    ]


def test_chat_tool_stream_to_content_client_sends_each_call_whole():
    out = relay(StreamConverter("chat", "content", now=NOW), CHAT_TOOL_STREAM)
    assert len(out) == 1
    candidate = out[0][1]["candidates"][0]
    assert candidate["content"]["parts"] == [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"name": "get_time", "args": {}}}]
    assert candidate["finishReason"] == "STOP"
    assert out[0][1]["usageMetadata"]["totalTokenCount"] == 22


def test_chat_stream_to_responses_client_is_the_exact_responses_sequence():
    converter = StreamConverter("chat", "responses", model="public-model", now=NOW)
    out = relay(converter, CHAT_TEXT_STREAM)
    item_id = "msg_7xQ_0"
    in_progress = {"id": "resp_7xQ", "object": "response", "created_at": 1700000000, "status": "in_progress",
                   "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
                   "model": "public-model", "output": [], "parallel_tool_calls": True, "temperature": None,
                   "tool_choice": "auto", "tools": [], "top_p": None, "usage": None}
    part = {"type": "output_text", "text": "Hello there", "annotations": [], "logprobs": []}
    item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
    expected = [
        ("response.created", {"response": in_progress}),
        ("response.in_progress", {"response": in_progress}),
        ("response.output_item.added", {"output_index": 0, "item": {
            "id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        ("response.content_part.added", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                         "part": {**part, "text": ""}}),
        ("response.output_text.delta", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                        "delta": "Hello", "logprobs": []}),
        ("response.output_text.delta", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                        "delta": " there", "logprobs": []}),
        ("response.output_text.done", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                       "text": "Hello there", "logprobs": []}),
        ("response.content_part.done", {"item_id": item_id, "output_index": 0, "content_index": 0, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {
            **in_progress, "status": "completed", "output": [item],
            "usage": {"input_tokens": 19, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": 3,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 22}}}),
    ]
    assert out == [(kind, {"type": kind, "sequence_number": n, **fields})
                   for n, (kind, fields) in enumerate(expected)]


def test_a_chat_stream_cut_at_length_ends_responses_as_incomplete():
    stream = [chat_delta({"role": "assistant", "content": "Once"}), chat_delta({}, "length"),
              chat_chunk([], CHAT_USAGE), (None, DONE)]
    out = relay(StreamConverter("chat", "responses", now=NOW), stream)
    assert out[-1][0] == "response.incomplete"
    assert out[-1][1]["response"]["status"] == "incomplete"
    assert out[-1][1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert out[-1][1]["response"]["usage"]["total_tokens"] == 22


def test_chat_tool_stream_to_responses_client_streams_function_call_arguments():
    out = relay(StreamConverter("chat", "responses", now=NOW), CHAT_TOOL_STREAM)
    kinds = [kind for kind, _ in out]
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    assert [data["sequence_number"] for _, data in out] == list(range(len(out)))
    assert out[5][1]["arguments"] == "{\"city\":\"Paris\"}"
    assert [i["call_id"] for i in out[-1][1]["response"]["output"]] == ["call_A", "call_B"]


# ---- messages upstream ----

def test_messages_stream_to_chat_client_with_usage():
    converter = StreamConverter("messages", "chat", model="public-model", include_usage=True, now=NOW)
    out = relay(converter, MESSAGES_STREAM)

    def chunk(delta, finish_reason=None):
        return None, {"id": "chatcmpl-01Q", "object": "chat.completion.chunk", "created": NOW, "model": "public-model",
                      "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
                      "usage": None}

    assert out == [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Simple."}),
        # the block whole with its signature, once it closed, for the next turn (formats.signatures)
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "Simple.", "signature": "EqQB",
                                      "format": "anthropic-claude-v1", "index": 0}]}),
        chunk({"content": "Hi"}),
        chunk({"content": "!"}),
        chunk({"tool_calls": [{"index": 0, "id": "toolu_01", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Oslo\"}"}}]}),
        chunk({}, "tool_calls"),
        (None, {"id": "chatcmpl-01Q", "object": "chat.completion.chunk", "created": NOW, "model": "public-model",
                "choices": [], "usage": {"prompt_tokens": 125, "completion_tokens": 42, "total_tokens": 167,
                                         "prompt_tokens_details": {"cached_tokens": 100},
                                         "completion_tokens_details": {"reasoning_tokens": 0}}}),
        (None, DONE),
    ]
    assert converter.usage == Usage(125, 42, cached_input_tokens=100)
    assert converter.output_chars == len("Simple.") + len("Hi!") + len("get_weather") + len("{\"city\": \"Oslo\"}")


def test_messages_stream_to_chat_client_without_usage_has_no_usage_chunk():
    out = relay(StreamConverter("messages", "chat", now=NOW), MESSAGES_STREAM)
    assert out[-1] == (None, DONE)
    assert all("usage" not in data for _, data in out[:-1])
    assert out[-2][1]["choices"][0]["finish_reason"] == "tool_calls"


def test_messages_stream_to_content_client():
    out = relay(StreamConverter("messages", "content", now=NOW), MESSAGES_STREAM)
    # the signed block rides whole in an empty thought's signature, once it closed (formats.signatures)
    carrier = {"text": "", "thought": True,
               "thoughtSignature": sealed_thinking(Thinking("Simple.", "EqQB", "messages"), as_bytes=True)}
    assert [e[1]["candidates"][0]["content"]["parts"] for e in out] == [
        [{"text": "Simple.", "thought": True}], [carrier], [{"text": "Hi"}], [{"text": "!"}],
        [{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]]
    assert out[-1][1]["candidates"][0]["finishReason"] == "STOP"
    assert out[-1][1]["usageMetadata"] == {"promptTokenCount": 125, "candidatesTokenCount": 42,
                                           "totalTokenCount": 167, "cachedContentTokenCount": 100}
    assert all("usageMetadata" not in e[1] for e in out[:-1])


# ---- content upstream ----

def test_content_stream_to_chat_client_with_usage():
    converter = StreamConverter("content", "chat", model="public-model", include_usage=True, now=NOW)
    out = relay(converter, CONTENT_STREAM)

    def chunk(delta, finish_reason=None):
        return None, {"id": "chatcmpl-Xk9aZ", "object": "chat.completion.chunk", "created": NOW,
                      "model": "public-model",
                      "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
                      "usage": None}

    assert out == [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "The sum"}),
        chunk({"content": " is 4."}),
        chunk({}, "stop"),
        (None, {"id": "chatcmpl-Xk9aZ", "object": "chat.completion.chunk", "created": NOW, "model": "public-model",
                "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 35, "total_tokens": 43,
                                         "prompt_tokens_details": {"cached_tokens": 0},
                                         "completion_tokens_details": {"reasoning_tokens": 30}}}),
        (None, DONE),
    ]
    # Thoughts count as output: 5 visible tokens + 30 thought tokens
    assert converter.usage == Usage(8, 35, reasoning_tokens=30)


def test_content_tool_stream_to_chat_client():
    out = relay(StreamConverter("content", "chat", now=NOW), CONTENT_TOOL_STREAM)
    call = out[1][1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["index"] == 0 and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": ""}
    assert out[2][1]["choices"][0]["delta"] == {"tool_calls": [{"index": 0,
                                                                "function": {"arguments": "{\"city\":\"Rome\"}"}}]}
    assert out[3][1]["choices"][0]["finish_reason"] == "tool_calls"
    assert out[4] == (None, DONE)


def test_content_stream_to_messages_client_knows_input_tokens_from_the_start():
    converter = StreamConverter("content", "messages", now=NOW)
    out = relay(converter, CONTENT_STREAM)
    assert [name for name, _ in out] == ["message_start", "content_block_start", "content_block_delta",
                                         "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert out[0][1]["message"]["usage"]["input_tokens"] == 8
    assert out[0][1]["message"]["id"] == "msg_Xk9aZ"
    assert out[5][1] == {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                         "usage": {"input_tokens": 8, "output_tokens": 35, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0}}


def test_content_tool_stream_to_messages_client():
    out = relay(StreamConverter("content", "messages", now=NOW), CONTENT_TOOL_STREAM)
    assert out[1][1]["content_block"]["type"] == "tool_use"
    assert out[2][1]["delta"] == {"type": "input_json_delta", "partial_json": "{\"city\":\"Rome\"}"}
    assert out[4][1]["delta"]["stop_reason"] == "tool_use"


def test_content_max_tokens_finish_reaches_each_client():
    stream = [content_event([{"text": "Long"}], "MAX_TOKENS", {"promptTokenCount": 3, "candidatesTokenCount": 1,
                                                                "totalTokenCount": 4})]
    assert relay(StreamConverter("content", "messages"), stream)[-2][1]["delta"]["stop_reason"] == "max_tokens"
    assert relay(StreamConverter("content", "chat"), stream)[-2][1]["choices"][0]["finish_reason"] == "length"
    assert relay(StreamConverter("content", "responses"), stream)[-1][0] == "response.incomplete"


# ---- same dialect: pass-through that still measures ----

def test_chat_pass_through_strips_the_usage_the_client_did_not_ask_for():
    converter = StreamConverter("chat", "chat", model="public-model")
    out = relay(converter, CHAT_TEXT_STREAM)
    assert len(out) == len(CHAT_TEXT_STREAM) - 1  # no usage chunk
    assert all("usage" not in data and data["model"] == "public-model" for _, data in out[:-1])
    assert out[-1] == (None, DONE)
    assert converter.usage == Usage(19, 3) and converter.output_chars == len("Hello there")
    assert converter.completed


def test_chat_pass_through_keeps_usage_the_client_asked_for():
    out = relay(StreamConverter("chat", "chat", include_usage=True), CHAT_TEXT_STREAM)
    assert out == CHAT_TEXT_STREAM


def test_messages_pass_through_bills_from_message_start_and_message_delta():
    converter = StreamConverter("messages", "messages")
    out = relay(converter, MESSAGES_STREAM)
    assert out == MESSAGES_STREAM
    assert converter.usage == Usage(125, 42, cached_input_tokens=100)
    assert converter.completed


def test_content_pass_through_bills_from_the_last_usage_metadata():
    converter = StreamConverter("content", "content", model="public-model")
    out = relay(converter, CONTENT_STREAM)
    assert [data["candidates"] for _, data in out] == [data["candidates"] for _, data in CONTENT_STREAM]
    assert all(data["modelVersion"] == "public-model" for _, data in out)
    assert converter.usage == Usage(8, 35, reasoning_tokens=30)
    assert converter.completed and converter.output_chars == len("The sum is 4.")


def test_responses_pass_through_bills_from_response_completed():
    upstream = relay(StreamConverter("chat", "responses", now=NOW), CHAT_TEXT_STREAM)
    converter = StreamConverter("responses", "responses")
    assert relay(converter, upstream) == upstream
    assert converter.usage == Usage(19, 3)
    assert converter.output_chars == len("Hello there") and converter.completed


# ---- cut streams and upstream errors ----

@pytest.mark.parametrize("client,last", [
    ("messages", ("error", {"type": "error", "error": {"type": "api_error", "message": CUT_MESSAGE}})),
    ("chat", (None, {"error": {"message": CUT_MESSAGE, "type": "upstream_error", "param": None,
                               "code": "upstream_error"}})),
    ("content", (None, {"error": {"code": 502, "message": CUT_MESSAGE, "status": "UNAVAILABLE"}})),
])
def test_a_chat_stream_without_done_is_cut_and_the_client_is_told(client, last):
    # Given a chat upstream that stops after some text, before finish_reason and [DONE]
    converter = StreamConverter("chat", client)
    out = relay(converter, CHAT_TEXT_STREAM[:3])
    # Then the converter knows it was cut, counts what was relayed, and the client gets its error event
    assert converter.truncated and not converter.completed
    assert converter.usage is None and converter.output_chars == len("Hello there")
    assert out[-1] == last


def test_a_cut_responses_pass_through_fails_the_same_response_with_the_next_number():
    upstream = relay(StreamConverter("chat", "responses", now=NOW), CHAT_TEXT_STREAM)[:6]
    converter = StreamConverter("responses", "responses")
    out = relay(converter, upstream)
    assert converter.truncated
    assert out[-1][0] == "response.failed"
    assert out[-1][1]["sequence_number"] == 6 and out[-1][1]["response"]["id"] == "resp_7xQ"


def test_a_cut_stream_to_responses_fails_the_response():
    out = relay(StreamConverter("messages", "responses"), MESSAGES_STREAM[:8])
    assert out[-1][0] == "response.failed"
    assert out[-1][1]["response"]["status"] == "failed"
    assert out[-1][1]["response"]["error"] == {"code": "server_error", "message": CUT_MESSAGE}


def test_a_messages_stream_without_message_stop_is_cut_but_usage_so_far_is_kept():
    converter = StreamConverter("messages", "chat")
    relay(converter, MESSAGES_STREAM[:-1])
    assert converter.truncated
    assert converter.usage == Usage(125, 42, cached_input_tokens=100)


def test_a_content_stream_without_finish_reason_is_cut():
    converter = StreamConverter("content", "content")
    out = relay(converter, CONTENT_STREAM[:2])
    assert converter.truncated and converter.usage == Usage(8, 4)
    assert out[-1] == (None, {"error": {"code": 502, "message": CUT_MESSAGE, "status": "UNAVAILABLE"}})


def test_a_chat_pass_through_cut_before_finish_reason_is_cut():
    converter = StreamConverter("chat", "chat", include_usage=True)
    out = relay(converter, CHAT_TEXT_STREAM[:3])
    assert converter.truncated and converter.usage is None
    assert "error" in out[-1][1]


def test_a_chat_stream_closed_after_finish_reason_without_done_is_whole():
    # Given a compatible server that closes after the usage chunk without [DONE]
    for client in ("chat", "messages"):
        converter = StreamConverter("chat", client, include_usage=True)
        out = relay(converter, CHAT_TEXT_STREAM[:-1])
        # Then the answer is whole and the client still gets its proper ending
        assert converter.completed and not converter.truncated and converter.usage == Usage(19, 3)
        assert out[-1] == ((None, DONE) if client == "chat" else ("message_stop", {"type": "message_stop"}))


def test_done_without_any_finish_reason_is_a_cut():
    converter = StreamConverter("chat", "messages")
    out = relay(converter, CHAT_TEXT_STREAM[:3] + [(None, DONE)])
    assert converter.truncated and not converter.completed
    assert out[-1][0] == "error"


def test_an_upstream_error_event_reaches_the_client_once_and_is_not_a_cut():
    stream = MESSAGES_STREAM[:8] + [messages_event("error",
                                                   error={"type": "overloaded_error", "message": "Overloaded"})]
    converter = StreamConverter("messages", "chat")
    out = relay(converter, stream)
    assert out[-1] == (None, {"error": {"message": "Overloaded", "type": "upstream_error", "param": None,
                                        "code": "upstream_error"}})
    assert converter.error == "Overloaded" and not converter.truncated and not converter.completed
    assert converter.finish() == []


def test_nothing_is_sent_after_the_terminal_event():
    converter = StreamConverter("chat", "messages")
    relay(converter, CHAT_TEXT_STREAM)
    assert converter.feed(None, {"choices": [{"index": 0, "delta": {"content": "late"}}]}) == []


def test_events_serialise_as_json():
    for upstream, stream in (("chat", CHAT_TOOL_STREAM), ("messages", MESSAGES_STREAM), ("content", CONTENT_STREAM)):
        for client in ("chat", "messages", "content", "responses"):
            for _, data in relay(StreamConverter(upstream, client), stream):
                json.dumps(data)
