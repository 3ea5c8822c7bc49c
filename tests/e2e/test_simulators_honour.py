"""Under the default `make run`, clients that rely on structured output and tool loops work as
they do against the real upstreams: the official SDKs' parse helpers get a parsed object, a
forced tool choice is obeyed in each dialect, and an agent framework's loop ends."""

from __future__ import annotations

import asyncio
import json

import anthropic
import jsonschema
import openai
import pytest
from google import genai
from google.genai import types
from pydantic import BaseModel

from tests.e2e.conftest import DEMO_KEY


class CalendarEvent(BaseModel):
    name: str
    date: str
    participants: list[str]


def test_chat_completions_parse_returns_a_parsed_object(openai_client):
    answer = openai_client.chat.completions.parse(
        model="m-small", response_format=CalendarEvent,
        messages=[{"role": "user", "content": "Alice and Bob go to a science fair on Friday."}])
    event = answer.choices[0].message.parsed
    assert isinstance(event, CalendarEvent) and event.participants
    assert answer.choices[0].finish_reason == "stop"


def test_a_streamed_json_answer_joins_into_a_value_of_the_schema(openai_client):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}, "s": {"type": "string"}},
              "required": ["n", "s"], "additionalProperties": False}
    text = "".join(chunk.choices[0].delta.content or "" for chunk in openai_client.chat.completions.create(
        model="m-small", stream=True, messages=[{"role": "user", "content": "count"}],
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": True}})
        if chunk.choices)
    jsonschema.validate(json.loads(text), schema)


def test_responses_parse_returns_a_parsed_object(openai_client):
    answer = openai_client.responses.parse(model="m-small", input="Alice meets Bob on Friday.",
                                           text_format=CalendarEvent)
    assert isinstance(answer.output_parsed, CalendarEvent)


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_a_named_tool_choice_is_obeyed_and_a_tool_result_ends_the_calls(openai_client):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    messages: list = [{"role": "user", "content": "Paris please"}]
    first = openai_client.chat.completions.create(
        model="m-small", messages=messages, tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_time"}})
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_time" and first.choices[0].finish_reason == "tool_calls"
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "12:00"}]
    second = openai_client.chat.completions.create(model="m-small", messages=messages, tools=tools,
                                                   tool_choice="required")
    assert not second.choices[0].message.tool_calls and second.choices[0].finish_reason == "stop"


def test_anthropic_tool_choice_any_and_tool_are_obeyed(gateway_url):
    client = anthropic.Anthropic(api_key=DEMO_KEY, base_url=gateway_url, max_retries=0)
    tools = [{"name": "get_weather", "input_schema": WEATHER}, {"name": "get_time", "input_schema": {"type": "object"}}]
    forced = client.messages.create(model="m-small", max_tokens=200, tools=tools,
                                    tool_choice={"type": "tool", "name": "get_weather"},
                                    messages=[{"role": "user", "content": "hello"}])
    block = forced.content[0]
    assert forced.stop_reason == "tool_use" and block.type == "tool_use" and block.name == "get_weather"
    jsonschema.validate(block.input, WEATHER)
    after = client.messages.create(model="m-small", max_tokens=200, tools=tools, tool_choice={"type": "any"},
                                   messages=[{"role": "user", "content": "hello"},
                                             {"role": "assistant", "content": forced.content},
                                             {"role": "user", "content": [{"type": "tool_result",
                                                                           "tool_use_id": block.id,
                                                                           "content": "sunny"}]}])
    assert after.stop_reason == "end_turn" and after.content[0].type == "text"


def test_google_forced_function_calling_and_json_schema_are_obeyed(gateway_url):
    client = genai.Client(api_key=DEMO_KEY, http_options={"base_url": gateway_url, "api_version": "v1beta"})
    weather = types.FunctionDeclaration(name="get_weather", parameters_json_schema=WEATHER)
    answer = client.models.generate_content(
        model="m-small", contents="hello",
        config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[weather])],
            tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["get_weather"]))))
    assert answer.function_calls and answer.function_calls[0].name == "get_weather"
    jsonschema.validate(answer.function_calls[0].args, WEATHER)
    parsed = client.models.generate_content(
        model="m-small", contents="Alice meets Bob on Friday.",
        config=types.GenerateContentConfig(response_mime_type="application/json", response_schema=CalendarEvent))
    assert isinstance(parsed.parsed, CalendarEvent)
    mood = client.models.generate_content(
        model="m-small", contents="how do you feel?",
        config=types.GenerateContentConfig(response_mime_type="text/x.enum",
                                           response_schema={"type": "STRING", "enum": ["calm", "busy"]}))
    assert mood.text == "calm"


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_an_agents_sdk_run_with_one_function_tool_finishes_in_two_turns(gateway_url, api):
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    async def run():
        client = openai.AsyncOpenAI(api_key=DEMO_KEY, base_url=f"{gateway_url}/v1", max_retries=0)
        model = (OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel)(
            model="m-small", openai_client=client)
        agent = Agent(name="forecaster", instructions="Answer with the weather.", tools=[get_weather], model=model)
        return await Runner.run(agent, "What is the weather in Paris? Use get_weather.", max_turns=2)

    result = asyncio.run(run())
    assert len(result.raw_responses) == 2 and len(calls) == 1
    assert isinstance(result.final_output, str) and result.final_output
