"""iota image edits: the official `openai` SDK against the real streaming images function over HTTP.

The SDK's own multipart shapes (`image`, `image[]`, `mask`) meet the gateway's parser and rules
as deployed (the app served by uvicorn, as the Lambda Web Adapter runs it); behind it, the
emulator and the images simulator over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json

import openai
import pytest

from gateway.api.images import IMAGE_TOKENS_HELD_PER_INPUT
from gateway.prices import SHIPPED, unit_cost
from gateway_local.simulators.images import IMAGE_TOKENS_PER_INPUT
from tests.imagefiles import JPEG, PNG, decode_png, jpeg_of, mask_png, multipart
from tests.integration.test_images import balance, edit, edit_raw

PRICE = SHIPPED["iota-image-1"]


@pytest.fixture
def sdk(images, simulated, demo):
    return openai.OpenAI(api_key=demo["key"], base_url=f"{images}/v1", max_retries=0)


def charge(*, images: int, inputs: int) -> int:
    return unit_cost(PRICE, images=images, image_input_tokens=inputs * IMAGE_TOKENS_PER_INPUT)


def test_one_image_edit_through_the_sdk_answers_an_image_and_costs_its_price(sdk, accounts):
    # Given the demo account
    quota_before, used_before, _, _ = balance(accounts)
    # When the SDK edits one image with an iota model
    result = sdk.images.edit(model="iota-image-1", image=("photo.png", PNG, "image/png"), prompt="add a red hat")
    # Then one real PNG comes back (size auto: 1024x1024 for an image of no iota size) with usage
    assert len(result.data) == 1 and result.data[0].url is None
    assert decode_png(base64.b64decode(result.data[0].b64_json)) == (1024, 1024)
    assert result.usage.input_tokens_details.image_tokens == IMAGE_TOKENS_PER_INPUT
    # And the account paid the image plus its input image's tokens, held for one input at most
    quota, used, _, ledger = balance(accounts)
    assert used - used_before == quota_before - quota == charge(images=1, inputs=1)
    (model, units, reserved, outcome), = ledger
    assert (model, outcome, units) == ("iota-image-1", "settled", charge(images=1, inputs=1))
    assert reserved == unit_cost(PRICE, images=1, image_input_tokens=IMAGE_TOKENS_HELD_PER_INPUT)


def test_two_images_and_a_mask_through_the_sdk_answer_n_images_of_the_asked_size(sdk, accounts):
    quota_before, _, _, _ = balance(accounts)
    first = jpeg_of(1536, 1024)
    result = sdk.images.edit(model="iota-image-1",
                             image=[("room.jpg", first, "image/jpeg"), ("sofa.png", PNG, "image/png")],
                             mask=("mask.png", mask_png(1536, 1024), "image/png"), prompt="put the sofa in the room",
                             n=2, size="1536x1024", quality="low", background="opaque", output_format="png",
                             input_fidelity="high")
    assert [decode_png(base64.b64decode(item.b64_json)) for item in result.data] == [(1536, 1024)] * 2
    assert result.data[0].b64_json != result.data[1].b64_json
    assert result.usage.input_tokens_details.image_tokens == 3 * IMAGE_TOKENS_PER_INPUT
    quota, _, _, [(_, units, reserved, _)] = balance(accounts)
    assert quota_before - quota == units == charge(images=2, inputs=3)
    assert reserved == unit_cost(PRICE, images=2, image_input_tokens=3 * IMAGE_TOKENS_HELD_PER_INPUT)


def test_repeated_image_fields_are_read_as_several_images(images, simulated, demo, accounts):
    body, content_type = multipart({"model": "iota-image-1", "prompt": "merge them"},
                                   [("image", ("a.png", PNG, "image/png")),
                                    ("image", ("b.jpg", jpeg_of(8, 8), "image/jpeg"))])
    status, answer = edit_raw(images, body, content_type, demo["key"])
    assert status == 200 and answer["usage"]["input_tokens_details"]["image_tokens"] == 2 * IMAGE_TOKENS_PER_INPUT


def test_a_failed_edit_is_refunded_whole(sdk, accounts):
    before = balance(accounts)[0]
    with pytest.raises(openai.InternalServerError):
        sdk.images.edit(model="iota-image-1", image=("a.png", PNG, "image/png"), prompt="boom #fault=500")
    quota, used, count, [(_, units, _, outcome)] = balance(accounts)
    assert (quota, used, units, outcome) == (before, 0, 0, "refunded")


A_PNG = ("a.png", PNG, "image/png")
MASK = ("m.png", mask_png(4, 3), "image/png")
IOTA_RULES = [
    ({"prompt": ""}, [("image", A_PNG)], "prompt"),
    ({"prompt": "x" * 32001}, [("image", A_PNG)], "prompt"),
    ({}, [], "image"),
    ({}, [("image", A_PNG)] * 17, "image"),
    ({}, [("image", ("a.gif", b"GIF89a" + b"\x00" * 20, "image/gif"))], "image"),
    ({}, [("image", ("a.bmp", b"BM" + b"\x00" * 60, "image/bmp"))], "image"),
    ({}, [("image", ("a.jpg", JPEG, "image/jpeg"))], "image"),  # no frame header: its size cannot be read
    ({}, [("image", A_PNG), ("image[]", A_PNG)], "image"),
    ({}, [("image", A_PNG), ("mask", ("m.png", mask_png(4, 3, alpha=False), "image/png"))], "mask"),
    ({}, [("image", A_PNG), ("mask", ("m.png", mask_png(8, 3), "image/png"))], "mask"),
    ({}, [("image", A_PNG), ("mask", ("m.jpg", jpeg_of(4, 3), "image/jpeg"))], "mask"),
    ({}, [("image", A_PNG), ("mask", MASK), ("mask", MASK)], "mask"),
    ({"n": "0"}, [("image", A_PNG)], "n"),
    ({"n": "11"}, [("image", A_PNG)], "n"),
    ({"n": "two"}, [("image", A_PNG)], "n"),
    ({"size": "512x512"}, [("image", A_PNG)], "size"),
    ({"quality": "ultra"}, [("image", A_PNG)], "quality"),
    ({"background": "transparent", "output_format": "jpeg"}, [("image", A_PNG)], "background"),
    ({"output_format": "gif"}, [("image", A_PNG)], "output_format"),
    ({"output_compression": "101"}, [("image", A_PNG)], "output_compression"),
    ({"input_fidelity": "max"}, [("image", A_PNG)], "input_fidelity"),
    ({"response_format": "url"}, [("image", A_PNG)], "response_format"),
    ({"stream": "true"}, [("image", A_PNG)], "stream"),
    ({"seed": "3"}, [("image", A_PNG)], "seed"),
    ({"model": "iota-"}, [("image", A_PNG)], "model"),
    ({}, [("image", A_PNG), ("prompt", ("p.txt", b"hat", "text/plain"))], "prompt"),
]


@pytest.mark.parametrize("fields,files,field", IOTA_RULES, ids=[f"{f}-{i}" for i, (_, _, f) in enumerate(IOTA_RULES)])
def test_an_iota_edit_breaking_a_rule_is_a_400_naming_the_field_and_holds_nothing(
        images, simulated, demo, accounts, fields, files, field):
    before = balance(accounts)
    form = {"model": "iota-image-1", "prompt": "edit it", **fields}
    if "prompt" in dict(files):
        del form["prompt"]
    status, answer = edit(images, form, demo["key"], files=files or {})
    assert status == 400, answer
    assert answer["error"]["param"] == field and answer["error"]["message"].startswith(field)
    assert balance(accounts) == before


def test_the_sdk_default_form_shape_passes_the_gateway_rules_unchanged(sdk):
    # Given an SDK edit with every optional field the iota family takes
    result = sdk.images.edit(model="iota-image-1-mini", image=[A_PNG, A_PNG], prompt="p", n=1, size="auto",
                             quality="auto", background="auto", output_format="webp", output_compression=80,
                             response_format="b64_json", user="u-1")
    assert len(result.data) == 1 and json.loads(result.model_dump_json())["data"][0]["b64_json"]
