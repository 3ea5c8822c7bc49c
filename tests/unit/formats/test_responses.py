"""Whole answers: a channel's non-streamed answer, rewritten in the client's dialect."""

import pytest

from gateway.formats import convert_response
from gateway.formats.neutral import Thinking
from gateway.formats.signatures import sealed_thinking

CHAT_ANSWER = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion", "created": 1741570283,
    "model": "gpt-up-2025-01-01",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": "Checking.", "refusal": None,
        "tool_calls": [{"id": "call_Xy1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
    "usage": {"prompt_tokens": 1117, "completion_tokens": 46, "total_tokens": 1163,
              "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0}},
}

MESSAGES_ANSWER = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-up",
    "content": [
        {"type": "thinking", "thinking": "The user wants weather.", "signature": "EqQBCgIYAhIM"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
         "input": {"city": "San Francisco", "unit": "celsius"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 472, "output_tokens": 91, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 2048},
}

CONTENT_ANSWER = {
    "candidates": [{"content": {"parts": [
        {"text": "Considering the forecast.", "thought": True},
        {"text": "Rome is sunny, "}, {"text": "24C."}], "role": "model"},
        "finishReason": "STOP", "index": 0,
        "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]}],
    "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 8, "totalTokenCount": 328,
                      "thoughtsTokenCount": 200},
    "modelVersion": "gemini-up-001", "responseId": "mKhOaZ3aBu-Q1MkP",
}


def test_chat_answer_as_messages():
    answer = convert_response(CHAT_ANSWER, source="chat", target="messages", model="public-model")
    assert answer == {
        "id": "msg_B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "type": "message", "role": "assistant",
        "model": "public-model",
        "content": [{"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_Xy1", "name": "get_weather", "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        # The cached share leaves messages input_tokens, as that dialect counts it
        "usage": {"input_tokens": 93, "output_tokens": 46, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 1024},
    }


def test_messages_answer_as_chat():
    answer = convert_response(MESSAGES_ANSWER, source="messages", target="chat", model="public-model", now=1700000000)
    assert answer == {
        "id": "chatcmpl-01XFDUDYJgAACzvnptvVoYEL", "object": "chat.completion", "created": 1700000000,
        "model": "public-model",
        "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.", "refusal": None,
            "reasoning_content": "The user wants weather.",
            "tool_calls": [{"id": "toolu_01A09q90qw90lq917835lq9", "type": "function", "function": {
                "name": "get_weather", "arguments": "{\"city\":\"San Francisco\",\"unit\":\"celsius\"}"}}],
            # the signed block, for the next turn of a tool loop (formats.signatures)
            "reasoning_details": [{"type": "reasoning.text", "text": "The user wants weather.",
                                   "signature": "EqQBCgIYAhIM", "format": "anthropic-claude-v1", "index": 0}]}}],
        "usage": {"prompt_tokens": 2520, "completion_tokens": 91, "total_tokens": 2611,
                  "prompt_tokens_details": {"cached_tokens": 2048},
                  "completion_tokens_details": {"reasoning_tokens": 0}},
    }


def test_content_answer_as_chat_joins_text_and_counts_thoughts_as_output():
    answer = convert_response(CONTENT_ANSWER, source="content", target="chat", now=1700000000)
    assert answer["id"] == "chatcmpl-mKhOaZ3aBu-Q1MkP"
    assert answer["model"] == "gemini-up-001"
    assert answer["choices"][0]["message"]["content"] == "Rome is sunny, 24C."
    assert answer["choices"][0]["message"]["reasoning_content"] == "Considering the forecast."
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {"prompt_tokens": 120, "completion_tokens": 208, "total_tokens": 328,
                               "prompt_tokens_details": {"cached_tokens": 0},
                               "completion_tokens_details": {"reasoning_tokens": 200}}


def test_content_function_calls_finish_as_tool_calls():
    answer = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 5, "totalTokenCount": 35}}
    chat = convert_response(answer, source="content", target="chat")
    call = chat["choices"][0]["message"]["tool_calls"][0]
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert call["id"].startswith("call_") and call["function"] == {"name": "get_weather",
                                                                   "arguments": "{\"city\":\"Rome\"}"}
    messages = convert_response(answer, source="content", target="messages")
    assert messages["stop_reason"] == "tool_use"
    assert messages["content"][0]["input"] == {"city": "Rome"}


def test_chat_answer_as_content():
    answer = convert_response(CHAT_ANSWER, source="chat", target="content", model="public-model")
    assert answer == {
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Checking."}, {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1117, "candidatesTokenCount": 46, "totalTokenCount": 1163,
                          "cachedContentTokenCount": 1024},
        "modelVersion": "public-model", "responseId": "B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    }


def test_chat_answer_as_responses():
    answer = convert_response(CHAT_ANSWER, source="chat", target="responses", model="public-model")
    assert answer["id"] == "resp_B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
    assert answer["object"] == "response" and answer["status"] == "completed"
    assert answer["created_at"] == 1741570283 and answer["incomplete_details"] is None
    assert answer["output"] == [
        {"id": "msg_B9MHDbslfkBeAs8l4bebGdFOJ6PeG_0", "type": "message", "status": "completed",
         "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": [],
                                           "logprobs": []}]},
        {"id": "fc_B9MHDbslfkBeAs8l4bebGdFOJ6PeG_1", "type": "function_call", "status": "completed",
         "call_id": "call_Xy1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}]
    assert answer["usage"] == {"input_tokens": 1117,
                               "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 0},
                               "output_tokens": 46, "output_tokens_details": {"reasoning_tokens": 0},
                               "total_tokens": 1163}


def test_a_cut_off_chat_answer_is_an_incomplete_response():
    cut = {**CHAT_ANSWER, "choices": [{"index": 0, "finish_reason": "length",
                                       "message": {"role": "assistant", "content": "Once upon"}}]}
    answer = convert_response(cut, source="chat", target="responses")
    assert answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}


