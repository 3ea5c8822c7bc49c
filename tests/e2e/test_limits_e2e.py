"""Limits under `make run`, through the official SDKs: rpm 3 gives exactly three answers in a
minute and then 429s in each dialect's envelope with Retry-After, the quota unmoved by the
refusals; max_parallel 1 refuses the second of two concurrent streams."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import anthropic
import httpx
import openai
import pytest

from tests.e2e.conftest import LocalGateway


@pytest.fixture(scope="module")
def limited():
    # Streams at 20 ms a token: the first of two concurrent streams stays open for seconds, however
    # long the second takes to reach its serving process (one that serves its first request warms)
    server = LocalGateway({"GATEWAY_SIM_TOKEN_DELAY_MS": "20"})
    user = server.admin("create-user", "--username", "limited", "--quota-usd", "10")
    key = server.admin("issue-key", "--user", str(user["user_id"]), "--name", "limited")
    yield server, user, key
    server.release()


def quota(server: LocalGateway, user_id: int) -> int:
    listed = server.admin("list-users")["users"]
    return next(u for u in listed if u["id"] == user_id)["quota"]


def test_rpm_3_gives_three_answers_then_429s_in_every_dialect_with_retry_after(limited):
    server, user, key = limited
    server.admin("set-limits", "--user", str(user["user_id"]), "--rpm", "3")
    if datetime.now(UTC).second > 45:  # all of it within one minute
        time.sleep(61 - datetime.now(UTC).second)
    sdk = openai.OpenAI(api_key=key["key"], base_url=f"{server.url}/v1", max_retries=0, timeout=30)
    for _ in range(3):
        assert sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}]).choices
    before = quota(server, user["user_id"])
    with pytest.raises(openai.RateLimitError) as refused:
        sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}])
    error = refused.value
    assert error.code == "rate_limit_exceeded" and error.body["type"] == "rate_limit_error"
    assert 1 <= int(error.response.headers["retry-after"]) <= 60
    messages = anthropic.Anthropic(api_key=key["key"], base_url=server.url, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as refused_messages:
        messages.messages.create(model="m-small", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert refused_messages.value.body["error"]["type"] == "rate_limit_error"
    content = httpx.post(f"{server.url}/v1beta/models/m-small:generateContent", params={"key": key["key"]},
                         json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, timeout=30)
    assert content.status_code == 429 and content.json()["error"]["status"] == "RESOURCE_EXHAUSTED", content.text
    assert "retry-after" in content.headers
    assert quota(server, user["user_id"]) == before  # the refusals moved nothing
    server.admin("set-limits", "--user", str(user["user_id"]), "--rpm", "0")
    served_again(sdk)


def served_again(sdk: openai.OpenAI) -> None:
    """Waits until a cleared limit is in force: instances (every serving process's) keep a user's
    limits for up to 5 s."""
    cleared = time.monotonic()
    deadline = cleared + 20
    while True:
        try:
            sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}])
            time.sleep(max(0.0, cleared + 5.5 - time.monotonic()))  # the other processes too
            return
        except openai.RateLimitError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_max_parallel_1_refuses_the_second_of_two_concurrent_streams(limited):
    server, user, key = limited
    server.admin("set-limits", "--key", key["key_id"], "--max-parallel", "1")
    sdk = openai.OpenAI(api_key=key["key"], base_url=f"{server.url}/v1", max_retries=0, timeout=30)
    first = sdk.chat.completions.create(model="m-small", stream=True, max_tokens=200,
                                        messages=[{"role": "user", "content": "a long story " * 20}])
    chunks = iter(first)
    next(chunks)  # the first stream is open and held
    with pytest.raises(openai.RateLimitError) as refused:
        sdk.chat.completions.create(model="m-small", stream=True, messages=[{"role": "user", "content": "hi"}])
    assert "max_parallel" in refused.value.message
    for _ in chunks:
        pass
    done = threading.Event()
    deadline = time.monotonic() + 10
    while not done.is_set() and time.monotonic() < deadline:  # the first one's place is freed at its settlement
        try:
            sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}])
            done.set()
        except openai.RateLimitError:
            time.sleep(0.2)
    assert done.is_set()
    server.admin("set-limits", "--key", key["key_id"], "--max-parallel", "0")


def test_a_limited_keys_answers_carry_the_rate_limit_headers_in_each_sdks_names(limited):
    server, user, _ = limited
    key = server.admin("issue-key", "--user", str(user["user_id"]), "--name", "headers", "--rpm", "50",
                       "--tpm", "100000")["key"]
    if datetime.now(UTC).second > 50:  # both requests within one minute
        time.sleep(61 - datetime.now(UTC).second)
    sdk = openai.OpenAI(api_key=key, base_url=f"{server.url}/v1", max_retries=0, timeout=30)
    raw = sdk.chat.completions.with_raw_response.create(model="m-small", max_tokens=16,
                                                        messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["x-ratelimit-limit-requests"] == "50"
    assert raw.headers["x-ratelimit-remaining-requests"] == "49"
    assert raw.headers["x-ratelimit-limit-tokens"] == "100000"
    assert 0 < int(raw.headers["x-ratelimit-remaining-tokens"]) < 100000  # the request's hold counted
    assert raw.headers["x-ratelimit-reset-requests"].endswith("s")
    messages = anthropic.Anthropic(api_key=key, base_url=server.url, max_retries=0)
    answered = messages.messages.with_raw_response.create(model="m-small", max_tokens=16,
                                                          messages=[{"role": "user", "content": "hi"}])
    assert answered.headers["anthropic-ratelimit-requests-limit"] == "50"
    assert answered.headers["anthropic-ratelimit-requests-remaining"] == "48"
    assert answered.headers["anthropic-ratelimit-tokens-limit"] == "100000"
    assert answered.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    unlimited = server.admin("issue-key", "--user", str(user["user_id"]), "--name", "plain")["key"]
    plain = openai.OpenAI(api_key=unlimited, base_url=f"{server.url}/v1", max_retries=0, timeout=30)
    assert "x-ratelimit-limit-requests" not in plain.chat.completions.with_raw_response.create(
        model="m-small", max_tokens=16, messages=[{"role": "user", "content": "hi"}]).headers
