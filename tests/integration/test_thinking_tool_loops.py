"""Two-turn tool loops on thinking models, with the official SDKs, in every client dialect, against
each thinking upstream (issue 30, deliver item 2).

The text function is served over real HTTP; the simulated upstreams behind it sign their thinking
and check it comes back as the real ones do (`simulators/rules`: a messages upstream with thinking
on refuses a tool loop whose final assistant message does not open with the block it signed; a
Gemini 3 content upstream refuses a step's first function call without its signature). Each loop
is written as the SDK's own examples write it: the returned message, output items, content blocks
or content appended unchanged, then the tools' results. The upstream's second request is recorded,
to show it got back the very state it signed, not a fallback.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from gateway_local.server import simulators_app
from gateway_local.simulators.rules import content as content_rules
from gateway_local.simulators.rules import messages as messages_rules
from tests.conftest import serve_asgi

PROMPT = "What is the weather in Oslo? #tool"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class Recorder:
    """The simulators, with every request body they get kept in order."""

    def __init__(self, app: Any):
        self.app = app
        self.requests: list[tuple[str, Any]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        self.requests.append((scope["path"], json.loads(body) if body else None))
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder(simulators_app())
    with serve_asgi(recorder) as url:
        yield recorder, url


@pytest.fixture(params=["messages", "content"])
def upstream(request, upstreams, catalog) -> tuple[str, Recorder]:
    """The one channel of the model: a thinking upstream speaking `messages` or `content`."""
    recorder, url = upstreams
    catalog([{"name": f"thinking-{request.param}", "protocol": request.param, "base_url": f"{url}/{request.param}",
              "api_key": "sk-upstream", "models": ["*"]}])
    recorder.requests.clear()
    return request.param, recorder


def generation_bodies(recorder: Recorder) -> list[dict[str, Any]]:
    return [body for path, body in recorder.requests
            if path.endswith("/v1/messages") or "generateContent" in path or "streamGenerateContent" in path]


def assert_state_came_back(protocol: str, recorder: Recorder) -> None:
    """The upstream's second request holds, unchanged, what it signed in its first answer."""
    first, second = generation_bodies(recorder)[-2:]
    if protocol == "messages":
        assert "thinking" in second, "thinking was turned off: the block did not come back"
        assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
        block = assistant["content"][0]
        assert block["type"] == "thinking"
        assert block["signature"] == messages_rules.signature_for("thinking", block["thinking"])
        assert "thinking" in first
    else:
        model_turn = [c for c in second["contents"] if c.get("role") == "model"][-1]
        call = next(p for p in model_turn["parts"] if "functionCall" in p)
        signed = content_rules.signature_for(call["functionCall"]["name"], call["functionCall"]["args"])
        given = call["thoughtSignature"]
        assert base64.b64decode(given.replace("-", "+").replace("_", "/")) == base64.b64decode(signed)


# ---- chat ----

CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                "parameters": WEATHER}}]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_chat_client_tool_loop(upstream, gateway_url, demo, stream):
    protocol, recorder = upstream
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=demo["key"], max_retries=0)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]

    def ask():
        options = {"model": "m-small", "messages": messages, "tools": CHAT_TOOLS, "reasoning_effort": "low"}
        if not stream:
            return client.chat.completions.create(**options)
        with client.chat.completions.stream(**options) as events:
            for _ in events:
                pass
            return events.get_final_completion()

    first = ask()
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and message.tool_calls
    messages.append(message)  # as the SDK returned it
    for call in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    second = ask()
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content
    assert_state_came_back(protocol, recorder)


def test_a_chat_client_that_rebuilds_the_message_by_hand_still_gets_its_answer(upstream, gateway_url, demo):
    # Given a client that keeps only the documented fields of the assistant message
    protocol, recorder = upstream
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=demo["key"], max_retries=0)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    first = client.chat.completions.create(model="m-small", messages=messages, tools=CHAT_TOOLS,
                                           reasoning_effort="low")
    calls = first.choices[0].message.tool_calls
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for c in calls]})
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in calls]
    # When it sends the next turn, the upstream is asked in a way it accepts, and it answers
    second = client.chat.completions.create(model="m-small", messages=messages, tools=CHAT_TOOLS,
                                            reasoning_effort="low")
    assert second.choices[0].message.content
    upstream_request = generation_bodies(recorder)[-1]
    if protocol == "messages":
        assert "thinking" not in upstream_request  # thinking off for that turn, as the upstream allows
    else:
        call = next(p for p in upstream_request["contents"][1]["parts"] if "functionCall" in p)
        assert call["thoughtSignature"] == "skip_thought_signature_validator"


