"""Over real HTTP with the official SDKs: a non-streamed text answer whose upstream is slow is
committed and kept alive with leading spaces (JSON allows whitespace before a value, RFC 8259
section 2), so API Gateway's 5-minute idle timeout never cuts it, and every SDK still parses it;
a client that leaves meanwhile is billed what the upstream reported for the answer, no more."""

from __future__ import annotations

import time

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from tests.e2e.conftest import DEMO_KEY, LocalGateway, usage_cents

SLOW = "say hello #fault=slow"
AUTH = {"Authorization": f"Bearer {DEMO_KEY}"}


@pytest.fixture(scope="module")
def slow_gateway():
    # The upstream answers after 2 s; a space every 0.3 s meanwhile (30 s deployed).
    server = LocalGateway({"GATEWAY_SIM_SLOW_SECONDS": "2", "GATEWAY_BUFFERED_KEEPALIVE_SECONDS": "0.3"})
    yield server.url
    server.release()


def test_a_slow_buffered_answer_starts_with_keep_alive_spaces_and_parses_as_json(slow_gateway):
    body = {"model": "m-small", "messages": [{"role": "user", "content": SLOW}]}
    with httpx.stream("POST", f"{slow_gateway}/v1/chat/completions", json=body, headers=AUTH, timeout=30) as answer:
        chunks = list(answer.iter_raw())
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    # Spaces came, each on its own, before the body
    assert chunks[0] == b" " and b"".join(chunks).lstrip(b" ").startswith(b"{")
    assert len(b"".join(chunks)) - len(b"".join(chunks).lstrip(b" ")) >= 2
    answer = httpx.Response(200, content=b"".join(chunks)).json()
    assert answer["choices"][0]["message"]["content"].strip()


def test_every_sdk_parses_a_kept_alive_buffered_answer(slow_gateway):
    with openai.OpenAI(api_key=DEMO_KEY, base_url=f"{slow_gateway}/v1", max_retries=0, timeout=30) as oa:
        chat = oa.chat.completions.create(model="m-small", messages=[{"role": "user", "content": SLOW}])
        assert chat.choices[0].message.content.strip() and chat.usage.total_tokens > 0
        response = oa.responses.create(model="m-small", input=SLOW)
        assert response.status == "completed" and response.output_text.strip()
    with anthropic.Anthropic(api_key=DEMO_KEY, base_url=slow_gateway, max_retries=0, timeout=30) as an:
        message = an.messages.create(model="m-small", max_tokens=100, messages=[{"role": "user", "content": SLOW}])
        assert message.content[0].text.strip() and message.usage.output_tokens > 0
    gg = genai.Client(api_key=DEMO_KEY, http_options=genai_types.HttpOptions(
        base_url=slow_gateway, api_version="v1beta", timeout=30_000))
    generated = gg.models.generate_content(model="m-small", contents=SLOW)
    assert generated.text.strip() and generated.usage_metadata.total_token_count > 0


def test_a_client_that_leaves_a_kept_alive_answer_is_billed_what_the_upstream_charged_no_more(slow_gateway):
    body = {"model": "m-small", "messages": [{"role": "user", "content": SLOW}]}
    with httpx.Client(base_url=slow_gateway, timeout=30) as http:
        before = usage_cents(http)
        # A whole answer, for its price
        assert http.post("/v1/chat/completions", json=body, headers=AUTH).status_code == 200
        whole = usage_cents(http) - before
        assert whole > 0
        # Then a client that reads the first keep-alive space and leaves
        with http.stream("POST", "/v1/chat/completions", json=body, headers=AUTH) as answer:
            assert next(answer.iter_raw()) == b" "
        # Its answer is still awaited and billed to the upstream's usage: the same as the whole one
        # (the bill lands once the upstream answers, after the client left: waited for, not timed)
        for _ in range(200):
            if usage_cents(http) != before + whole:
                break
            time.sleep(0.05)
        assert usage_cents(http) == pytest.approx(before + 2 * whole)


def test_a_slow_image_generation_through_make_run_is_kept_alive_and_parsed_by_the_sdk(slow_gateway):
    # The images function streams under `make run` as deployed: a generation that takes 1.5 s is
    # committed and kept alive with spaces (0.3 s here), and the openai SDK reads the images after them
    body = {"model": "theta-3", "prompt": "a lighthouse #delay=1.5", "response_format": "b64_json"}
    with httpx.stream("POST", f"{slow_gateway}/v1/images/generations", json=body, headers=AUTH,
                      timeout=30) as answer:
        chunks = list(answer.iter_raw())
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert chunks[0] == b" " and b"".join(chunks).lstrip(b" ").startswith(b"{")
    with openai.OpenAI(api_key=DEMO_KEY, base_url=f"{slow_gateway}/v1", max_retries=0, timeout=30) as oa:
        result = oa.images.generate(**body)
    assert len(result.data) == 1 and result.data[0].b64_json
