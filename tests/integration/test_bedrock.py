"""Amazon Bedrock channels (issue 40) through the official SDKs, streamed and not.

The text function is served over real HTTP; behind it the Bedrock simulator checks each request
as Bedrock does (`simulators/rules/bedrock.py`: the SigV4 signature recomputed by botocore, the
body validated against botocore's service model, a bare Claude 4.5 id refused on demand, tool
blocks without a toolConfig refused, Claude's thinking rules) and answers real event-stream
frames. Every upstream request is recorded, to show what the gateway sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from gateway.prices import SHIPPED, usd_to_units
from gateway.store.usage import UsageRepository
from gateway.upstreams import bedrock as bedrock_client
from gateway_local.server import simulators_app
from gateway_local.simulators.rules import bedrock as rules
from gateway_local.simulators.rules import messages as messages_rules
from tests.conftest import serve_asgi

CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"  # needs an inference profile on demand
KEY = f"{rules.ACCESS_KEY}|{rules.SECRET_KEY}|us-east-1"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PROMPT = "What is the weather in Oslo? #tool"


class Recorder:
    """The simulators, with every request's path and body kept in order."""

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
        self.requests.append((scope["raw_path"].decode(), json.loads(body) if body else None))
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    def converse(self) -> list[tuple[str, dict[str, Any]]]:
        return [(unquote(p), b) for p, b in self.requests if "/converse" in p]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder(simulators_app())
    with serve_asgi(recorder) as url:
        yield recorder, url


def channel(url: str, name: str = "bedrock", *, key: str | None = KEY, suffix: str = "", **fields: Any) -> dict:
    entry = {"name": name, "protocol": "bedrock", "base_url": f"{url}/bedrock{suffix}",
             "models": ["m-small"], "model_map": {"m-small": CLAUDE}, **fields}
    if key is not None:
        entry["api_key"] = key
    return entry


@pytest.fixture
def bedrock(upstreams, catalog) -> Recorder:
    recorder, url = upstreams
    catalog([channel(url)])
    recorder.requests.clear()
    return recorder


def openai_client(gateway_url: str, demo: dict) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=demo["key"], max_retries=0)


def anthropic_client(gateway_url: str, demo: dict) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway_url, api_key=demo["key"], max_retries=0)


def genai_client(gateway_url: str, demo: dict) -> genai.Client:
    return genai.Client(api_key=demo["key"], http_options=genai_types.HttpOptions(
        base_url=gateway_url, api_version="v1beta"))


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])


# ---- text, by Claude 4.5's bare id ----

