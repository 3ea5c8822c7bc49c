"""The text routes through the local gateway with the official openai, anthropic and google-genai
SDKs, over real HTTP, streamed and not.

Each call must move the key's usage (GET /v1/dashboard/billing/usage, in cents) by exactly the
price of the tokens the SDK was told about: `token_cost` of the answer's own usage. A bad field
gets a 4xx in the dialect's envelope and costs nothing.
"""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from gateway.prices import SHIPPED, UNITS_PER_USD, token_cost
from tests.e2e.conftest import usage_cents

pytestmark = pytest.mark.e2e

MODEL = "m-small"
ANSWER = "You said: Hello there"
CENTS_PER_UNIT = 100 / UNITS_PER_USD


def cents(input_tokens: int, output_tokens: int, cached: int = 0, model: str = MODEL, written: int = 0) -> float:
    return token_cost(SHIPPED[model], input_tokens=input_tokens, output_tokens=output_tokens,
                      cached_input_tokens=cached, cache_write_tokens=written) * CENTS_PER_UNIT


@pytest.fixture
def spent(http, demo_key):
    """Call it before and after: the cents the calls in between cost."""
    start = usage_cents(http, demo_key)
    return lambda: usage_cents(http, demo_key) - start


@pytest.fixture
def oa(openai_client):
    return openai_client


@pytest.fixture
def an(gateway_url, demo_key):
    with anthropic.Anthropic(api_key=demo_key, base_url=gateway_url, max_retries=0, timeout=60) as sdk:
        yield sdk


@pytest.fixture
def gg(gateway_url, demo_key):
    return genai.Client(api_key=demo_key, http_options=genai_types.HttpOptions(
        base_url=gateway_url, api_version="v1beta", timeout=60_000))


# --- chat completions ----------------------------------------------------------------------------

def test_chat_completion_answers_and_costs_its_usage(oa, spent):
    completion = oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}])
    assert completion.choices[0].message.content == ANSWER and completion.model == MODEL
    usage = completion.usage
    assert spent() == pytest.approx(cents(usage.prompt_tokens, usage.completion_tokens), abs=1e-9)


def test_chat_stream_relays_each_token_and_costs_the_same_as_the_plain_call(oa, spent):
    plain = oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}])
    after_plain = spent()
    chunks = list(oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                             stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER and len([c for c in chunks if c.choices]) > 3
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert spent() - after_plain == pytest.approx(after_plain, abs=1e-9)


def test_chat_stream_without_include_usage_gets_no_usage_chunk_but_is_billed(oa, spent):
    chunks = list(oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                             stream=True))
    assert all(c.choices for c in chunks) and all(getattr(c, "usage", None) is None for c in chunks)
    assert spent() > 0


# --- responses -----------------------------------------------------------------------------------

def test_responses_plain_and_streamed_cost_their_usage(oa, spent):
    response = oa.responses.create(model=MODEL, input="Hello there")
    assert response.output_text == ANSWER and response.status == "completed"
    first = cents(response.usage.input_tokens, response.usage.output_tokens)
    assert spent() == pytest.approx(first, abs=1e-9)
    with oa.responses.stream(model=MODEL, input="Hello there") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == ANSWER == final.output_text
    assert spent() == pytest.approx(2 * first, abs=1e-9)


def test_responses_compact(oa, spent):
    compacted = oa.responses.compact(model=MODEL, input=[{"role": "user", "content": "Hello there"}])
    assert compacted.object == "response.compaction" and compacted.output[-1].type == "compaction"
    assert spent() == pytest.approx(cents(compacted.usage.input_tokens, compacted.usage.output_tokens), abs=1e-9)


# --- messages ------------------------------------------------------------------------------------

