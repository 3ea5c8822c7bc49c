"""Nothing silently dropped: JSON output to a messages channel as a forced tool, stop sequences a
chat or content channel cannot report applied by the gateway, and answer-shaping fields a
conversion cannot carry refused with a 400 naming them."""

from __future__ import annotations

import json

import pytest

from gateway.errors import InvalidRequest
from gateway.formats import DONE, StreamConverter, convert_request, convert_response
from gateway.formats.messages import ANSWER_TOOL
from tests.unit.formats.test_streams import CHAT_USAGE, chat_chunk, chat_delta, messages_event, relay

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_JSON = {"model": "m", "messages": [{"role": "user", "content": "Where?"}],
             "response_format": {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA}}}


# ---- JSON output to a messages channel ----

def test_a_json_schema_becomes_one_forced_tool_whose_input_is_the_answer():
    body = convert_request(CHAT_JSON, source="chat", target="messages", model="up")
    assert body["tools"] == [{"name": ANSWER_TOOL, "description": "Give the whole answer as this tool's input. "
                              "The answer is a place.", "input_schema": SCHEMA}]
    assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
    assert "thinking" not in body  # the dialect refuses thinking with a forced tool


def test_a_messages_output_format_reaches_a_chat_channel_as_a_response_format():
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}],
            "output_format": {"type": "json_schema", "schema": SCHEMA}}
    converted = convert_request(body, source="messages", target="chat", model="up")
    assert converted["response_format"]["json_schema"]["schema"] == SCHEMA


def test_json_object_is_any_object_and_the_content_dialect_asks_the_same_way():
    chat = {**CHAT_JSON, "response_format": {"type": "json_object"}}
    assert convert_request(chat, source="chat", target="messages", model="up")["tools"][0]["input_schema"] == {
        "type": "object"}
    content = {"contents": [{"role": "user", "parts": [{"text": "Where?"}]}],
               "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA}}
    body = convert_request(content, source="content", target="messages", model="up", stream=False)
    assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}


@pytest.mark.parametrize("change, field", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
     "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "l", "schema": {"type": "array"}}}},
     "response_format.json_schema.schema"),
])
def test_json_output_a_messages_channel_cannot_give_is_a_400_naming_the_field(change, field):
    with pytest.raises(InvalidRequest) as caught:
        convert_request({**CHAT_JSON, **change}, source="chat", target="messages", model="up")
    assert caught.value.param == field


def test_the_answer_tool_call_comes_back_as_the_text_of_the_answer():
    upstream = {"id": "msg_1", "type": "message", "role": "assistant", "model": "up", "stop_reason": "tool_use",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": ANSWER_TOOL, "input": {"city": "Oslo"}}],
                "usage": {"input_tokens": 5, "output_tokens": 4}}
    answer = convert_response(upstream, source="messages", target="chat", model="m")
    assert json.loads(answer["choices"][0]["message"]["content"]) == {"city": "Oslo"}
    assert answer["choices"][0]["finish_reason"] == "stop" and not answer["choices"][0]["message"].get("tool_calls")


def test_a_streamed_answer_tool_call_is_streamed_as_text():
    stream = [
        messages_event("message_start", message={"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": "up", "content": [], "usage": {"input_tokens": 5,
                                                                                          "output_tokens": 1}}),
        messages_event("content_block_start", index=0, content_block={"type": "tool_use", "id": "toolu_1",
                                                                       "name": ANSWER_TOOL, "input": {}}),
        messages_event("content_block_delta", index=0,
                       delta={"type": "input_json_delta", "partial_json": "{\"city\":"}),
        messages_event("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "\"Oslo\"}"}),
        messages_event("content_block_stop", index=0),
        messages_event("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None},
                       usage={"output_tokens": 4}),
        messages_event("message_stop"),
    ]
    out = relay(StreamConverter("messages", "chat", now=1), stream)
    chunks = [data for _, data in out if data != DONE]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert json.loads(text) == {"city": "Oslo"}
    assert [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")][-1] == "stop"
    assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c.get("choices"))


# ---- stop sequences through a chat or content channel ----

MESSAGES_STOP = {"model": "m", "max_tokens": 100, "stop_sequences": ["END", "###"],
                 "messages": [{"role": "user", "content": "Count"}]}


