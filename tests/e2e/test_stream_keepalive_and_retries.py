"""Over real HTTP with the official SDKs: a stream whose upstream thinks before its first token is
kept alive with SSE comments every SDK ignores, and a retried submit with the same
`Idempotency-Key` is answered once and billed once."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from tests.e2e.conftest import DEMO_KEY, LocalGateway, usage_cents

THINKING = "say hello #fault=think"


@pytest.fixture(scope="module")
def slow_gateway():
    # The upstream is silent 2 s before its first event; keep-alives every 0.3 s (10 s deployed).
    server = LocalGateway({"GATEWAY_SIM_SLOW_SECONDS": "2", "GATEWAY_STREAM_KEEPALIVE_SECONDS": "0.3"})
    yield server.url
    server.release()


def test_raw_stream_carries_keep_alive_comments_before_the_first_event(slow_gateway):
    body = {"model": "m-small", "stream": True, "messages": [{"role": "user", "content": THINKING}]}
    with httpx.stream("POST", f"{slow_gateway}/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {DEMO_KEY}"}) as answer:
        lines = [line for line in answer.iter_lines()]
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data:"))
    assert lines[:first_data].count(": keep-alive") >= 2
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]"


def test_every_sdk_reads_a_kept_alive_stream_to_its_end(slow_gateway):
    with openai.OpenAI(api_key=DEMO_KEY, base_url=f"{slow_gateway}/v1", max_retries=0, timeout=30) as oa:
        chunks = list(oa.chat.completions.create(model="m-small", stream=True,
                                                 messages=[{"role": "user", "content": THINKING}]))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
        events = list(oa.responses.create(model="m-small", input=THINKING, stream=True))
        assert events[-1].type == "response.completed"
    with anthropic.Anthropic(api_key=DEMO_KEY, base_url=slow_gateway, max_retries=0, timeout=30) as an:
        with an.messages.stream(model="m-small", max_tokens=100,
                                messages=[{"role": "user", "content": THINKING}]) as stream:
            assert stream.get_final_text().strip()
    gg = genai.Client(api_key=DEMO_KEY, http_options=genai_types.HttpOptions(
        base_url=slow_gateway, api_version="v1beta", timeout=30_000))
    text = "".join(c.text or "" for c in gg.models.generate_content_stream(model="m-small", contents=THINKING))
    assert text.strip()


def test_an_image_generation_retried_with_the_same_idempotency_key_is_billed_once(slow_gateway):
    with httpx.Client(base_url=slow_gateway, timeout=30) as http, \
            openai.OpenAI(api_key=DEMO_KEY, base_url=f"{slow_gateway}/v1", max_retries=0, timeout=30) as oa:
        before = usage_cents(http)
        first = oa.images.generate(model="iota-image-1", prompt="a fox", quality="low", size="1024x1024",
                                   extra_headers={"Idempotency-Key": "one-fox"})
        again = oa.images.with_raw_response.generate(model="iota-image-1", prompt="a fox", quality="low",
                                                     size="1024x1024", extra_headers={"Idempotency-Key": "one-fox"})
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.parse().data[0].b64_json == first.data[0].b64_json
        assert usage_cents(http) - before == pytest.approx(4)
        with pytest.raises(openai.ConflictError, match="Idempotency-Key"):
            oa.images.generate(model="iota-image-1", prompt="two foxes", quality="low", size="1024x1024",
                               extra_headers={"Idempotency-Key": "one-fox"})
        assert usage_cents(http) - before == pytest.approx(4)
