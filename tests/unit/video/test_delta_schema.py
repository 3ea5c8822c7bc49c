"""Delta request rules: every row of the spec's tables, a good value accepted and a bad one named."""

import copy

import pytest

from gateway.api.video import generic_family
from gateway.errors import InvalidRequest
from gateway.tasks.families.delta.schema import DELTA_MODELS, DeltaVideoRequest
from gateway.validation import parse_model

PNG = {"bytesBase64Encoded": "iVBORw0KGgoAAAANSUhEUg==", "mimeType": "image/png"}
MP4 = {"bytesBase64Encoded": "AAAAGGZ0eXBtcDQy", "mimeType": "video/mp4"}
GEN2 = "delta-2.0-generate-001"
GEN3 = "delta-3.0-generate-001"
GEN31 = "delta-3.1-generate-preview"


def body(model=GEN3, instance=None, **parameters):
    params = {"durationSeconds": 8 if model.startswith(("delta-3.0", "delta-3.1")) else 5}
    if not model.startswith("delta-2"):
        params["generateAudio"] = True
    params.update(parameters)
    return {"model": model, "instances": [instance or {"prompt": "a red fox in snow"}], "parameters": params}


def accepted(data):
    return parse_model(DeltaVideoRequest, data)


def rejected(data):
    with pytest.raises(InvalidRequest) as caught:
        parse_model(DeltaVideoRequest, data)
    return caught.value.message, caught.value.param


@pytest.mark.parametrize("model", [*DELTA_MODELS])
def test_every_listed_model_accepts_text_to_video(model):
    assert accepted(body(model)).model == model


def test_an_unknown_delta_model_is_rejected_naming_the_model():
    message, param = rejected(body("delta-9.9-generate-001"))
    assert param == "model" and "delta-9.9-generate-001" in message


def test_instances_must_be_a_non_empty_list():
    data = body()
    data["instances"] = []
    assert rejected(data)[1] == "instances"


def test_prompt_is_required_and_not_blank():
    assert rejected(body(instance={"image": PNG})) == ("instances[0].prompt: is required", "instances[0].prompt")
    assert rejected(body(instance={"prompt": "   "}))[1] == "instances[0].prompt"


def test_parameters_and_duration_are_required():
    data = body()
    del data["parameters"]
    assert rejected(data)[1] == "parameters"
    data = body()
    del data["parameters"]["durationSeconds"]
    assert rejected(data) == ("parameters.durationSeconds: is required", "parameters.durationSeconds")


@pytest.mark.parametrize("model,good,bad", [
    (GEN2, [5, 6, 7, 8], [4, 9, 0]),
    (GEN3, [4, 6, 8], [5, 7, 10]),
    (GEN31, [4, 6, 8], [5, 7, 3]),
])
def test_duration_follows_the_generation(model, good, bad):
    for seconds in good:
        assert accepted(body(model, durationSeconds=seconds)).parameters.durationSeconds == seconds
    for seconds in bad:
        message, param = rejected(body(model, durationSeconds=seconds))
        assert param == "parameters.durationSeconds" and model in message


def test_duration_must_be_an_integer_not_a_string():
    assert rejected(body(durationSeconds="8"))[1] == "parameters.durationSeconds"


def test_generate_audio_is_required_for_generation_3_and_3_1_only():
    for model in (GEN3, GEN31):
        data = body(model)
        del data["parameters"]["generateAudio"]
        assert rejected(data)[1] == "parameters.generateAudio"
    assert accepted(body(GEN2)).parameters.generateAudio is None


def test_enhance_prompt_is_for_generation_2_only():
    assert accepted(body(GEN2, enhancePrompt=True)).parameters.enhancePrompt is True
    assert rejected(body(GEN3, enhancePrompt=True))[1] == "parameters.enhancePrompt"


def test_resolution_is_720p_or_1080p_on_generation_3_only():
    assert accepted(body(GEN31, resolution="1080p")).parameters.resolution == "1080p"
    assert rejected(body(GEN3, resolution="4k"))[1] == "parameters.resolution"
    assert rejected(body(GEN2, resolution="720p"))[1] == "parameters.resolution"


def test_resize_mode_is_for_generation_3_image_to_video_only():
    with_image = {"prompt": "animate", "image": PNG}
    assert accepted(body(GEN3, with_image, resizeMode="crop")).parameters.resizeMode == "crop"
    assert accepted(body(GEN31, with_image, resizeMode="pad")).parameters.resizeMode == "pad"
    message, param = rejected(body(GEN3, resizeMode="pad"))
    assert param == "parameters.resizeMode" and "image" in message
    assert rejected(body(GEN2, with_image, resizeMode="pad"))[1] == "parameters.resizeMode"
    assert rejected(body(GEN3, with_image, resizeMode="stretch"))[1] == "parameters.resizeMode"


