"""The official SDKs talk to the simulators directly over HTTP: proof the simulators speak each
wire protocol faithfully (shapes, streams, usage, errors)."""

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from gateway.tokens import estimate_tokens
from gateway_local.simulators._text import tokenize

ANSWER = "You said: Hello there"
ANSWER_TOKENS = len(tokenize(ANSWER))  # the simulators emit one token per piece


@pytest.fixture
def oa(sim_url):
    return openai.OpenAI(api_key="sk-sim", base_url=f"{sim_url}/chat/v1", max_retries=0)


@pytest.fixture
def an(sim_url):
    return anthropic.Anthropic(api_key="sk-ant-sim", base_url=f"{sim_url}/messages", max_retries=0)


@pytest.fixture
def gg(sim_url):
    return genai.Client(api_key="sim-key", http_options=genai_types.HttpOptions(
        base_url=f"{sim_url}/content", api_version="v1beta"))


# --- openai --------------------------------------------------------------------------------------

def test_openai_chat_completion(oa):
    completion = oa.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "Hello there"}])
    assert completion.choices[0].message.content == "You said: Hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens == ANSWER_TOKENS and completion.usage.total_tokens > ANSWER_TOKENS


def test_openai_chat_stream_with_usage(oa):
    stream = oa.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "Hello there"}],
                                        stream=True, stream_options={"include_usage": True}, max_tokens=4)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: Hell"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4


def test_openai_chat_tool_call(oa):
    completion = oa.chat.completions.create(
        model="m-small", messages=[{"role": "user", "content": "weather please #tool"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
    call = completion.choices[0].message.tool_calls[0]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and call.function.arguments == '{"text": "weather please"}'


def test_openai_responses_plain_and_streamed(oa):
    response = oa.responses.create(model="m-small", input="Hello there")
    assert response.output_text == "You said: Hello there"
    assert response.status == "completed" and response.usage.output_tokens == ANSWER_TOKENS
    with oa.responses.stream(model="m-small", input="Hello there") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "You said: Hello there" == final.output_text
    assert final.usage.total_tokens == final.usage.input_tokens + ANSWER_TOKENS


def test_openai_responses_incomplete_at_max_output_tokens(oa):
    response = oa.responses.create(model="m-small", input="Hello there " * 20, max_output_tokens=16)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


def test_openai_responses_compact(oa):
    compacted = oa.responses.compact(model="m-small", input=[{"role": "user", "content": "Hello there"}])
    assert compacted.object == "response.compaction"
    assert compacted.output[-1].type == "compaction"


def test_openai_embeddings_in_both_encodings(oa):
    default = oa.embeddings.create(model="e-small", input=["Hello", "there"])  # the SDK asks for base64
    floats = oa.embeddings.create(model="e-small", input=["Hello", "there"], encoding_format="float")
    assert len(default.data) == 2 and len(default.data[0].embedding) == 16
    assert default.data[0].embedding == pytest.approx(floats.data[0].embedding, abs=1e-6)
    expected = estimate_tokens("Hello") + estimate_tokens("there")
    assert default.usage.prompt_tokens == floats.usage.prompt_tokens == expected
    assert len(oa.embeddings.create(model="e-small", input=[1, 2, 3], dimensions=8).data[0].embedding) == 8


def test_openai_models(oa):
    assert "m-small" in [m.id for m in oa.models.list()]


def test_openai_errors(oa, sim_url):
    with pytest.raises(openai.RateLimitError):
        oa.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi #fault=429"}])
    broken = openai.OpenAI(api_key="sk-sim", base_url=f"{sim_url}/chat/fault/500/v1", max_retries=0)
    with pytest.raises(openai.InternalServerError):
        broken.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as caught:
        oa.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}], temperature=5)
    assert "temperature" in str(caught.value)


# --- anthropic -----------------------------------------------------------------------------------

def test_anthropic_message(an):
    message = an.messages.create(model="m-small", max_tokens=100, messages=[{"role": "user", "content": "Hello there"}])
    assert message.content[0].text == "You said: Hello there"
    assert message.stop_reason == "end_turn" and message.usage.output_tokens == ANSWER_TOKENS


def test_anthropic_stream(an):
    with an.messages.stream(model="m-small", max_tokens=4,
                            messages=[{"role": "user", "content": "Hello there"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "You said: Hell" == final.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 4


def test_anthropic_thinking_and_tool_use_stream(an):
    with an.messages.stream(model="m-small", max_tokens=3000, thinking={"type": "enabled", "budget_tokens": 2000},
                            tools=[{"name": "echo", "input_schema": {"type": "object"}}],
                            messages=[{"role": "user", "content": "repeat #tool"}]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert final.content[1].input == {"text": "repeat"} and final.stop_reason == "tool_use"


def test_anthropic_stop_sequence(an):
    message = an.messages.create(model="m-small", max_tokens=100, stop_sequences=["there"],
                                 messages=[{"role": "user", "content": "Hello there"}])
    assert message.content[0].text == "You said: Hello "
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "there"


def test_anthropic_errors(an, sim_url):
    with pytest.raises(anthropic.RateLimitError):
        an.messages.create(model="m-small", max_tokens=10, messages=[{"role": "user", "content": "hi #fault=429"}])
    overloaded = anthropic.Anthropic(api_key="k", base_url=f"{sim_url}/messages/fault/529", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        overloaded.messages.create(model="m-small", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 529


# --- google-genai --------------------------------------------------------------------------------

def test_genai_generate_content(gg):
    response = gg.models.generate_content(model="m-small", contents="Hello there")
    assert response.text == "You said: Hello there"
    assert response.candidates[0].finish_reason == genai_types.FinishReason.STOP
    assert response.usage_metadata.candidates_token_count == ANSWER_TOKENS


def test_genai_stream(gg):
    chunks = list(gg.models.generate_content_stream(
        model="m-small", contents="Hello there", config=genai_types.GenerateContentConfig(max_output_tokens=4)))
    assert "".join(c.text or "" for c in chunks) == "You said: Hell"
    assert chunks[-1].candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS
    assert chunks[-1].usage_metadata.candidates_token_count == 4


def test_genai_function_call(gg):
    response = gg.models.generate_content(
        model="m-small", contents="look it up #tool",
        config=genai_types.GenerateContentConfig(tools=[genai_types.Tool(function_declarations=[
            genai_types.FunctionDeclaration(name="lookup", parameters={"type": "OBJECT"})])]))
    assert response.function_calls[0].name == "lookup" and response.function_calls[0].args == {"text": "look it up"}


def test_genai_count_tokens_and_embed(gg):
    assert gg.models.count_tokens(model="m-small", contents="Hello there").total_tokens >= 2
    embedding = gg.models.embed_content(model="m-small", contents="Hello")
    assert len(embedding.embeddings[0].values) == 16


def test_genai_errors(gg, sim_url):
    with pytest.raises(genai_errors.ClientError) as caught:
        gg.models.generate_content(model="m-small", contents="hi #fault=429")
    assert caught.value.code == 429
    broken = genai.Client(api_key="k", http_options=genai_types.HttpOptions(
        base_url=f"{sim_url}/content/fault/500", api_version="v1beta"))
    with pytest.raises(genai_errors.ServerError):
        broken.models.generate_content(model="m-small", contents="hi")
