"""The images routes through the local gateway with the official `openai` SDK, over real HTTP.

Each call must move the key's usage (GET /v1/dashboard/billing/usage, in cents) by exactly the
price of the images asked for: iota-image-1 and theta-3 4 cents an image, eta-image-edit 3.
"""

from __future__ import annotations

import base64
import struct

import httpx
import openai
import pytest

from tests.imagefiles import JPEG, PNG

pytestmark = pytest.mark.e2e

CENTS_PER_IMAGE = {"iota-image-1": 4, "theta-3": 4, "eta-image-edit": 3}


@pytest.fixture
def client(openai_client):
    return openai_client


@pytest.fixture
def usage(gateway_url, demo_key):
    """The key's total usage in cents, read from the gateway itself."""
    def read() -> float:
        answer = httpx.get(f"{gateway_url}/v1/dashboard/billing/usage",
                           headers={"Authorization": f"Bearer {demo_key}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()["total_usage"]
    return read


def assert_png(data: bytes) -> None:
    """A PNG: its signature, then an IHDR chunk of 13 bytes with a non-empty picture size."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, tag, width, height = struct.unpack(">I4sII", data[8:24])
    assert (length, tag) == (13, b"IHDR") and width > 0 and height > 0


def fetch(url: str) -> bytes:
    answer = httpx.get(url, timeout=30)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("image/")
    return answer.content


def moved(before: float, after: float) -> float:
    return round(after - before, 6)


def test_iota_generation_answers_b64_pngs_with_usage_and_costs_the_price_times_n(client, usage):
    before = usage()
    result = client.images.generate(model="iota-image-1", prompt="a red fox in the snow", n=2, quality="low",
                                    size="1024x1024")
    assert len(result.data) == 2
    for item in result.data:
        assert item.url is None
        assert_png(base64.b64decode(item.b64_json))
    assert result.usage is not None and result.usage.total_tokens > 0
    assert moved(before, usage()) == 2 * CENTS_PER_IMAGE["iota-image-1"]


def test_theta_generation_answers_a_url_that_serves_the_png(client, usage):
    before = usage()
    result = client.images.generate(model="theta-3", prompt="a lighthouse at dusk", response_format="url",
                                    size="1792x1024", style="natural")
    (item,) = result.data
    assert item.revised_prompt and item.url.startswith("http")
    assert_png(fetch(item.url))
    assert moved(before, usage()) == CENTS_PER_IMAGE["theta-3"]


def test_theta_generation_as_b64_json(client, usage):
    before = usage()
    result = client.images.generate(model="theta-3", prompt="a lighthouse at dusk", response_format="b64_json")
    assert_png(base64.b64decode(result.data[0].b64_json))
    assert moved(before, usage()) == CENTS_PER_IMAGE["theta-3"]


def test_edit_of_a_png_answers_pngs_and_n_multiplies_the_price(client, usage):
    before = usage()
    result = client.images.edit(model="eta-image-edit", image=("fox.png", PNG, "image/png"),
                                prompt="put a red scarf on the fox", n=2, response_format="b64_json",
                                extra_body={"seed": 7, "negative_prompt": "blur"})
    assert len(result.data) == 2
    for item in result.data:
        assert_png(base64.b64decode(item.b64_json))
    assert moved(before, usage()) == 2 * CENTS_PER_IMAGE["eta-image-edit"]


def test_edit_answers_a_url_by_default(client, usage):
    before = usage()
    result = client.images.edit(model="eta-image-edit", image=("photo.jpg", JPEG, "image/jpeg"), prompt="add a hat")
    assert_png(fetch(result.data[0].url))
    assert moved(before, usage()) == CENTS_PER_IMAGE["eta-image-edit"]


def test_a_broken_rule_is_the_sdks_bad_request_naming_the_field_and_costs_nothing(client, usage):
    before = usage()
    with pytest.raises(openai.BadRequestError) as caught:
        client.images.edit(model="eta-image-edit", image=("notes.png", b"not a picture", "image/png"), prompt="x")
    assert caught.value.body["param"] == "image"
    with pytest.raises(openai.BadRequestError) as caught:
        client.images.generate(model="theta-3", prompt="a fox", n=2)
    assert caught.value.body["param"] == "n"
    assert moved(before, usage()) == 0


def test_an_upstream_failure_is_a_server_error_and_costs_nothing(client, usage):
    before = usage()
    with pytest.raises(openai.InternalServerError) as caught:
        client.images.generate(model="iota-image-1", prompt="a fox #fault=500", n=3)
    assert caught.value.status_code == 502 and "simulated failure 500" in caught.value.message
    assert moved(before, usage()) == 0
