"""The gamma request rules on values a fuzzer sends: an explicit null is the field left out."""

import pytest

from gateway.errors import InvalidRequest
from gateway.tasks.families.gamma.schema import GammaRequest
from gateway.validation import parse_model


def test_a_null_image_and_audio_on_a_text_model_are_the_fields_left_out():
    # Given a text-to-video body whose optional links are explicit nulls
    body = {"model": "gamma2.6-t2v", "input": {"prompt": "a fern", "img_url": None, "audio_url": None}}
    # When it is parsed
    request = parse_model(GammaRequest, body)
    # Then both are absent, as if never sent
    assert request.input.img_url is None and request.input.audio_url is None


def test_a_null_image_on_an_image_model_is_a_400_naming_img_url():
    with pytest.raises(InvalidRequest) as caught:
        parse_model(GammaRequest, {"model": "gamma2.6-i2v", "input": {"prompt": "a fern", "img_url": None}})
    assert caught.value.status == 400 and "img_url" in caught.value.message
