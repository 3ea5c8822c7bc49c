"""The simulated thinking upstreams refuse a tool loop's next turn as the real ones do (issue 30,
rows 1 and 2), and check requests against the official SDKs' request types
(`local/gateway_local/simulators/rules/`, whose docstrings cite each rule's source)."""

from __future__ import annotations

import pytest

from gateway_local.simulators.rules import content as content_rules
from gateway_local.simulators.rules import messages as messages_rules

from .test_simulators import CHAT, CONTENT, MESSAGES, post

TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]
THINKING = {"type": "enabled", "budget_tokens": 1500}


def first_turn() -> dict:
    """A messages answer with thinking and a tool call, from the simulator itself."""
    body = {"model": "m-small", "max_tokens": 4000, "thinking": THINKING, "tools": TOOLS,
            "messages": [{"role": "user", "content": "Weather? #tool"}]}
    answer = post("/messages/v1/messages", body, MESSAGES)
    assert answer.status_code == 200, answer.text
    return answer.json()


def second_turn(content: list, *, thinking: bool = True) -> dict:
    use = next(b for b in content if b["type"] == "tool_use")
    return {"model": "m-small", "max_tokens": 4000, "tools": TOOLS, **({"thinking": THINKING} if thinking else {}),
            "messages": [{"role": "user", "content": "Weather? #tool"}, {"role": "assistant", "content": content},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                       "content": "sunny"}]}]}


# ---- messages (row 1) ----

def test_messages_answers_the_next_turn_with_its_thinking_blocks_sent_back_whole():
    content = first_turn()["content"]
    assert [b["type"] for b in content] == ["thinking", "tool_use"] and content[0]["signature"]
    answer = post("/messages/v1/messages", second_turn(content), MESSAGES)
    assert answer.status_code == 200, answer.text


def test_messages_refuses_a_tool_loop_whose_final_assistant_message_lost_its_thinking():
    content = [b for b in first_turn()["content"] if b["type"] == "tool_use"]
    answer = post("/messages/v1/messages", second_turn(content), MESSAGES)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When "
        "`thinking` is enabled, a final `assistant` message must start with a thinking block")
    # and the documented way out: the same turn with thinking off is answered
    assert post("/messages/v1/messages", second_turn(content, thinking=False), MESSAGES).status_code == 200


def test_messages_refuses_a_thinking_block_it_did_not_sign():
    content = first_turn()["content"]
    content[0] = {**content[0], "thinking": content[0]["thinking"] + " (edited)"}
    answer = post("/messages/v1/messages", second_turn(content), MESSAGES)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_messages_refuses_thinking_in_a_final_assistant_message_when_thinking_is_off():
    thinking = first_turn()["content"][0]
    body = {"model": "m-small", "max_tokens": 100, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "So"}]}]}
    answer = post("/messages/v1/messages", body, MESSAGES)
    assert answer.status_code == 400
    assert "When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`" \
        in answer.json()["error"]["message"]


def test_messages_answers_with_a_redacted_block_for_the_documented_trigger_and_takes_it_back():
    prompt = f"Weather? #tool {messages_rules.REDACTED_TRIGGER}"
    body = {"model": "m-small", "max_tokens": 4000, "thinking": THINKING, "tools": TOOLS,
            "messages": [{"role": "user", "content": prompt}]}
    content = post("/messages/v1/messages", body, MESSAGES).json()["content"]
    assert [b["type"] for b in content] == ["thinking", "redacted_thinking", "tool_use"]
    follow = second_turn(content)
    follow["messages"][0]["content"] = prompt
    assert post("/messages/v1/messages", follow, MESSAGES).status_code == 200
    follow["messages"][1]["content"][1] = {"type": "redacted_thinking", "data": "forged"}
    assert post("/messages/v1/messages", follow, MESSAGES).status_code == 400


# ---- content (row 2) ----

GEMINI_TOOLS = [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": {"type": "object"}}]}]


def gemini_turns(call_part: dict) -> dict:
    return {"tools": GEMINI_TOOLS, "contents": [
        {"role": "user", "parts": [{"text": "Weather? #tool"}]},
        {"role": "model", "parts": [call_part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}]}]}