# ---- responses ----

RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city.",
                    "parameters": WEATHER}]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_responses_client_tool_loop(upstream, gateway_url, demo, stream):
    protocol, recorder = upstream
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=demo["key"], max_retries=0)
    items: list[Any] = [{"role": "user", "content": PROMPT}]

    def ask():
        options = {"model": "m-small", "input": items, "tools": RESPONSES_TOOLS, "reasoning": {"effort": "low"}}
        if not stream:
            return client.responses.create(**options)
        with client.responses.stream(**options) as events:
            for _ in events:
                pass
            return events.get_final_response()

    first = ask()
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls
    items += first.output  # the output items, unchanged
    items += [{"type": "function_call_output", "call_id": c.call_id, "output": "sunny"} for c in calls]
    second = ask()
    assert second.output_text and not [i for i in second.output if i.type == "function_call"]
    assert_state_came_back(protocol, recorder)


# ---- messages ----

MESSAGES_TOOLS = [{"name": "get_weather", "description": "The weather in a city.", "input_schema": WEATHER}]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_messages_client_tool_loop(upstream, gateway_url, demo, stream):
    protocol, recorder = upstream
    client = anthropic.Anthropic(base_url=gateway_url, api_key=demo["key"], max_retries=0)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]

    def ask():
        options = {"model": "m-small", "max_tokens": 4096, "messages": messages, "tools": MESSAGES_TOOLS,
                   "thinking": {"type": "enabled", "budget_tokens": 2048}}
        if not stream:
            return client.messages.create(**options)
        with client.messages.stream(**options) as events:
            return events.get_final_message()

    first = ask()
    assert first.stop_reason == "tool_use"
    messages.append({"role": "assistant", "content": first.content})  # the content blocks, unchanged
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": block.id, "content": "sunny"}
        for block in first.content if block.type == "tool_use"]})
    second = ask()
    assert second.stop_reason == "end_turn" and any(b.type == "text" and b.text for b in second.content)
    assert_state_came_back(protocol, recorder)


# ---- content ----

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_content_client_tool_loop(upstream, gateway_url, demo, stream):
    protocol, recorder = upstream
    client = genai.Client(api_key=demo["key"], http_options=genai_types.HttpOptions(
        base_url=gateway_url, api_version="v1beta"))
    config = genai_types.GenerateContentConfig(
        tools=[genai_types.Tool(function_declarations=[genai_types.FunctionDeclaration(
            name="get_weather", description="The weather in a city.", parameters_json_schema=WEATHER)])],
        thinking_config=genai_types.ThinkingConfig(thinking_budget=2048, include_thoughts=True),
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True))
    contents: list[Any] = [genai_types.Content(role="user", parts=[genai_types.Part(text=PROMPT)])]

    def ask() -> genai_types.Content:
        if not stream:
            answer = client.models.generate_content(model="m-small", contents=contents, config=config)
            assert answer.candidates and answer.candidates[0].content
            return answer.candidates[0].content
        parts: list[genai_types.Part] = []
        for chunk in client.models.generate_content_stream(model="m-small", contents=contents, config=config):
            if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
                parts += chunk.candidates[0].content.parts
        return genai_types.Content(role="model", parts=parts)

    first = ask()
    calls = [p.function_call for p in first.parts or [] if p.function_call]
    assert calls
    contents.append(first)  # the model's content, unchanged
    contents.append(genai_types.Content(role="user", parts=[
        genai_types.Part.from_function_response(name=call.name or "", response={"output": "sunny"}) for call in calls]))
    second = ask()
    assert "".join(p.text or "" for p in second.parts or [] if not p.thought)
    assert not [p for p in second.parts or [] if p.function_call]
    assert_state_came_back(protocol, recorder)
