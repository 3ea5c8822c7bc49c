"""Epsilon request rules and the family routing shared by the video endpoints."""

import pytest

from gateway.api.video import generic_family, video_family
from gateway.errors import InvalidRequest
from gateway.tasks.families.epsilon.schema import EpsilonVideoRequest
from gateway.validation import parse_model


def accepted(**data):
    return parse_model(EpsilonVideoRequest, data)


def rejected(**data):
    with pytest.raises(InvalidRequest) as caught:
        parse_model(EpsilonVideoRequest, data)
    return caught.value.message, caught.value.param


def test_a_bare_prompt_gets_the_defaults():
    request = accepted(prompt="a paper boat")
    assert (request.model, request.seconds, request.size) == ("epsilon-2", "4", "1280x720")
    assert (request.billable_seconds, request.sample_count) == (4, 1)


def test_prompt_is_required_and_not_blank():
    assert rejected() == ("prompt: is required", "prompt")
    assert rejected(prompt=" ")[1] == "prompt"


def test_model_is_epsilon_2_or_epsilon_2_pro():
    assert accepted(prompt="p", model="epsilon-2-pro").model == "epsilon-2-pro"
    assert rejected(prompt="p", model="epsilon-3")[1] == "model"


def test_seconds_is_one_of_the_strings_4_8_12():
    for seconds in ("4", "8", "12"):
        assert accepted(prompt="p", seconds=seconds).billable_seconds == int(seconds)
    for seconds in (8, "6", "8s", None):
        message, param = rejected(prompt="p", seconds=seconds)
        assert param == "seconds" and "strings" in message


def test_large_sizes_are_for_the_pro_model_only():
    for size in ("720x1280", "1280x720"):
        assert accepted(prompt="p", size=size).size == size
    for size in ("1024x1792", "1792x1024"):
        assert accepted(prompt="p", size=size, model="epsilon-2-pro").size == size
        message, param = rejected(prompt="p", size=size)
        assert param == "size" and "epsilon-2-pro" in message
    assert rejected(prompt="p", size="1920x1080")[1] == "size"


def test_unknown_fields_are_named():
    assert rejected(prompt="p", duration=4) == ("duration: is not a known field", "duration")


def test_upstream_body_carries_the_defaults():
    assert accepted(prompt="p").upstream_body() == {
        "prompt": "p", "model": "epsilon-2", "seconds": "4", "size": "1280x720"}


@pytest.mark.parametrize("model,family", [
    ("delta-3.0-generate-001", "delta"), ("zeta-video-1-0-pro-250528", "zeta"), ("epsilon-2", "epsilon"),
])
def test_video_family_follows_the_model_prefix(model, family):
    assert video_family(model).name == family


@pytest.mark.parametrize("model", ["gpt-4o", "omega-v1", "", None, 7])
def test_a_model_of_no_video_family_is_a_400_naming_it(model):
    with pytest.raises(InvalidRequest) as caught:
        video_family(model)
    assert caught.value.param == "model" and repr(model) in caught.value.message


def test_the_generations_endpoint_needs_a_delta_or_zeta_model():
    with pytest.raises(InvalidRequest, match="model: is required"):
        generic_family({"instances": []})
    with pytest.raises(InvalidRequest, match="POST /v1/videos"):
        generic_family({"model": "epsilon-2", "prompt": "p"})
    with pytest.raises(InvalidRequest, match="JSON object"):
        generic_family([])
