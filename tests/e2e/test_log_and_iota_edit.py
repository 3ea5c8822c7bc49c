"""Through the local gateway (`make run`) over real HTTP: an iota edit with the openai SDK (two
images and a mask), then the request log listing the last requests newest first."""

from __future__ import annotations

import base64
import time

import openai
import pytest

from tests.e2e.conftest import DEMO_ACCESS_TOKEN, usage_cents
from tests.imagefiles import PNG, decode_png, jpeg_of, mask_png

pytestmark = pytest.mark.e2e

# iota-image-1: 0.04 USD an image, plus 10 USD per million input-image tokens; the simulator
# reports 258 tokens per input image (and mask). 500000 units per USD, 5000 per cent.
EDIT_UNITS = 20_000 + 3 * 258 * 5  # two images and a mask: 23870 units


def log(http, path="/api/log/self", key=None, **query):
    headers = ({"Authorization": f"Bearer {key}"} if key
               else {"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"})
    answer = http.get(path, headers=headers, params=query)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True
    return body["data"]


def settled(http, step):
    """Runs `step` (one request) and waits until its ledger entry heads the log: a streamed
    answer is settled when its last byte has gone out, a moment after the client has it."""
    top = (log(http, page_size=1)["items"] or [{"id": None}])[0]["id"]
    step()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        items = log(http, page_size=1)["items"]
        if items and items[0]["id"] != top:
            return items[0]
        time.sleep(0.05)
    raise AssertionError("the request left no ledger entry within 10 s")


def test_an_iota_edit_of_two_images_and_a_mask_answers_an_image_and_moves_usage_by_its_price(
        openai_client, http, demo_key):
    before = usage_cents(http)
    result = openai_client.images.edit(
        model="iota-image-1", image=[("room.jpg", jpeg_of(1024, 1536), "image/jpeg"), ("lamp.png", PNG, "image/png")],
        mask=("mask.png", mask_png(1024, 1536), "image/png"), prompt="put the lamp in the corner")
    # size auto follows the first image's iota size
    assert decode_png(base64.b64decode(result.data[0].b64_json)) == (1024, 1536)
    assert result.usage.input_tokens_details.image_tokens == 3 * 258
    assert round(usage_cents(http) - before, 6) == EDIT_UNITS / 5000

    newest = log(http, page_size=1)["items"][0]
    assert (newest["model_name"], newest["type"], newest["quota"]) == ("iota-image-1", 2, EDIT_UNITS)
    assert "1 image(s)" in newest["content"]


def test_the_log_lists_the_last_requests_newest_first_with_their_units(openai_client, http, demo_key):
    # Given a plain and a streamed chat request and a failed image request, one after the other
    def streamed_request():
        with openai_client.chat.completions.create(model="m-small", stream=True,
                                                   messages=[{"role": "user", "content": "streamed"}]) as stream:
            for _ in stream:
                pass

    def failed_request():
        with pytest.raises(openai.InternalServerError):
            openai_client.images.generate(model="iota-image-1", prompt="boom #fault=500")

    settled(http, lambda: openai_client.chat.completions.create(
        model="m-small", messages=[{"role": "user", "content": "plain"}]))
    settled(http, streamed_request)
    settled(http, failed_request)

    # When the account's log is read
    data = log(http, page_size=3)

    # Then the three come first, newest first, with their type and units
    failed, streamed, plain = data["items"]
    assert (failed["type"], failed["quota"], failed["model_name"]) == (5, 0, "iota-image-1")
    assert "failed" in failed["content"] and "simulated failure 500" in failed["content"]
    assert (streamed["type"], streamed["is_stream"], plain["type"], plain["is_stream"]) == (2, True, 2, False)
    assert plain["quota"] > 0 and plain["prompt_tokens"] > 0 and plain["completion_tokens"] > 0
    assert failed["created_at"] >= streamed["created_at"] >= plain["created_at"]
    assert data["total"] >= 3 and data["has_more"] is True

    # And the next page continues from the cursor without repeating
    following = log(http, page_size=2, cursor=data["next_cursor"])["items"]
    assert following and following[0]["request_id"] not in {i["request_id"] for i in data["items"]}

    # And the key's own log lists the same entries; the failed ones alone by type
    mine = log(http, "/api/log/token", key=demo_key, page_size=3)
    assert [i["request_id"] for i in mine["items"]] == [i["request_id"] for i in data["items"]]
    errors = log(http, type=5, model_name="iota-image-1")["items"]
    assert errors[0]["request_id"] == failed["request_id"] and {i["type"] for i in errors} == {5}


def test_the_log_refuses_bad_parameters_and_foreign_credentials(http, demo_key):
    answer = http.get("/api/log/self", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"},
                      params={"page_size": "500"})
    assert answer.status_code == 400 and answer.json()["message"].startswith("page_size:")
    answer = http.get("/api/log/self", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "2"})
    assert answer.status_code == 401 and answer.json()["success"] is False
    answer = http.get("/api/log/token", headers={"Authorization": "Bearer sk-" + "n" * 48})
    assert answer.status_code == 401