def test_messages_answer_as_content_and_back():
    content = convert_response(MESSAGES_ANSWER, source="messages", target="content")
    assert content["candidates"][0]["content"]["parts"] == [
        {"text": "The user wants weather.", "thought": True,
         "thoughtSignature": sealed_thinking(Thinking("The user wants weather.", "EqQBCgIYAhIM", "messages"),
                                             as_bytes=True)},
        {"text": "Let me look."},
        {"functionCall": {"name": "get_weather", "args": {"city": "San Francisco", "unit": "celsius"}}}]
    assert content["candidates"][0]["finishReason"] == "STOP"
    assert content["usageMetadata"] == {"promptTokenCount": 2520, "candidatesTokenCount": 91,
                                        "totalTokenCount": 2611, "cachedContentTokenCount": 2048}
    assert content["responseId"] == "01XFDUDYJgAACzvnptvVoYEL"
    messages = convert_response(CONTENT_ANSWER, source="content", target="messages")
    assert messages["id"] == "msg_mKhOaZ3aBu-Q1MkP"
    assert messages["content"] == [
        {"type": "thinking", "thinking": "Considering the forecast.", "signature": ""},
        {"type": "text", "text": "Rome is sunny, 24C."}]
    assert messages["stop_reason"] == "end_turn"
    assert messages["usage"] == {"input_tokens": 120, "output_tokens": 208, "cache_creation_input_tokens": 0,
                                 "cache_read_input_tokens": 0}


@pytest.mark.parametrize("chat_reason,messages_reason,content_reason", [
    ("stop", "end_turn", "STOP"), ("length", "max_tokens", "MAX_TOKENS"),
    ("tool_calls", "tool_use", "STOP"), ("content_filter", "refusal", "SAFETY")])
def test_chat_finish_reasons_map_to_each_dialect(chat_reason, messages_reason, content_reason):
    answer = {**CHAT_ANSWER, "choices": [{"index": 0, "finish_reason": chat_reason,
                                          "message": {"role": "assistant", "content": "x"}}]}
    assert convert_response(answer, source="chat", target="messages")["stop_reason"] == messages_reason
    assert convert_response(answer, source="chat", target="content")["candidates"][0]["finishReason"] == content_reason


@pytest.mark.parametrize("messages_reason,chat_reason,content_reason", [
    ("end_turn", "stop", "STOP"), ("max_tokens", "length", "MAX_TOKENS"), ("tool_use", "tool_calls", "STOP"),
    ("stop_sequence", "stop", "STOP"), ("refusal", "content_filter", "SAFETY")])
def test_messages_stop_reasons_map_to_each_dialect(messages_reason, chat_reason, content_reason):
    answer = {**MESSAGES_ANSWER, "stop_reason": messages_reason,
              "stop_sequence": "END" if messages_reason == "stop_sequence" else None}
    assert convert_response(answer, source="messages", target="chat")["choices"][0]["finish_reason"] == chat_reason
    assert convert_response(answer, source="messages",
                            target="content")["candidates"][0]["finishReason"] == content_reason


@pytest.mark.parametrize("content_reason,chat_reason,messages_reason", [
    ("STOP", "stop", "end_turn"), ("MAX_TOKENS", "length", "max_tokens"), ("SAFETY", "content_filter", "refusal"),
    ("RECITATION", "content_filter", "refusal"), ("PROHIBITED_CONTENT", "content_filter", "refusal"),
    ("OTHER", "stop", "end_turn")])
def test_content_finish_reasons_map_to_each_dialect(content_reason, chat_reason, messages_reason):
    answer = {**CONTENT_ANSWER, "candidates": [{**CONTENT_ANSWER["candidates"][0], "finishReason": content_reason}]}
    assert convert_response(answer, source="content", target="chat")["choices"][0]["finish_reason"] == chat_reason
    assert convert_response(answer, source="content", target="messages")["stop_reason"] == messages_reason


def test_a_stop_sequence_survives_only_where_the_dialect_names_it():
    answer = {**MESSAGES_ANSWER, "content": [{"type": "text", "text": "a"}], "stop_reason": "stop_sequence",
              "stop_sequence": "END"}
    assert convert_response(answer, source="messages", target="messages")["stop_sequence"] == "END"
    assert convert_response(answer, source="messages", target="chat")["choices"][0]["finish_reason"] == "stop"


def test_a_blocked_prompt_in_content_is_a_content_filter_finish():
    blocked = {"promptFeedback": {"blockReason": "SAFETY"},
               "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}}
    chat = convert_response(blocked, source="content", target="chat")
    assert chat["choices"][0]["finish_reason"] == "content_filter"
    assert chat["choices"][0]["message"]["content"] is None


def test_same_dialect_answers_pass_with_the_public_model_name():
    assert convert_response(CHAT_ANSWER, source="chat", target="chat", model="public")["model"] == "public"
    assert convert_response(CONTENT_ANSWER, source="content", target="content", model="public") == {
        **CONTENT_ANSWER, "modelVersion": "public"}
    assert convert_response(MESSAGES_ANSWER, source="messages", target="messages") == MESSAGES_ANSWER


def test_ids_are_synthesised_in_the_target_style_when_the_upstream_gave_none():
    answer = {"candidates": [{"content": {"parts": [{"text": "hi"}], "role": "model"}, "finishReason": "STOP"}]}
    assert convert_response(answer, source="content", target="chat")["id"].startswith("chatcmpl-")
    assert convert_response(answer, source="content", target="messages")["id"].startswith("msg_")
    assert convert_response(answer, source="content", target="responses")["id"].startswith("resp_")
