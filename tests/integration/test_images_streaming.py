"""The images routes as a streaming function (issue 31, "nothing is cut silently"): a generation
slower than the buffered integration's 29 s is kept alive and served, an answer past Lambda's
6 MB buffered limit streams to the SDK, a client that leaves is billed what the upstream charged
and no more, and an `Idempotency-Key` retry still replays the first answer, billed once.

The function's ASGI app is served by uvicorn (as the Lambda Web Adapter runs it); the clients are
httpx (to see the bytes: keep-alive spaces, then the body) and the official `openai` SDK.
"""

from __future__ import annotations

import base64
import json
import time

import httpx
import openai
import pytest

from gateway.api import images as images_api
from gateway.settings import reload_settings
from tests.imagefiles import PNG, multipart
from tests.integration.images_support import HUGE_IMAGE, hits
from tests.integration.test_images import auth, balance, channels_document  # noqa: F401 (a fixture)

PRICE = 20_000  # units per image of iota-image-1 and theta-3


@pytest.fixture
def keepalive(monkeypatch):
    """Sets the keep-alive interval (30 s deployed) for one test."""
    def use(seconds: float) -> None:
        monkeypatch.setenv("GATEWAY_BUFFERED_KEEPALIVE_SECONDS", str(seconds))
        reload_settings()
    yield use
    monkeypatch.delenv("GATEWAY_BUFFERED_KEEPALIVE_SECONDS", raising=False)
    reload_settings()


def settled_entries(accounts, count: int = 1, wait: float = 60.0) -> list:
    """The ledger once it holds `count` entries: a bill written after the client left comes a
    moment later (a bounded wait for the mechanism, not a timing assertion)."""
    deadline = time.monotonic() + wait
    while len(balance(accounts)[3]) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return balance(accounts)[3]


def test_a_generation_slower_than_the_old_26_s_budget_is_kept_alive_then_served_and_billed_once(
        images, simulated, demo, accounts, keepalive):
    # Given an upstream that takes 27 s (the buffered function gave up at 26 s, answering 504
    # while the upstream went on and billed) and a keep-alive every 5 s
    keepalive(5)
    quota = balance(accounts)[0]
    body = {"model": "iota-image-1", "prompt": "a fox #delay=27", "n": 2}
    with httpx.stream("POST", f"{images}/v1/images/generations", json=body, headers=auth(demo["key"]),
                      timeout=120) as answer:
        chunks = list(answer.iter_raw())
        status, content_type = answer.status_code, answer.headers["content-type"]
    data = b"".join(chunks)
    # Then the answer was committed as a 200 JSON answer (at 5 s) and kept alive with a space
    # every 5 s, each on its own (four in 27 s; a loaded machine may send one fewer), then the
    # body, which a JSON parser reads past the spaces
    spaces = len(data) - len(data.lstrip(b" "))
    assert status == 200 and content_type == "application/json"
    assert spaces >= 3 and chunks[:spaces] == [b" "] * spaces and data[spaces:].startswith(b"{")
    result = json.loads(data)
    assert len(result["data"]) == 2 and all(base64.b64decode(item["b64_json"]) for item in result["data"])
    # And it was billed once, for the two images the upstream made
    assert balance(accounts)[3] == [("iota-image-1", 2 * PRICE, 2 * PRICE, "settled")]
    assert balance(accounts)[0] == quota - 2 * PRICE


def test_the_sdk_parses_a_kept_alive_answer(images, simulated, demo, accounts, keepalive):
    keepalive(0.2)
    client = openai.OpenAI(api_key=demo["key"], base_url=f"{images}/v1", max_retries=0, timeout=60)
    result = client.images.generate(model="theta-3", prompt="a lighthouse #delay=1.5", response_format="b64_json")
    assert len(result.data) == 1 and base64.b64decode(result.data[0].b64_json)
    assert balance(accounts)[3] == [("theta-3", PRICE, PRICE, "settled")]


def test_an_error_after_the_commit_is_the_body_in_the_chat_envelope_and_refunded(
        images, channels_document, upstream, demo, accounts, keepalive):  # noqa: F811
    # Given an upstream that fails after 1 s, and a keep-alive every 0.2 s
    keepalive(0.2)
    channels_document({"name": "slow-down", "base_url": f"{upstream}/slow-down", "models": ["theta-3"]})
    quota = balance(accounts)[0]
    with httpx.stream("POST", f"{images}/v1/images/generations", json={"model": "theta-3", "prompt": "a fox"},
                      headers=auth(demo["key"]), timeout=60) as answer:
        data = answer.read()
        status = answer.status_code
    # Then the 200 was already committed: the body, after the spaces, is the chat envelope
    assert status == 200 and data.startswith(b" ")
    error = json.loads(data)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "upstream_error"
    assert "upstream overloaded" in error["message"]
    # And everything was refunded
    assert balance(accounts)[0] == quota and balance(accounts)[3] == [("theta-3", 0, PRICE, "refunded")]