@STREAMS
def test_every_sdk_gets_text_from_claude_45_by_its_bare_id(bedrock, gateway_url, demo, stream):
    # Given a bedrock channel whose model_map names Claude Sonnet 4.5 by its bare id
    chat, messages, content = (openai_client(gateway_url, demo), anthropic_client(gateway_url, demo),
                               genai_client(gateway_url, demo))
    # When each SDK asks it
    if stream:
        with chat.chat.completions.stream(model="m-small", messages=[{"role": "user", "content": "hello chat"}],
                                          max_tokens=50) as events:
            chat_text = events.get_final_completion().choices[0].message.content
        with messages.messages.stream(model="m-small", max_tokens=50, system="Be brief.",
                                      messages=[{"role": "user", "content": "hello messages"}]) as events:
            messages_text = events.get_final_message().content[0].text
        content_text = "".join(c.text or "" for c in content.models.generate_content_stream(
            model="m-small", contents="hello content"))
        with chat.responses.stream(model="m-small", input="hello responses") as events:
            responses_text = events.get_final_response().output_text
    else:
        chat_text = chat.chat.completions.create(model="m-small", max_tokens=50, stop=["zzz"], messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello chat"}]).choices[0].message.content
        messages_text = messages.messages.create(
            model="m-small", max_tokens=50, system="Be brief.",
            messages=[{"role": "user", "content": "hello messages"}]).content[0].text  # type: ignore[union-attr]
        content_text = content.models.generate_content(model="m-small", contents="hello content").text
        responses_text = chat.responses.create(model="m-small", input="hello responses").output_text
    # Then each is answered, through the profile of the channel's geography
    assert chat_text == "You said: hello chat"
    assert messages_text == "You said: hello messages"
    assert content_text == "You said: hello content"
    assert responses_text == "You said: hello responses"
    paths = [p for p, _ in bedrock.converse()]
    assert paths and all(f"/model/us.{CLAUDE}/converse" in p for p in paths)


def test_an_image_a_system_prompt_and_stop_sequences_reach_converse(bedrock, gateway_url, demo):
    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    answer = openai_client(gateway_url, demo).chat.completions.create(model="m-small", max_tokens=40, stop=["END"],
                                                                       messages=[
        {"role": "system", "content": "Describe images."},
        {"role": "user", "content": [{"type": "text", "text": "what is this"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}]}])
    assert "attachment" in (answer.choices[0].message.content or "")
    _, body = bedrock.converse()[-1]
    assert body["system"] == [{"text": "Describe images."}]
    assert body["messages"][0]["content"][1] == {"image": {"format": "png", "source": {"bytes": png}}}
    assert body["inferenceConfig"] == {"maxTokens": 40, "stopSequences": ["END"]}


# ---- a two-turn tool loop whose second turn sends no tools ----

@STREAMS
def test_a_chat_tool_loop_whose_second_turn_sends_no_tools(bedrock, gateway_url, demo, stream):
    client = openai_client(gateway_url, demo)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]

    def ask(**options: Any) -> Any:
        if not stream:
            return client.chat.completions.create(model="m-small", messages=messages, **options)
        with client.chat.completions.stream(model="m-small", messages=messages, **options) as events:
            for _ in events:
                pass
            return events.get_final_completion()

    first = ask(tools=tools)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    messages.append(message)
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in message.tool_calls]
    second = ask()  # no tools this time
    assert second.choices[0].message.content
    _, body = bedrock.converse()[-1]
    assert body["toolConfig"] == {"tools": [{"toolSpec": {"name": "get_weather",
                                                           "inputSchema": {"json": {"type": "object"}}}}]}


@STREAMS
def test_a_messages_tool_loop_whose_second_turn_sends_no_tools(bedrock, gateway_url, demo, stream):
    client = anthropic_client(gateway_url, demo)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]

    def ask(**options: Any) -> Any:
        if not stream:
            return client.messages.create(model="m-small", max_tokens=500, messages=messages, **options)
        with client.messages.stream(model="m-small", max_tokens=500, messages=messages, **options) as events:
            return events.get_final_message()

    first = ask(tools=[{"name": "get_weather", "input_schema": WEATHER}])
    assert first.stop_reason == "tool_use"
    messages.append({"role": "assistant", "content": first.content})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "sunny"}
                                                 for b in first.content if b.type == "tool_use"]})
    second = ask()
    assert second.stop_reason == "end_turn" and second.content[0].text
    assert "toolConfig" in bedrock.converse()[-1][1]


@STREAMS
def test_a_content_tool_loop_whose_second_turn_sends_no_tools(bedrock, gateway_url, demo, stream):
    client = genai_client(gateway_url, demo)
    tools = genai_types.GenerateContentConfig(
        tools=[genai_types.Tool(function_declarations=[genai_types.FunctionDeclaration(
            name="get_weather", parameters_json_schema=WEATHER)])],
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True))
    contents: list[Any] = [genai_types.Content(role="user", parts=[genai_types.Part(text=PROMPT)])]

    def ask(config: Any = None) -> genai_types.Content:
        if not stream:
            answer = client.models.generate_content(model="m-small", contents=contents, config=config)
            assert answer.candidates and answer.candidates[0].content
            return answer.candidates[0].content
        parts: list[genai_types.Part] = []
        for chunk in client.models.generate_content_stream(model="m-small", contents=contents, config=config):
            if chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts:
                parts += chunk.candidates[0].content.parts
        return genai_types.Content(role="model", parts=parts)

    first = ask(tools)
    calls = [p.function_call for p in first.parts or [] if p.function_call]
    assert calls
    contents.append(first)
    contents.append(genai_types.Content(role="user", parts=[
        genai_types.Part.from_function_response(name=c.name or "", response={"output": "sunny"}) for c in calls]))
    second = ask()
    assert "".join(p.text or "" for p in second.parts or [])
    assert "toolConfig" in bedrock.converse()[-1][1]


# ---- a thinking tool loop, the returned message passed back unchanged ----

