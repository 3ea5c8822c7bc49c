"""What a thinking upstream needs back on the next turn of a tool loop, through every client dialect
(issue 30, rows 1 and 2; `formats.signatures`).

Row 1: a messages upstream with thinking on answers 400 "Expected `thinking` or
`redacted_thinking`, but found `tool_use`" when a tool loop's final assistant message does not open
with the thinking block it signed (docs.claude.com/en/docs/build-with-claude/extended-thinking,
"Preserving thinking blocks"). Row 2: a Gemini 3 content upstream answers 400 "Function call is
missing a thought_signature in functionCall parts" when a step's first call comes back without its
signature (ai.google.dev/gemini-api/docs/thought-signatures).
"""

from __future__ import annotations

import base64
import json

import pytest

from gateway.formats import StreamConverter, convert_request, convert_response

SIGNATURE = "EqQBCgIYAhIMsignedbytheupstream"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
GOOGLE_SIGNATURE = base64.b64encode(b"\x12\x9agemini-signed").decode()
TOOLS_CHAT = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]

# A messages upstream's answer with thinking, a redacted block and a tool call.
MESSAGES_ANSWER = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-up",
    "content": [{"type": "thinking", "thinking": "Weather needs a tool.", "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": REDACTED},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}}],
    "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 20}}

# A Gemini 3 answer: a parallel pair of calls, the first one signed.
CONTENT_ANSWER = {
    "candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": GOOGLE_SIGNATURE},
        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    "modelVersion": "gemini-up", "responseId": "r1"}

EXPECTED_BLOCKS = [{"type": "thinking", "thinking": "Weather needs a tool.", "signature": SIGNATURE},
                   {"type": "redacted_thinking", "data": REDACTED}]


def next_turn(dialect: str, answer: dict, *, thinking: bool = True) -> dict:
    """The client's next request after a tool call, built the way that dialect's SDK loop builds it:
    its answer's message / output items / content blocks / content appended unchanged, then the
    tool's result."""
    if dialect == "chat":
        message = answer["choices"][0]["message"]
        results = [{"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for c in message["tool_calls"]]
        return {"model": "m", "messages": [{"role": "user", "content": "Weather?"}, message, *results],
                "tools": TOOLS_CHAT, **({"reasoning_effort": "low"} if thinking else {})}
    if dialect == "responses":
        calls = [i for i in answer["output"] if i["type"] == "function_call"]
        return {"model": "m", "input": [{"role": "user", "content": "Weather?"}, *answer["output"],
                                        *({"type": "function_call_output", "call_id": c["call_id"], "output": "sunny"}
                                          for c in calls)],
                "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
                **({"reasoning": {"effort": "low"}} if thinking else {})}
    if dialect == "messages":
        uses = [b for b in answer["content"] if b["type"] == "tool_use"]
        return {"model": "m", "max_tokens": 8192, "messages": [
            {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u["id"], "content": "sunny"}
                                         for u in uses]}],
                "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
                **({"thinking": {"type": "enabled", "budget_tokens": 2048}} if thinking else {})}
    content = answer["candidates"][0]["content"]
    calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
    results = [{"functionResponse": {"name": c["name"], "response": {"output": "sunny"}}} for c in calls]
    return {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}, content,
                         {"role": "user", "parts": results}],
            "tools": [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": {"type": "object"}}]}],
            **({"generationConfig": {"thinkingConfig": {"thinkingBudget": 2048}}} if thinking else {})}


# ---- row 1: a messages upstream's thinking blocks ----

@pytest.mark.parametrize("client", ["chat", "responses", "content"])
def test_thinking_blocks_come_back_whole_through_every_client_dialect(client):
    # Given a messages upstream's answer with signed thinking, shown to a client of another dialect
    answer = convert_response(MESSAGES_ANSWER, source="messages", target=client)
    # When the client sends it back unchanged with the tool's result
    body = convert_request(next_turn(client, answer), source=client, target="messages", model="claude-up")
    # Then the final assistant message opens with the very blocks the upstream signed, thinking on
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["content"][:2] == EXPECTED_BLOCKS
    assert assistant["content"][2]["type"] == "tool_use"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