def test_an_answer_over_6_mb_is_streamed_to_the_sdk_and_billed(images, channels_document, upstream, demo,  # noqa: F811
                                                               accounts):
    # Given an upstream whose one b64_json image makes an answer over 6 MB (the buffered
    # function refused it 502 response_too_large, after the upstream had made and billed it)
    channels_document({"name": "huge", "base_url": f"{upstream}/huge", "models": ["theta-3"]})
    client = openai.OpenAI(api_key=demo["key"], base_url=f"{images}/v1", max_retries=0, timeout=120)
    # When the SDK asks for it
    result = client.images.generate(model="theta-3", prompt="a fox", response_format="b64_json")
    # Then it has every byte of it, and one image was billed
    assert len(result.data[0].b64_json) > 6 * 1024 * 1024
    assert base64.b64decode(result.data[0].b64_json) == HUGE_IMAGE
    assert balance(accounts)[3] == [("theta-3", PRICE, PRICE, "settled")]


def test_an_upstream_answer_past_the_streamed_limit_is_refused_and_refunded_with_advice(
        images, channels_document, upstream, demo, accounts, monkeypatch):  # noqa: F811
    # (200 MB deployed: AWS's streamed response limit; a smaller limit here to test the rule)
    monkeypatch.setattr(images_api, "MAX_RESPONSE_BYTES", 1024 * 1024)
    channels_document({"name": "huge", "base_url": f"{upstream}/huge", "models": ["theta-3"]})
    quota = balance(accounts)[0]
    answer = httpx.post(f"{images}/v1/images/generations", json={"model": "theta-3", "prompt": "a fox"},
                        headers=auth(demo["key"]), timeout=60)
    assert answer.status_code == 502 and answer.json()["error"]["code"] == "response_too_large"
    assert "response_format=url" in answer.json()["error"]["message"]
    assert balance(accounts)[0] == quota


def test_what_n_images_can_make_fits_a_streamed_answer_so_none_is_refused_beforehand():
    assert images_api.WORST_ANSWER_BYTES < images_api.MAX_RESPONSE_BYTES < 200 * 1024 * 1024


@pytest.mark.parametrize("committed", [True, False], ids=["after-the-commit", "before-the-commit"])
def test_a_client_that_leaves_mid_generation_is_billed_what_the_upstream_charged_no_more(
        images, channels_document, upstream, demo, accounts, keepalive, committed):  # noqa: F811
    # Given an upstream that takes 1.5 s and makes one image whatever n (the hold is for 3)
    keepalive(0.2 if committed else 30)
    channels_document({"name": "stingy", "base_url": f"{upstream}/stingy", "models": ["iota-image-1"]})
    quota = balance(accounts)[0]
    body = {"model": "iota-image-1", "prompt": "a fox #delay=1.5", "n": 3}
    # When the client goes away mid-generation: after the first keep-alive space, or before any byte
    with httpx.Client(timeout=httpx.Timeout(30, read=None if committed else 0.5)) as http:
        if committed:
            with http.stream("POST", f"{images}/v1/images/generations", json=body, headers=auth(demo["key"])) as a:
                assert a.status_code == 200 and next(a.iter_raw()) == b" "
        else:
            with pytest.raises(httpx.ReadTimeout):
                http.post(f"{images}/v1/images/generations", json=body, headers=auth(demo["key"]))
    # Then the generation is not abandoned: the upstream's one image is billed, not the 3 held,
    # exactly once, and no hold is left open
    assert settled_entries(accounts) == [("iota-image-1", PRICE, 3 * PRICE, "settled")]
    assert balance(accounts)[0] == quota - PRICE and hits["stingy"] == 1


def test_an_idempotent_retry_replays_the_first_answer_billed_once(images, channels_document, upstream, demo,  # noqa: F811
                                                                 accounts, keepalive):
    # Given a first generation kept alive (slow) and sent with an Idempotency-Key
    keepalive(0.2)
    channels_document({"name": "counted", "base_url": f"{upstream}/counted", "models": ["iota-image-1"]})
    headers = {**auth(demo["key"]), "Idempotency-Key": "gen-1"}
    body = {"model": "iota-image-1", "prompt": "a fox #delay=0.6"}
    first = httpx.post(f"{images}/v1/images/generations", json=body, headers=headers, timeout=60)
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    # When the client retries it (same key, same body)
    again = httpx.post(f"{images}/v1/images/generations", json=body, headers=headers, timeout=60)
    # Then it gets the first answer, marked replayed; the upstream ran once, billed once
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json() and hits["chat"] == 1
    assert balance(accounts)[3] == [("iota-image-1", PRICE, PRICE, "settled")]
    # And the same key with another body is a 409 naming the header, nothing charged
    other = httpx.post(f"{images}/v1/images/generations", json={**body, "prompt": "a cat"}, headers=headers,
                       timeout=60)
    assert other.status_code == 409 and other.json()["error"]["param"] == "Idempotency-Key"


def test_an_idempotent_edit_retry_with_a_new_multipart_boundary_is_replayed(images, simulated, demo, accounts):
    fields = {"model": "eta-image-edit", "prompt": "add a hat"}
    headers = {**auth(demo["key"]), "Idempotency-Key": "edit-1"}
    answers, boundaries = [], set()
    for _ in range(2):  # httpx draws a new boundary for each form, as a retrying client does
        body, content_type = multipart(fields, {"image": ("photo.png", PNG, "image/png")})
        boundaries.add(content_type)
        answers.append(httpx.post(f"{images}/v1/images/edits", content=body, timeout=60,
                                  headers={**headers, "Content-Type": content_type}))
    assert len(boundaries) == 2
    assert [a.status_code for a in answers] == [200, 200] and answers[1].headers["idempotent-replayed"] == "true"
    assert answers[0].json() == answers[1].json()
    assert balance(accounts)[3] == [("eta-image-edit", 15_000, 15_000, "settled")]