def assert_reasoning_came_back(recorder: Recorder) -> None:
    first, second = [b for _, b in recorder.converse()][-2:]
    assert first["additionalModelRequestFields"]["thinking"]["type"] == "enabled"
    assert second["additionalModelRequestFields"]["thinking"]["type"] == "enabled"
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    reasoning = assistant["content"][0]["reasoningContent"]["reasoningText"]
    assert reasoning["signature"] == messages_rules.signature_for("thinking", reasoning["text"])


@STREAMS
def test_a_chat_thinking_tool_loop(bedrock, gateway_url, demo, stream):
    client = openai_client(gateway_url, demo)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]

    def ask() -> Any:
        options = {"model": "m-small", "messages": messages, "tools": tools, "reasoning_effort": "low"}
        if not stream:
            return client.chat.completions.create(**options)
        with client.chat.completions.stream(**options) as events:
            for _ in events:
                pass
            return events.get_final_completion()

    first = ask()
    message = first.choices[0].message
    assert message.tool_calls
    messages.append(message)  # as the SDK returned it
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in message.tool_calls]
    assert ask().choices[0].message.content
    assert_reasoning_came_back(bedrock)


@STREAMS
def test_a_responses_thinking_tool_loop(bedrock, gateway_url, demo, stream):
    client = openai_client(gateway_url, demo)
    items: list[Any] = [{"role": "user", "content": PROMPT}]
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]

    def ask() -> Any:
        options = {"model": "m-small", "input": items, "tools": tools, "reasoning": {"effort": "low"}}
        if not stream:
            return client.responses.create(**options)
        with client.responses.stream(**options) as events:
            for _ in events:
                pass
            return events.get_final_response()

    first = ask()
    calls = [i for i in first.output if i.type == "function_call"]
    assert calls
    items += first.output
    items += [{"type": "function_call_output", "call_id": c.call_id, "output": "sunny"} for c in calls]
    assert ask().output_text
    assert_reasoning_came_back(bedrock)


@STREAMS
def test_a_messages_thinking_tool_loop(bedrock, gateway_url, demo, stream):
    client = anthropic_client(gateway_url, demo)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]

    def ask() -> Any:
        options = {"model": "m-small", "max_tokens": 4096, "messages": messages,
                   "tools": [{"name": "get_weather", "input_schema": WEATHER}],
                   "thinking": {"type": "enabled", "budget_tokens": 2048}}
        if not stream:
            return client.messages.create(**options)
        with client.messages.stream(**options) as events:
            return events.get_final_message()

    first = ask()
    assert first.stop_reason == "tool_use" and first.content[0].type == "thinking"
    messages.append({"role": "assistant", "content": first.content})  # unchanged
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "sunny"}
                                                 for b in first.content if b.type == "tool_use"]})
    second = ask()
    assert second.stop_reason == "end_turn"
    assert_reasoning_came_back(bedrock)