@pytest.mark.parametrize("field,good,bad", [
    ("aspectRatio", ["16:9", "9:16", "1:1"], ["4:3", "wide"]),
    ("personGeneration", ["allow_adult", "dont_allow"], ["allow_all", ""]),
    ("sampleCount", [1, 4], [0, 5, "2"]),
    ("seed", [0, 4294967295], [-1, 4294967296, 1.5]),
    ("negativePrompt", ["blurry"], [7]),
])
def test_plain_parameters_keep_their_ranges(field, good, bad):
    for value in good:
        assert getattr(accepted(body(**{field: value})).parameters, field) == value
    for value in bad:
        assert rejected(body(**{field: value}))[1] == f"parameters.{field}"


def test_an_unknown_parameter_is_named():
    assert rejected(body(fps=24)) == ("parameters.fps: is not a known field", "parameters.fps")


# The spec's feature table, model by model: (field, value, models that take it).
FEATURES = [
    ("lastFrame", PNG, {"delta-2.0-generate-001", "delta-3.1-generate-preview", "delta-3.1-fast-generate-preview",
                        "delta-3.1-generate-001", "delta-3.1-fast-generate-001"}),
    ("video", MP4, {"delta-2.0-generate-001"}),
    ("mask", PNG, {"delta-2.0-generate-preview"}),
    ("referenceImages", [PNG, PNG], {"delta-2.0-generate-exp", "delta-3.1-generate-preview"}),
]


@pytest.mark.parametrize("field,value,models", FEATURES)
def test_optional_media_is_accepted_exactly_where_the_feature_table_allows(field, value, models):
    for model in DELTA_MODELS:
        instance = {"prompt": "go", "image": PNG, field: copy.deepcopy(value)}
        if model in models:
            assert getattr(accepted(body(model, instance)).instances[0], field) is not None
        else:
            message, param = rejected(body(model, instance))
            assert param == f"instances[0].{field}" and model in message


def test_image_is_taken_by_every_model():
    for model in DELTA_MODELS:
        assert accepted(body(model, {"prompt": "go", "image": PNG})).instances[0].image.mimeType == "image/png"


def test_a_last_frame_needs_a_first_frame():
    message, param = rejected(body(GEN31, {"prompt": "go", "lastFrame": PNG}))
    assert param == "instances[0].lastFrame" and "image" in message


@pytest.mark.parametrize("nested", [
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}},
    {"inline_data": {"mime_type": "image/png", "data": "iVBORw0K"}},
])
def test_the_nested_inline_data_form_is_rejected_with_image_is_empty(nested):
    message, param = rejected(body(GEN3, {"prompt": "go", "image": nested}))
    assert "image is empty" in message and param == "instances[0].image"


@pytest.mark.parametrize("key", ["gcsUri", "uri"])
def test_storage_uri_media_is_not_supported(key):
    message, param = rejected(body(GEN3, {"prompt": "go", "image": {key: "gs://b/o.png", "mimeType": "image/png"}}))
    assert param == "instances[0].image" and "not supported" in message


def test_storage_uri_output_is_not_supported():
    assert "storageUri is not supported" in rejected(body(storageUri="gs://bucket/out/"))[0]


@pytest.mark.parametrize("media,field", [
    ({"mimeType": "image/png"}, "bytesBase64Encoded"),
    ({"bytesBase64Encoded": "iVBORw0K"}, "mimeType"),
    ({"bytesBase64Encoded": "not base64!!", "mimeType": "image/png"}, "bytesBase64Encoded"),
    ({"bytesBase64Encoded": "", "mimeType": "image/png"}, "bytesBase64Encoded"),
    ({"bytesBase64Encoded": "data:image/png;base64,iVBORw0K", "mimeType": "image/png"}, "bytesBase64Encoded"),
    ({"bytesBase64Encoded": "iVBORw0K", "mimeType": "png"}, "mimeType"),
    ({"bytesBase64Encoded": "iVBORw0K", "mimeType": "video/mp4"}, "mimeType"),
])
def test_media_needs_both_fields_valid_base64_and_a_matching_type(media, field):
    assert rejected(body(GEN3, {"prompt": "go", "image": media}))[1] == f"instances[0].image.{field}"


def test_url_safe_and_unpadded_base64_is_accepted():
    media = {"bytesBase64Encoded": "iVBORw0K-_8", "mimeType": "image/jpeg"}
    assert accepted(body(GEN3, {"prompt": "go", "image": media})).instances[0].image.model_dump() == media


def test_billing_counts_every_video_and_upstream_body_leaves_the_model_out():
    request = accepted(body(GEN3, durationSeconds=6, sampleCount=3))
    assert (request.sample_count, request.billable_seconds) == (3, 18)
    assert accepted(body(GEN2, durationSeconds=7)).billable_seconds == 7
    assert request.upstream_body() == {
        "instances": [{"prompt": "a red fox in snow"}],
        "parameters": {"durationSeconds": 6, "generateAudio": True, "sampleCount": 3}}


def test_the_generations_endpoint_routes_delta_bodies_by_model():
    assert generic_family(body(GEN31)).generic_task(body(GEN31), "/v1/video/generations").model == GEN31
