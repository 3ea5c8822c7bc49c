"""Zeta request rules: content items, frame rules, text commands and the reject/ignore table."""

import pytest

from gateway.api.video import generic_family
from gateway.errors import InvalidRequest
from gateway.tasks.families.zeta.schema import (
    ZETA_COMMAND_RULES,
    ZETA_LITE_I2V,
    ZETA_LITE_T2V,
    ZETA_MODELS,
    ZETA_PRO,
    ZetaVideoRequest,
    parse_text_commands,
)
from gateway.validation import parse_model

LINK = {"url": "https://img.example/cat.png"}
DATA = {"image_url": "data:image/png;base64,iVBORw0KGgo="}


def text(value):
    return {"type": "text", "text": value}


def image(source=None, role=None):
    item = {"type": "image_url", "image_url": LINK if source is None else source}
    if role:
        item["role"] = role
    return item


def accepted(model, *content, **extra):
    return parse_model(ZetaVideoRequest, {"model": model, "content": list(content), **extra})


def rejected(model, *content, **extra):
    with pytest.raises(InvalidRequest) as caught:
        accepted(model, *content, **extra)
    return caught.value.message, caught.value.param


def test_only_the_three_zeta_models_are_known():
    for model in ZETA_MODELS:
        assert accepted(model, text("a cat"), *([image()] if model == ZETA_LITE_I2V else [])).model == model
    assert rejected("zeta-video-2", text("a cat"))[1] == "model"


def test_content_is_a_non_empty_list_of_typed_items():
    assert rejected(ZETA_PRO)[1] == "content"
    assert rejected(ZETA_PRO, {"type": "audio", "text": "x"})[1] == "content[0].type"
    assert rejected(ZETA_PRO, {"text": "x"}) == ("content[0].type: is required", "content[0].type")


def test_text_and_image_url_belong_to_their_own_item_type():
    assert rejected(ZETA_PRO, {"type": "text"})[1] == "content[0].text"
    assert rejected(ZETA_PRO, {"type": "text", "text": "x", "image_url": LINK})[1] == "content[0].image_url"
    assert rejected(ZETA_PRO, {"type": "text", "text": "x", "role": "first_frame"})[1] == "content[0].role"
    assert rejected(ZETA_PRO, {"type": "image_url"})[1] == "content[0].image_url"
    assert rejected(ZETA_PRO, {"type": "image_url", "image_url": LINK, "text": "x"})[1] == "content[0].text"


@pytest.mark.parametrize("source", [
    {"url": "ftp://img.example/cat.png"}, {"url": "cat.png"},
    {"image_url": "https://img.example/cat.png"}, {"image_url": "data:text/plain;base64,aGk="},
    {"image_url": "data:image/png;base64,***"}, {},
    {"url": "https://img.example/cat.png", "image_url": "data:image/png;base64,iVBORw0KGgo="},
])
def test_an_image_is_an_http_link_or_a_base64_data_url_exactly_one_of_them(source):
    message, param = rejected(ZETA_LITE_I2V, image(source))
    assert param.startswith("content[0].image_url")


def test_both_image_forms_are_accepted():
    assert accepted(ZETA_LITE_I2V, image(LINK)).mode == "image-to-video"
    assert accepted(ZETA_LITE_I2V, image(DATA, "first_frame")).content[0].image_url.image_url.startswith("data:")


def test_role_is_first_frame_or_last_frame():
    assert rejected(ZETA_LITE_I2V, image(role="middle_frame"))[1] == "content[0].role"


def test_lite_t2v_takes_text_only():
    message, param = rejected(ZETA_LITE_T2V, text("a cat"), image())
    assert param == "content[1]" and "text only" in message
    assert accepted(ZETA_LITE_T2V, text("a cat --ratio 16:9")).mode == "text-to-video"


def test_lite_i2v_needs_a_first_frame_and_takes_optional_text_and_last_frame():
    message, param = rejected(ZETA_LITE_I2V, text("a cat"))
    assert param == "content" and "first-frame" in message
    assert accepted(ZETA_LITE_I2V, image()).mode == "image-to-video"
    assert accepted(ZETA_LITE_I2V, image(role="first_frame"), image(DATA, "last_frame"), text("walks"))


def test_pro_takes_text_to_video_and_image_to_video():
    assert accepted(ZETA_PRO, text("a cat")).mode == "text-to-video"
    assert accepted(ZETA_PRO, image(), text("a cat")).mode == "image-to-video"


def test_text_to_video_needs_a_prompt():
    assert rejected(ZETA_PRO, {"type": "text", "text": "--ratio 16:9"})[1] == "content[0].text"
    assert rejected(ZETA_LITE_T2V, {"type": "text", "text": ""})[1] == "content[0].text"


def test_only_one_text_item():
    assert rejected(ZETA_PRO, text("a"), text("b"))[1] == "content[1]"