def test_the_sequences_stay_with_the_gateway_for_a_chat_or_content_channel_only():
    assert "stop" not in convert_request(MESSAGES_STOP, source="messages", target="chat", model="up")
    content = convert_request(MESSAGES_STOP, source="messages", target="content", model="up", stream=False)
    assert "stopSequences" not in content.get("generationConfig", {})
    chat = {"model": "m", "stop": ["END"], "messages": [{"role": "user", "content": "x"}]}
    assert convert_request(chat, source="chat", target="messages", model="up")["stop_sequences"] == ["END"]


def test_a_whole_answer_ends_at_the_first_sequence_and_says_which():
    upstream = {"id": "c1", "object": "chat.completion", "created": 1, "model": "up",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "one two ### three END"},
                             "finish_reason": "stop"}], "usage": CHAT_USAGE}
    answer = convert_response(upstream, source="chat", target="messages", model="m", stop=["END", "###"])
    assert answer["content"] == [{"type": "text", "text": "one two "}]
    assert (answer["stop_reason"], answer["stop_sequence"]) == ("stop_sequence", "###")
    plain = convert_response(upstream, source="chat", target="messages", model="m", stop=["nowhere"])
    assert (plain["stop_reason"], plain["stop_sequence"]) == ("end_turn", None)


def test_a_stream_ends_at_a_sequence_split_across_events():
    stream = [chat_delta({"role": "assistant", "content": ""}), chat_delta({"content": "one E"}),
              chat_delta({"content": "ND two"}), chat_delta({"content": " three"}), chat_delta({}, "stop"),
              chat_chunk([], CHAT_USAGE), (None, DONE)]
    converter = StreamConverter("chat", "messages", now=1, stop=["END"])
    out = relay(converter, stream)
    text = "".join(d["delta"].get("text", "") for n, d in out if n == "content_block_delta")
    assert text == "one "
    final = next(d for n, d in out if n == "message_delta")
    assert final["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    assert out[-1][0] == "message_stop" and converter.completed
    assert converter.usage.output_tokens == CHAT_USAGE["completion_tokens"]  # billed as the upstream generated


def test_a_stream_without_a_sequence_is_relayed_whole():
    stream = [chat_delta({"role": "assistant", "content": ""}), chat_delta({"content": "Hello"}),
              chat_delta({"content": " there"}), chat_delta({}, "stop"), chat_chunk([], CHAT_USAGE), (None, DONE)]
    out = relay(StreamConverter("chat", "messages", now=1, stop=["ENDING"]), stream)
    assert "".join(d["delta"].get("text", "") for n, d in out if n == "content_block_delta") == "Hello there"
    assert next(d for n, d in out if n == "message_delta")["delta"]["stop_reason"] == "end_turn"


# ---- fields a conversion cannot carry ----

@pytest.mark.parametrize("source, body, field", [
    ("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True}, "logprobs"),
    ("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"],
              "audio": {"voice": "a", "format": "wav"}}, "modalities"),
    ("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 5}}, "logit_bias"),
    ("messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                  "mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]}, "mcp_servers"),
    ("content", {"contents": [{"role": "user", "parts": [{"text": "x"}]}],
                 "generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}}, "generationConfig.responseModalities"),
    ("content", {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "cachedContent": "cachedContents/1"},
     "cachedContent"),
    ("responses", {"model": "m", "input": "x", "background": True}, "background"),
    ("responses", {"model": "m", "input": "x", "prompt": {"id": "pmpt_1"}}, "prompt"),
    ("content", {"contents": [{"role": "user", "parts": [{"text": "x"}]}],
                 "generationConfig": {"responseMimeType": "text/x.enum"}}, "generationConfig.responseMimeType"),
])
def test_an_answer_shaping_field_another_dialect_cannot_carry_is_refused(source, body, field):
    target = "messages" if source != "messages" else "chat"
    with pytest.raises(InvalidRequest) as caught:
        convert_request(body, source=source, target=target, model="up", stream=False)
    assert caught.value.param == field and field in caught.value.message


def test_the_same_fields_pass_through_to_a_channel_of_the_clients_own_dialect():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 2}
    assert convert_request(body, source="chat", target="chat", model="up")["logprobs"] is True