@pytest.mark.parametrize("client", ["chat", "responses", "content"])
def test_streamed_thinking_blocks_come_back_whole(client):
    # Given the same answer streamed, as the client's SDK accumulates it
    stream = messages_stream(MESSAGES_ANSWER)
    converter = StreamConverter("messages", client)
    events = [e for name, data in stream for e in converter.feed(name, data)] + converter.finish()
    answer = accumulate(client, events)
    body = convert_request(next_turn(client, answer), source=client, target="messages", model="claude-up")
    assert body["messages"][1]["content"][:2] == EXPECTED_BLOCKS and "thinking" in body


def test_a_messages_client_keeps_its_redacted_thinking():
    body = convert_request(next_turn("messages", MESSAGES_ANSWER), source="messages", target="chat", model="x")
    assert body["messages"][1]["role"] == "assistant"  # converted: nothing to carry to a chat channel
    # and to a messages channel it is the same dialect: passed through untouched
    same = convert_request(next_turn("messages", MESSAGES_ANSWER), source="messages", target="messages", model="x")
    assert same["messages"][1]["content"][:2] == EXPECTED_BLOCKS


@pytest.mark.parametrize("client", ["chat", "responses", "content"])
def test_a_client_that_dropped_the_blocks_gets_its_answer_with_thinking_off(client):
    # Given a client that kept the call but not the thinking (a hand-built history)
    answer = convert_response(MESSAGES_ANSWER, source="messages", target=client)
    request = next_turn(client, answer)
    if client == "chat":
        request["messages"][1] = {k: v for k, v in request["messages"][1].items() if k != "reasoning_details"}
    elif client == "responses":
        request["input"] = [i for i in request["input"] if i.get("type") != "reasoning"]
    else:
        request["contents"][1] = {"role": "model", "parts": [p for p in request["contents"][1]["parts"]
                                                             if not p.get("thought")]}
    body = convert_request(request, source=client, target="messages", model="claude-up")
    # Then the request goes with thinking off, which the upstream accepts, rather than its 400
    assert body["messages"][1]["content"][0]["type"] == "tool_use"
    assert "thinking" not in body