@STREAMS
def test_a_content_thinking_tool_loop(bedrock, gateway_url, demo, stream):
    client = genai_client(gateway_url, demo)
    config = genai_types.GenerateContentConfig(
        tools=[genai_types.Tool(function_declarations=[genai_types.FunctionDeclaration(
            name="get_weather", parameters_json_schema=WEATHER)])],
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
    contents.append(first)  # unchanged
    contents.append(genai_types.Content(role="user", parts=[
        genai_types.Part.from_function_response(name=c.name or "", response={"output": "sunny"}) for c in calls]))
    second = ask()
    assert "".join(p.text or "" for p in second.parts or [] if not p.thought)
    assert_reasoning_came_back(bedrock)


# ---- prompt caching, billed at the cache rates ----

def _ledger_entry(request_id: str) -> dict[str, Any]:
    return next(e for e in UsageRepository().ledger(1) if e["request_id"] == request_id)


@STREAMS
def test_a_cached_system_prompt_is_billed_at_the_cache_rates(bedrock, gateway_url, demo, stream):
    # Given a long system prompt marked for the cache, asked twice (a write, then a read)
    client = anthropic_client(gateway_url, demo)
    system = [{"type": "text", "text": f"You are careful ({stream}). " * 60,
               "cache_control": {"type": "ephemeral"}}]
    small = SHIPPED["m-small"]
    for turn in ("write", "read"):
        options = {"model": "m-small", "max_tokens": 50, "system": system,
                   "messages": [{"role": "user", "content": f"hello {turn}"}]}
        if stream:
            with client.messages.stream(**options) as events:
                answer, request_id = events.get_final_message(), events.response.headers["x-request-id"]
        else:
            raw = client.messages.with_raw_response.create(**options)
            answer, request_id = raw.parse(), raw.headers["x-request-id"]
        usage = answer.usage
        # Then Bedrock's cachePoint carried the mark, and the bill prices each bucket at its rate
        sent = bedrock.converse()[-1][1]
        assert sent["system"][-1] == {"cachePoint": {"type": "default"}}
        written, read = usage.cache_creation_input_tokens or 0, usage.cache_read_input_tokens or 0
        assert (written > 300 and not read) if turn == "write" else (read > 300 and not written)
        usd = (Decimal(usage.input_tokens) * small.input_per_million + Decimal(written) * small.cache_write_per_million
               + Decimal(read) * small.cached_input_per_million
               + Decimal(usage.output_tokens) * small.output_per_million) / 1_000_000
        entry = _ledger_entry(request_id)
        assert int(entry["units"]) == usd_to_units(usd)
        assert int(entry["detail"]["cached_input_tokens"]) == read
        assert int(entry["detail"]["input_tokens"]) == usage.input_tokens + written + read


# ---- failover: a throttled channel, a wrongly signed one ----

@pytest.mark.parametrize("broken", ["throttled", "wrongly-signed"])
@STREAMS
def test_a_throttled_or_wrongly_signed_channel_fails_over(upstreams, catalog, gateway_url, demo, broken, stream):
    recorder, url = upstreams
    bad = channel(url, "bad", priority=10, **({"suffix": "/fault/429"} if broken == "throttled" else
                                               {"key": f"{rules.ACCESS_KEY}|not-the-secret|us-east-1"}))
    catalog([bad, channel(url, "good")])
    recorder.requests.clear()
    client = openai_client(gateway_url, demo)
    if stream:
        with client.chat.completions.stream(model="m-small", messages=[{"role": "user", "content": "hi"}]) as events:
            text = events.get_final_completion().choices[0].message.content
    else:
        text = client.chat.completions.create(model="m-small",
                                              messages=[{"role": "user", "content": "hi"}]).choices[0].message.content
    assert text == "You said: hi"
    paths = [p for p, _ in recorder.converse()]
    assert len(paths) == 2 and ("/fault/429/" in paths[0]) == (broken == "throttled")


# ---- an exception frame mid-stream ----

def test_an_exception_mid_stream_ends_each_sdks_stream_with_an_error(bedrock, gateway_url, demo):
    prompt = "tell me more #fault=streamthrottle"
    raw = openai_client(gateway_url, demo).chat.completions.with_raw_response.create(
        model="m-small", messages=[{"role": "user", "content": prompt}], stream=True)
    request_id = raw.headers["x-request-id"]
    with pytest.raises(openai.APIError) as chat_error:
        for _ in raw.parse():
            pass
    assert "Too many requests" in str(chat_error.value)
    # and the bill is what was delivered: the prompt and the two pieces relayed, no more
    entry = _ledger_entry(request_id)
    assert entry["detail"]["outcome"] == "cut"
    assert int(entry["detail"]["output_tokens"]) == 2
    with pytest.raises(anthropic.APIError):
        with anthropic_client(gateway_url, demo).messages.stream(
                model="m-small", max_tokens=50, messages=[{"role": "user", "content": prompt}]) as events:
            for _ in events:
                pass
    with openai_client(gateway_url, demo).responses.stream(model="m-small", input=prompt) as events:
        last = [event for event in events][-1]
    assert last.type == "response.failed" and "Too many requests" in last.response.error.message
    from google.genai import errors as genai_errors

    content = genai_client(gateway_url, demo)  # kept: the SDK closes its connection pool with the client
    with pytest.raises(genai_errors.APIError) as content_error:
        for _ in content.models.generate_content_stream(model="m-small", contents=prompt):
            pass
    assert "Too many requests" in str(content_error.value)


# ---- credentials: the function's role, an API key ----

def test_the_functions_own_role_signs_with_its_session_token(upstreams, catalog, gateway_url, demo, monkeypatch):
    recorder, url = upstreams
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rules.ROLE_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rules.ROLE_SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", rules.ROLE_TOKEN)
    bedrock_client.reset_default_credentials()
    try:
        catalog([channel(url, key=None, region="us-east-1")])
        client = openai_client(gateway_url, demo)
        answer = client.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi role"}])
        with client.chat.completions.stream(model="m-small", messages=[{"role": "user", "content": "hi"}]) as events:
            streamed = events.get_final_completion()
    finally:
        bedrock_client.reset_default_credentials()
    assert answer.choices[0].message.content == "You said: hi role"
    assert streamed.choices[0].message.content == "You said: hi"


def test_a_channels_own_keys_never_take_the_environments_session_token(upstreams, catalog, gateway_url, demo,
                                                                       monkeypatch):
    # Given a function whose environment holds a role's session token, and a channel with keys of its own
    _, url = upstreams
    monkeypatch.setenv("AWS_SESSION_TOKEN", rules.ROLE_TOKEN)
    catalog([channel(url)])
    # Then the channel's request is signed without that token (the simulator refuses a stray one)
    answer = openai_client(gateway_url, demo).chat.completions.create(
        model="m-small", messages=[{"role": "user", "content": "hi keys"}])
    assert answer.choices[0].message.content == "You said: hi keys"


def test_a_bedrock_api_key_is_sent_as_a_bearer_token(upstreams, catalog, gateway_url, demo):
    _, url = upstreams
    catalog([channel(url, key=f"{rules.API_KEY}|eu-west-1")])
    answer = anthropic_client(gateway_url, demo).messages.create(
        model="m-small", max_tokens=50, messages=[{"role": "user", "content": "hi key"}])
    assert answer.content[0].text == "You said: hi key"


# ---- embeddings by InvokeModel ----

@pytest.mark.parametrize("model", ["amazon.titan-embed-text-v2:0", "cohere.embed-english-v3"])
def test_embeddings_through_invoke_model(upstreams, catalog, gateway_url, demo, model):
    _, url = upstreams
    catalog([{"name": "embed", "protocol": "bedrock", "base_url": f"{url}/bedrock", "api_key": KEY,
              "models": ["m-embed"], "model_map": {"m-embed": model}}])
    answer = openai_client(gateway_url, demo).embeddings.create(model="m-embed",
                                                                input=["first text", "second"])
    assert [d.index for d in answer.data] == [0, 1] and len(answer.data[0].embedding) > 100
    assert answer.usage.prompt_tokens > 0 and answer.model == "m-embed"


# ---- a profile no table knows, learned from Bedrock's refusal ----

def test_a_profile_no_table_knows_is_learned_from_the_refusal_and_billed_by_the_public_name(
        upstreams, catalog, gateway_url, demo):
    # Given a bare id the gateway's table does not list, that Bedrock serves only through a profile
    recorder, url = upstreams
    future = "anthropic.claude-opus-9-20300101-v1:0"
    catalog([{**channel(url, "learner", region="eu-west-1", key=f"{rules.ACCESS_KEY}|{rules.SECRET_KEY}|eu-west-1"),
              "model_map": {"m-small": future}}])
    recorder.requests.clear()
    client = anthropic_client(gateway_url, demo)
    # When it is asked, streamed first, then twice more
    with client.messages.stream(model="m-small", max_tokens=50, messages=[{"role": "user", "content": "hi"}]) as s:
        assert s.get_final_message().content[0].text == "You said: hi"  # type: ignore[union-attr]
    for _ in range(2):
        raw = client.messages.with_raw_response.create(model="m-small", max_tokens=50,
                                                       messages=[{"role": "user", "content": "hi"}])
        assert raw.parse().content[0].text == "You said: hi"  # type: ignore[union-attr]
    # Then the first answer came through the geography's profile after the refusal, the next directly
    paths = [p.split("/model/")[1] for p, _ in recorder.converse()]
    assert paths == [f"{future}/converse-stream", f"eu.{future}/converse-stream", f"eu.{future}/converse",
                     f"eu.{future}/converse"]
    # and the ledger names the public model
    assert _ledger_entry(raw.headers["x-request-id"])["model"] == "m-small"