def test_messages_plain_and_streamed_cost_the_same(an, spent):
    message = an.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hello there"}])
    assert message.content[0].text == ANSWER and message.stop_reason == "end_turn"
    first = cents(message.usage.input_tokens, message.usage.output_tokens)
    assert spent() == pytest.approx(first, abs=1e-9)
    with an.messages.stream(model=MODEL, max_tokens=100,
                            messages=[{"role": "user", "content": "Hello there"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == ANSWER == final.content[0].text
    assert final.usage.output_tokens == message.usage.output_tokens
    assert spent() == pytest.approx(2 * first, abs=1e-9)


def test_messages_with_a_base64_image_and_cache_control(an, spent):
    message = an.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Hello there"}]}])
    assert message.content[0].text.startswith(ANSWER)
    usage = message.usage
    cached = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    total_input = usage.input_tokens + cached + written
    assert spent() == pytest.approx(cents(total_input, usage.output_tokens, cached, written=written), abs=1e-9)


# --- content generation --------------------------------------------------------------------------

def test_generate_content_plain_and_streamed_cost_the_same(gg, spent):
    response = gg.models.generate_content(model=MODEL, contents="Hello there")
    assert response.text == ANSWER
    meta = response.usage_metadata
    first = cents(meta.prompt_token_count, meta.candidates_token_count + (meta.thoughts_token_count or 0))
    assert spent() == pytest.approx(first, abs=1e-9)
    chunks = list(gg.models.generate_content_stream(model=MODEL, contents="Hello there"))
    assert "".join(c.text or "" for c in chunks) == ANSWER and len(chunks) > 3
    assert chunks[-1].candidates[0].finish_reason == genai_types.FinishReason.STOP
    assert spent() == pytest.approx(2 * first, abs=1e-9)


def test_generate_content_with_a_json_schema_and_a_thinking_level(gg):
    response = gg.models.generate_content(model=MODEL, contents="Hello there", config=genai_types.GenerateContentConfig(
        response_mime_type="application/json", response_json_schema={"type": "object"},
        thinking_config=genai_types.ThinkingConfig(thinking_level="LOW")))
    assert response.candidates[0].content.parts


def test_count_tokens_is_free_and_embed_content_costs_its_estimated_input(gg, spent):
    assert gg.models.count_tokens(model=MODEL, contents="Hello there").total_tokens >= 2
    assert spent() == 0
    embedding = gg.models.embed_content(model="m-embed", contents=["Hello", "there"])
    assert len(embedding.embeddings) == 2 and len(embedding.embeddings[0].values) == 16
    assert spent() > 0


# --- embeddings and models -----------------------------------------------------------------------

def test_embeddings_of_several_inputs_cost_their_prompt_tokens(oa, spent):
    result = oa.embeddings.create(model="m-embed", input=["Hello", "there"])
    assert len(result.data) == 2 and len(result.data[0].embedding) == 16 and result.model == "m-embed"
    assert spent() == pytest.approx(cents(result.usage.prompt_tokens, 0, model="m-embed"), abs=1e-9)
    tokens = oa.embeddings.create(model="m-embed", input=[[1, 2, 3], [4, 5]], encoding_format="float")
    assert len(tokens.data) == 2 and tokens.usage.prompt_tokens == 5


def test_models_lists_every_model_of_the_key_with_its_family(oa):
    models = {m.id: m for m in oa.models.list()}
    assert {"m-small", "m-large", "m-embed", "iota-image-1", "epsilon-2", "zeta-video-1-0-pro-250528"} <= set(models)
    assert models["iota-image-1"].owned_by == "iota" and models["epsilon-2"].owned_by == "epsilon"
    assert models["m-small"].owned_by == "gateway"


# --- bad input: a 4xx in the dialect's envelope, and no charge -----------------------------------

def test_a_bad_chat_field_is_a_400_naming_it_and_costs_nothing(oa, spent):
    with pytest.raises(openai.BadRequestError) as caught:
        oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], temperature=5)
    assert caught.value.body["param"] == "temperature" and "less than or equal to 2" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        oa.embeddings.create(model="m-embed", input="word " * 9000)
    assert "8192 tokens" in caught.value.message
    assert spent() == 0


def test_a_bad_messages_field_is_a_400_in_the_messages_envelope_and_costs_nothing(an, spent):
    with pytest.raises(anthropic.BadRequestError) as caught:
        an.messages.create(model=MODEL, max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 4000},
                           messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["type"] == "error" and "budget_tokens must be smaller than max_tokens" in str(caught.value)
    assert spent() == 0


@pytest.mark.filterwarnings("ignore:EXTREME is not a valid ThinkingLevel")
def test_a_bad_content_field_is_invalid_argument_and_costs_nothing(gg, spent):
    with pytest.raises(genai_errors.ClientError) as caught:
        gg.models.generate_content(model=MODEL, contents="hi", config=genai_types.GenerateContentConfig(
            thinking_config=genai_types.ThinkingConfig(thinking_level="EXTREME")))
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    assert spent() == 0


def test_stream_generate_content_needs_alt_sse(http, demo_key, spent):
    answer = http.post(f"/v1beta/models/{MODEL}:streamGenerateContent", headers={"x-goog-api-key": demo_key},
                       json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "alt" in answer.json()["error"]["message"]
    assert spent() == 0


def test_a_model_with_no_price_is_refused_naming_it_in_each_dialect(oa, an, gg, spent):
    # The local simulators serve any model name, so only the missing price stops this one.
    with pytest.raises(openai.BadRequestError) as caught:
        oa.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert "no-such-model" in caught.value.message and caught.value.code == "model_not_priced"
    with pytest.raises(anthropic.BadRequestError):
        an.messages.create(model="no-such-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(genai_errors.ClientError) as caught:
        gg.models.generate_content(model="no-such-model", contents="hi")
    assert caught.value.code == 400
    assert spent() == 0


def test_each_sdk_place_of_the_key_is_accepted_and_a_wrong_key_is_a_401(gateway_url, demo_key):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    for headers, params in (({"Authorization": f"Bearer {demo_key}"}, {}), ({"x-api-key": demo_key}, {}),
                            ({"x-goog-api-key": demo_key}, {}), ({}, {"key": demo_key})):
        answer = httpx.post(f"{gateway_url}/v1/chat/completions", json=body, headers=headers, params=params, timeout=30)
        assert answer.status_code == 200, answer.text
    wrong = httpx.post(f"{gateway_url}/v1/messages", json={**body, "max_tokens": 5},
                       headers={"x-api-key": "sk-" + "x" * 48}, timeout=30)
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"


# --- upstream failures -----------------------------------------------------------------------------

def test_an_upstream_failure_on_every_channel_refunds_everything(oa, spent):
    with pytest.raises(openai.InternalServerError):
        oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi #fault=500"}])
    with pytest.raises(openai.RateLimitError):
        oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi #fault=429"}])
    assert spent() == 0


def test_a_cut_stream_ends_with_the_dialect_error_event_and_is_billed_for_what_was_relayed(an, spent):
    with pytest.raises(anthropic.APIStatusError):
        with an.messages.stream(model=MODEL, max_tokens=100,
                                messages=[{"role": "user",
                                           "content": "Hello there, how are you #fault=cut"}]) as stream:
            for _ in stream.text_stream:
                pass
    assert spent() > 0