def test_blocks_of_another_vendor_or_a_forged_carrier_never_reach_a_messages_channel():
    request = {"model": "m", "reasoning_effort": "low", "tools": TOOLS_CHAT, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "reasoning_content": "unsigned thoughts",
         "reasoning_details": [{"type": "reasoning.text", "text": "x", "signature": "s", "format": "openai-v1"},
                               {"type": "reasoning.encrypted", "data": "zzz", "format": "google-gemini-v1"}],
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}
    body = convert_request(request, source="chat", target="messages", model="claude-up")
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use"] and "thinking" not in body
    responses = {"model": "m", "reasoning": {"effort": "low"}, "input": [
        {"role": "user", "content": "Weather?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gw1.bm90IGpzb24"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}
    body = convert_request(responses, source="responses", target="messages", model="claude-up")
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use"]


def test_a_prefilled_final_assistant_message_loses_its_thinking_when_thinking_is_off():
    # "When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`"
    answer = convert_response(MESSAGES_ANSWER, source="messages", target="chat")
    message = {k: v for k, v in answer["choices"][0]["message"].items() if k != "tool_calls"}
    message["content"] = "The answer is"
    body = convert_request({"model": "m", "messages": [{"role": "user", "content": "hi"}, message]},
                           source="chat", target="messages", model="claude-up")
    assert body["messages"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}


# ---- row 2: a content upstream's call signatures ----

@pytest.mark.parametrize("client", ["chat", "responses", "messages"])
def test_call_signatures_come_back_through_every_client_dialect(client):
    # Given a Gemini 3 answer with two parallel calls, the first signed, shown to another dialect
    answer = convert_response(CONTENT_ANSWER, source="content", target=client)
    # When the client sends it back unchanged with the tools' results
    body = convert_request(next_turn(client, answer), source=client, target="content", model="gemini-up")
    # Then the first call carries the upstream's own signature and the second none, as it came
    model_turn = body["contents"][1]
    assert model_turn["role"] == "model"
    calls = [p for p in model_turn["parts"] if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == GOOGLE_SIGNATURE and "thoughtSignature" not in calls[1]
    assert [c["functionCall"]["args"] for c in calls] == [{"city": "Oslo"}, {"city": "Rome"}]


@pytest.mark.parametrize("client", ["chat", "responses", "messages"])
def test_streamed_call_signatures_come_back(client):
    stream = [(None, {"candidates": [{"content": {"role": "model", "parts": CONTENT_ANSWER["candidates"][0]
                                                  ["content"]["parts"]}, "finishReason": "STOP"}],
                      "usageMetadata": CONTENT_ANSWER["usageMetadata"], "responseId": "r1"})]
    converter = StreamConverter("content", client)
    events = [e for name, data in stream for e in converter.feed(name, data)] + converter.finish()
    answer = accumulate(client, events)
    body = convert_request(next_turn(client, answer), source=client, target="content", model="gemini-up")
    calls = [p for p in body["contents"][1]["parts"] if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == GOOGLE_SIGNATURE


def test_googles_openai_compatible_form_is_read_too():
    request = {"model": "m", "tools": TOOLS_CHAT, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"},
             "extra_content": {"google": {"thought_signature": GOOGLE_SIGNATURE}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}
    body = convert_request(request, source="chat", target="content", model="gemini-up")
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == GOOGLE_SIGNATURE


@pytest.mark.parametrize("client", ["chat", "responses", "messages"])
def test_a_call_that_came_back_unsigned_gets_googles_placeholder(client):
    # Given a history whose calls carry no signature (dropped by the client, or made elsewhere)
    answer = convert_response(CONTENT_ANSWER, source="content", target=client)
    request = next_turn(client, answer)
    if client == "chat":
        request["messages"][1] = {k: v for k, v in request["messages"][1].items() if k != "reasoning_details"}
    elif client == "responses":
        request["input"] = [i for i in request["input"] if i.get("type") != "reasoning"]
    else:
        request["messages"][1]["content"] = [b for b in request["messages"][1]["content"] if b["type"] == "tool_use"]
    body = convert_request(request, source=client, target="content", model="gemini-up")
    calls = [p for p in body["contents"][1]["parts"] if "functionCall" in p]
    # Then the first call of the step gets the value Google documents for that case
    assert calls[0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in calls[1]


def test_a_messages_signature_never_reaches_a_content_channel_nor_the_reverse():
    # A messages client's thinking block goes nowhere but a messages channel
    body = convert_request(next_turn("messages", MESSAGES_ANSWER), source="messages", target="content", model="g")
    parts = body["contents"][1]["parts"]
    assert [list(p) for p in parts] == [["functionCall", "thoughtSignature"]]
    assert parts[0]["thoughtSignature"] == "skip_thought_signature_validator"
    # A content client's call signature goes nowhere but a content channel
    body = convert_request(next_turn("content", CONTENT_ANSWER), source="content", target="messages", model="c")
    assert all(b["type"] == "tool_use" for b in body["messages"][1]["content"])


# ---- how each client dialect's SDK accumulates a stream (the state its loop appends) ----

def messages_stream(answer: dict) -> list[tuple[str, dict]]:
    events = [("message_start", {"type": "message_start", "message": {**answer, "content": [], "stop_reason": None}})]
    for index, block in enumerate(answer["content"]):
        if block["type"] == "thinking":
            events += [("content_block_start", {"type": "content_block_start", "index": index, "content_block":
                                                {"type": "thinking", "thinking": "", "signature": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "signature_delta", "signature": block["signature"]}})]
        elif block["type"] == "tool_use":
            events += [("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {**block, "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events + [("message_delta", {"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"]},
                                        "usage": {"output_tokens": 20}}),
                     ("message_stop", {"type": "message_stop"})]


def accumulate(client: str, events: list) -> dict:
    """The whole answer the client's SDK builds from the stream's events."""
    datas = [data for _, data in events if isinstance(data, dict)]
    if client == "chat":
        from openai.lib.streaming.chat import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk

        state = ChatCompletionStreamState()
        for data in datas:
            state.handle_chunk(ChatCompletionChunk.model_validate(data))
        message = state.get_final_completion().choices[0].message
        return {"choices": [{"message": message.model_dump(exclude_unset=True, exclude_none=True)}]}
    if client == "responses":
        return next(d["response"] for d in datas if d["type"] == "response.completed")
    if client == "messages":
        from anthropic.lib.streaming._messages import accumulate_event
        from anthropic.types import RawMessageStreamEvent
        from pydantic import TypeAdapter

        snapshot, buffers = None, {}
        for data in datas:
            snapshot = accumulate_event(event=TypeAdapter(RawMessageStreamEvent).validate_python(data),
                                        current_snapshot=snapshot, json_bufs=buffers)
        assert snapshot is not None
        return snapshot.model_dump(exclude_unset=True)
    # content: the google-genai loop keeps every streamed part, in order
    parts = [p for d in datas for p in d["candidates"][0]["content"]["parts"] if p != {"text": ""}]
    return {"candidates": [{"content": {"role": "model", "parts": parts}}]}


# ---- a turn another channel served, relayed to a channel of the client's own dialect ----

def test_a_messages_client_history_from_a_content_channel_is_relayable_to_a_messages_channel():
    # Given a messages client whose last turn a content channel served (its call signature sealed in
    # a thinking block), now routed to a messages channel
    answer = convert_response(CONTENT_ANSWER, source="content", target="messages")
    body = convert_request(next_turn("messages", answer), source="messages", target="messages", model="claude-up")
    # Then that block, which this upstream would refuse as an invalid signature, is taken out, and
    # thinking is off for the turn since the tool loop's message no longer opens with thinking
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use", "tool_use"]
    assert "thinking" not in body
    # while its own blocks pass untouched
    own = convert_request(next_turn("messages", MESSAGES_ANSWER), source="messages", target="messages", model="c")
    assert own["messages"][1]["content"][:2] == EXPECTED_BLOCKS and "thinking" in own


def test_a_content_client_history_from_a_messages_channel_is_relayable_to_a_content_channel():
    answer = convert_response(MESSAGES_ANSWER, source="messages", target="content")
    body = convert_request(next_turn("content", answer), source="content", target="content", model="gemini-up")
    parts = body["contents"][1]["parts"]
    assert not [p for p in parts if p.get("thought") and p.get("thoughtSignature")]
    calls = [p for p in parts if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == "skip_thought_signature_validator"
    # and a content upstream's own signatures pass untouched
    own = convert_request(next_turn("content", CONTENT_ANSWER), source="content", target="content", model="g")
    assert own["contents"][1]["parts"][0]["thoughtSignature"] == GOOGLE_SIGNATURE


def test_a_responses_client_history_from_another_channel_is_relayable_to_a_chat_channel():
    answer = convert_response(MESSAGES_ANSWER, source="messages", target="responses")
    request = next_turn("responses", answer)
    request["input"].insert(1, {"type": "reasoning", "id": "rs_openai", "summary": [],
                                "encrypted_content": "gAAAAABopenai-own"})
    body = convert_request(request, source="responses", target="responses", model="gpt-up")
    reasoning = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert [i["id"] for i in reasoning] == ["rs_openai"]  # only the upstream's own


def test_a_later_step_of_the_same_turn_needs_no_thinking_of_its_own():
    # Claude thinks once per assistant turn (without interleaved thinking): the turn's later
    # tool-calling messages carry no block, and thinking stays on
    answer = convert_response(MESSAGES_ANSWER, source="messages", target="chat")
    request = next_turn("chat", answer)
    call = {"id": "toolu_02", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    later = {"role": "assistant", "content": None, "tool_calls": [call]}
    request["messages"] += [later, {"role": "tool", "tool_call_id": "toolu_02", "content": "rain"}]
    body = convert_request(request, source="chat", target="messages", model="claude-up")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["messages"][1]["content"][:2] == EXPECTED_BLOCKS
    assert body["messages"][3]["content"][0]["type"] == "tool_use"


@pytest.mark.parametrize("carrier", [
    "gw1." + base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode(),
    "gw1.!!!", "gw1." + base64.urlsafe_b64encode(b'{"o": "messages", "b": {"type": "thinking"}}').decode(),
    "gw1." + base64.urlsafe_b64encode(b'{"o": "elsewhere", "b": {}}').decode()])
def test_a_hostile_or_broken_carrier_is_dropped_not_a_500(carrier):
    request = {"model": "m", "reasoning": {"effort": "low"}, "input": [
        {"role": "user", "content": "Weather?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": carrier},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}
    for target in ("messages", "content"):
        body = convert_request(request, source="responses", target=target, model="up")
        assert body  # converted, with the carrier left out
    assert "thinking" not in convert_request(request, source="responses", target="messages", model="up")