def gemini_first_call() -> dict:
    body = {"tools": GEMINI_TOOLS, "contents": [{"role": "user", "parts": [{"text": "Weather? #tool"}]}]}
    answer = post("/content/v1beta/models/m-small:generateContent", body, CONTENT)
    assert answer.status_code == 200, answer.text
    part = answer.json()["candidates"][0]["content"]["parts"][0]
    assert "functionCall" in part and part["thoughtSignature"]  # signed even with no thoughts asked for
    return part


def test_content_answers_the_next_turn_with_the_signature_sent_back():
    answer = post("/content/v1beta/models/m-small:generateContent", gemini_turns(gemini_first_call()), CONTENT)
    assert answer.status_code == 200, answer.text


def test_content_refuses_a_call_of_the_current_turn_without_its_signature():
    call = {k: v for k, v in gemini_first_call().items() if k != "thoughtSignature"}
    answer = post("/content/v1beta/models/m-small:generateContent", gemini_turns(call), CONTENT)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == (
        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
        "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
        "function call `default_api:get_weather` , position 2. Please refer to "
        "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")


@pytest.mark.parametrize("placeholder", content_rules.PLACEHOLDERS)
def test_content_takes_googles_documented_placeholders(placeholder):
    call = {**gemini_first_call(), "thoughtSignature": placeholder}
    assert post("/content/v1beta/models/m-small:generateContent", gemini_turns(call), CONTENT).status_code == 200


def test_content_refuses_a_signature_it_did_not_make_and_one_that_is_not_base64():
    call = gemini_first_call()
    forged = {**call, "thoughtSignature": content_rules.signature_for("other_tool", {})}
    answer = post("/content/v1beta/models/m-small:generateContent", gemini_turns(forged), CONTENT)
    assert answer.status_code == 400 and answer.json()["error"]["message"] == "Corrupted thought signature."
    broken = {**call, "thoughtSignature": "not.base64!"}
    answer = post("/content/v1beta/models/m-small:generateContent", gemini_turns(broken), CONTENT)
    assert answer.status_code == 400 and "thoughtSignature" in answer.json()["error"]["message"]


def test_content_checks_only_the_current_turn():
    # An unsigned call of an earlier turn (before the last user text) is not checked
    body = gemini_turns({"functionCall": {"name": "get_weather", "args": {}}})
    body["contents"] += [{"role": "model", "parts": [{"text": "Sunny."}]},
                         {"role": "user", "parts": [{"text": "Thanks"}]}]
    assert post("/content/v1beta/models/m-small:generateContent", body, CONTENT).status_code == 200


# ---- the SDKs' request types ----

@pytest.mark.parametrize("path,body,headers,said", [
    ("/messages/v1/messages", {"model": "m-small", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "txt", "text": "hi"}]}]}, MESSAGES, "messages.0.content.0.type"),
    ("/messages/v1/messages", {"model": "m-small", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "tool_result"}]}]}, MESSAGES,
     "messages.0.content.0.tool_use_id: Field required"),
    ("/chat/v1/chat/completions", {"model": "m-small", "messages": [
        {"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}, CHAT,
     "messages.1.tool_call_id: Field required"),
    ("/chat/v1/responses", {"model": "m-small", "input": [
        {"type": "function_call", "name": "f", "arguments": "{}"}]}, CHAT, "input.0.call_id: Field required"),
    ("/content/v1beta/models/m-small:generateContent", {"contents": [
        {"role": "user", "parts": [{"text": "hi", "vendorFlag": True}]}]}, CONTENT, "contents.0.parts.0.vendorFlag"),
])
def test_a_request_the_sdks_types_cannot_hold_is_refused(path, body, headers, said):
    answer = post(path, body, headers)
    assert answer.status_code == 400 and said in answer.json()["error"]["message"], answer.text


def test_messages_takes_a_later_step_of_the_turn_without_thinking_of_its_own():
    # the turn opens with its thinking; a later tool-calling message of the same turn needs none
    content = first_turn()["content"]
    body = second_turn(content)
    body["messages"] += [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_later", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_later", "content": "rain"}]}]
    assert post("/messages/v1/messages", body, MESSAGES).status_code == 200, "a later step needs no thinking"
    body["messages"][1]["content"] = [b for b in content if b["type"] == "tool_use"]
    answer = post("/messages/v1/messages", body, MESSAGES)
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("messages.1.content.0.type")