def test_frame_rules():
    # At most one first and one last frame, both roles when there are two images, a last needs a first.
    assert rejected(ZETA_LITE_I2V, image(role="first_frame"), image(role="first_frame"))[1] == "content[1].role"
    assert rejected(ZETA_LITE_I2V, image(role="last_frame"), image(role="last_frame"))[1] == "content[1].role"
    assert rejected(ZETA_LITE_I2V, image(), image(role="last_frame"))[1] == "content[0].role"
    message, param = rejected(ZETA_LITE_I2V, image(role="last_frame"))
    assert param == "content[0].role" and "requires a first_frame" in message
    assert rejected(ZETA_PRO, image(role="first_frame"), image(role="last_frame"), image())[1] == "content[2]"


def test_first_and_last_frame_supports_only_480p_and_720p():
    frames = (image(role="first_frame"), image(role="last_frame"))
    for rs in ("480p", "720p"):
        assert accepted(ZETA_LITE_I2V, *frames, text(f"walk --rs {rs}")).commands == {"rs": rs}
    message, param = rejected(ZETA_LITE_I2V, *frames, text("walk --rs 1080p"))
    assert param == "content[2].text" and "480p and 720p" in message
    assert accepted(ZETA_LITE_I2V, image(), text("walk --rs 1080p")).commands == {"rs": "1080p"}


def test_callback_url_is_optional_http_and_never_relayed():
    request = accepted(ZETA_PRO, text("a cat"), callback_url="https://hooks.example/done")
    assert request.callback_url == "https://hooks.example/done"
    assert "callback_url" not in request.upstream_body()
    assert rejected(ZETA_PRO, text("a cat"), callback_url="file:///etc/passwd")[1] == "callback_url"


def test_text_commands_are_parsed_into_typed_values():
    commands = {c.name: c.value for c in parse_text_commands(
        "a fox runs --ratio 9:16 --duration 10 --rs 720P --fps 24 --wm TRUE --seed -1 --cf false")}
    assert commands == {"ratio": "9:16", "duration": 10, "rs": "720p", "fps": 24, "wm": True, "seed": -1, "cf": False}


def test_long_aliases_count_as_their_command():
    assert {c.name: c.value for c in parse_text_commands("x --dur 5 --resolution 480p --camerafixed true")} == {
        "duration": 5, "rs": "480p", "cf": True}
    with pytest.raises(ValueError, match="twice"):
        parse_text_commands("x --dur 5 --duration 10")


def test_unknown_double_dash_words_are_prompt_text():
    assert parse_text_commands("a--b --style noir -- end") == []


@pytest.mark.parametrize("command", [
    "--duration abc", "--duration 0", "--rs 4k", "--ratio 5:7", "--wm yes", "--cf 1",
    "--seed 4294967296", "--seed -2", "--fps fast", "--ratio", "--duration --wm true",
])
def test_malformed_commands_are_rejected_on_every_model(command):
    for model in ZETA_MODELS:
        extra = [image()] if model == ZETA_LITE_I2V else []
        message, param = rejected(model, *extra, text(f"a cat {command}"))
        assert param == f"content[{len(extra)}].text" and command.split()[0] in message


def test_a_duration_the_model_cannot_make_is_rejected():
    message, param = rejected(ZETA_PRO, text("a cat --duration 7"))
    assert param == "content[0].text" and "5, 10" in message


def test_unsupported_but_harmless_values_are_ignored_and_stripped():
    request = accepted(ZETA_LITE_T2V, text("a cat --ratio adaptive --fps 30 --wm false"))
    assert request.ignored_commands == ["--ratio adaptive", "--fps 30"]
    assert request.commands == {"wm": False}
    assert request.upstream_body()["content"] == [{"type": "text", "text": "a cat --wm false"}]


def test_image_ratios_are_kept_when_there_is_an_image():
    request = accepted(ZETA_PRO, image(), text("a cat --ratio keep_ratio"))
    assert request.commands == {"ratio": "keep_ratio"} and request.ignored_commands == []
    assert accepted(ZETA_PRO, text("a cat --ratio keep_ratio")).ignored_commands == ["--ratio keep_ratio"]


def test_the_table_covers_every_command_in_both_modes():
    for mode in ("text-to-video", "image-to-video"):
        assert set(ZETA_COMMAND_RULES[mode]) == {"ratio", "duration", "rs", "fps", "wm", "seed", "cf"}


def test_billing_uses_the_duration_command_or_five_seconds():
    assert accepted(ZETA_PRO, text("a cat --dur 10")).billable_seconds == 10
    request = accepted(ZETA_PRO, text("a cat"))
    assert (request.billable_seconds, request.sample_count) == (5, 1)


def test_the_generations_endpoint_routes_zeta_bodies_by_model():
    data = {"model": ZETA_PRO, "content": [text("a")]}
    assert generic_family(data).generic_task(data, "/v1/video/generations").family == "zeta"
