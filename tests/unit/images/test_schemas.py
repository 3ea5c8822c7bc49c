import json

import pytest

from gateway.errors import InvalidRequest
from gateway.multipart import Form, UploadedFile, parse_multipart
from gateway.schemas.images import (
    EDIT_PROMPT_MAX,
    IOTA_MODELS,
    IOTA_PROMPT_MAX,
    MAX_IMAGE_BYTES,
    SEED_MAX,
    THETA_MODELS,
    THETA_PROMPT_MAX,
    ImageEditRequest,
    IotaGenerationRequest,
    ThetaGenerationRequest,
    image_count,
    image_family,
    parse_edit_form,
    parse_generation,
    parse_generation_body,
)
from tests.imagefiles import BMP, JPEG, PNG, TIFF_LE, WEBP, multipart

IOTA = {"model": "iota-image-1", "prompt": "a lighthouse at dusk"}
THETA = {"model": "theta-3", "prompt": "a lighthouse at dusk"}


def refused(data) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_generation(data)
    assert caught.value.status == 400
    return caught.value


# --- model and family ------------------------------------------------------------------------

@pytest.mark.parametrize("model,family", [
    *((m, "iota") for m in IOTA_MODELS), *((m, "theta") for m in THETA_MODELS),
    ("iota-image-2", "iota"), ("eta-image-edit", "eta"),
])
def test_the_family_comes_from_the_model_id(model, family):
    assert image_family(model) == family


@pytest.mark.parametrize("model", ["", "iota-", "theta-", "gpt-image-1", "eta-other", "IOTA-image-1", 42, None])
def test_an_unknown_model_is_a_400_naming_model(model):
    with pytest.raises(InvalidRequest) as caught:
        image_family(model)
    assert caught.value.param == "model"
    assert refused({**IOTA, "model": model}).param == "model"


def test_the_edit_model_is_refused_on_generations_with_a_pointer_to_edits():
    error = refused({**IOTA, "model": "eta-image-edit"})
    assert error.param == "model" and "/v1/images/edits" in error.message


def test_a_body_that_is_not_an_object_is_refused():
    assert "JSON object" in refused(["iota-image-1"]).message
    with pytest.raises(InvalidRequest, match="not valid JSON"):
        parse_generation_body("{model:")


def test_the_body_is_chosen_by_model():
    assert isinstance(parse_generation(IOTA), IotaGenerationRequest)
    assert isinstance(parse_generation_body(json.dumps(THETA)), ThetaGenerationRequest)


def test_a_family_model_cannot_be_validated_as_the_other_family():
    with pytest.raises(ValueError):
        IotaGenerationRequest.model_validate(THETA)
    with pytest.raises(ValueError):
        ThetaGenerationRequest.model_validate(IOTA)


# --- iota ------------------------------------------------------------------------------------

def test_iota_defaults_are_resolved():
    request = parse_generation(IOTA)
    assert (request.n, request.quality, request.size) == (1, "auto", "auto")
    assert request.upstream_payload() == {**IOTA, "n": 1, "quality": "auto", "size": "auto"}
    assert image_count(request) == 1


@pytest.mark.parametrize("changes", [
    {"n": 10}, {"n": None}, {"quality": "low"}, {"quality": "high"}, {"size": "1536x1024"},
    {"size": "1024x1536"}, {"output_format": "webp", "background": "transparent"},
    {"output_format": "jpeg", "output_compression": 80, "background": "opaque"}, {"moderation": "low"},
    {"response_format": "b64_json"}, {"user": "u-1"}, {"model": "iota-image-1-mini"},
    {"prompt": "x" * IOTA_PROMPT_MAX},
])
def test_good_iota_bodies_are_accepted(changes):
    request = parse_generation({**IOTA, **changes})
    for key, value in changes.items():
        assert getattr(request, key) == (1 if key == "n" and value is None else value)


@pytest.mark.parametrize("changes,param,needle", [
    ({"prompt": None}, "prompt", "is required"),
    ({"prompt": ""}, "prompt", "must not be empty"),
    ({"prompt": "   "}, "prompt", "must not be empty"),
    ({"prompt": 7}, "prompt", "valid string"),
    ({"prompt": "x" * (IOTA_PROMPT_MAX + 1)}, "prompt", f"at most {IOTA_PROMPT_MAX} characters"),
    ({"n": 0}, "n", "must be 1 to 10"),
    ({"n": 11}, "n", "must be 1 to 10"),
    ({"n": "2"}, "n", "must be an integer"),
    ({"n": 2.5}, "n", "must be an integer"),
    ({"n": True}, "n", "must be an integer"),
    ({"quality": "ultra"}, "quality", "'low', 'medium', 'high' or 'auto'"),
    ({"quality": "hd"}, "quality", "'low'"),
    ({"size": "512x512"}, "size", "'1024x1024', '1024x1536', '1536x1024' or 'auto'"),
    ({"size": "1792x1024"}, "size", "'1024x1024'"),
    ({"output_format": "gif"}, "output_format", "'png', 'jpeg' or 'webp'"),
    ({"background": "green"}, "background", "'transparent', 'opaque' or 'auto'"),
    ({"background": "transparent", "output_format": "jpeg"}, "background", "png or webp"),
    ({"output_compression": 101}, "output_compression", "0 to 100"),
    ({"moderation": "none"}, "moderation", "'auto' or 'low'"),
    ({"response_format": "url"}, "response_format", "always answer b64_json"),
    ({"style": "vivid"}, "style", "is not a known field"),
])
def test_bad_iota_values_are_refused_naming_the_field_and_rule(changes, param, needle):
    body = {**IOTA, **changes}
    body = {k: v for k, v in body.items() if not (k == "prompt" and v is None)}
    error = refused(body)
    assert error.param == param
    assert error.message.startswith(f"{param}: ") and needle in error.message


# --- theta -----------------------------------------------------------------------------------

def test_theta_defaults_and_nulls_are_resolved():
    request = parse_generation({**THETA, "n": None, "response_format": None, "size": None})
    assert (request.n, request.response_format, request.size, request.quality, request.style) == (
        1, "url", "1024x1024", "standard", "vivid")
    assert image_count(request) == 1


@pytest.mark.parametrize("changes", [
    {"n": 1}, {"n": 1.0}, {"response_format": "b64_json"}, {"response_format": "url"},
    {"size": "1792x1024"}, {"size": "1024x1792"}, {"quality": "hd"}, {"style": "natural"},
    {"prompt": "x" * THETA_PROMPT_MAX}, {"user": "someone"},
])
def test_good_theta_bodies_are_accepted(changes):
    request = parse_generation({**THETA, **changes})
    for key, value in changes.items():
        assert getattr(request, key) == value


@pytest.mark.parametrize("changes,param,needle", [
    ({"prompt": "x" * (THETA_PROMPT_MAX + 1)}, "prompt", f"at most {THETA_PROMPT_MAX} characters"),
    ({"prompt": ""}, "prompt", "must not be empty"),
    ({"n": 2}, "n", "must be 1 for theta models"),
    ({"n": 0}, "n", "must be 1"),
    ({"n": 1.5}, "n", "must be an integer"),
    ({"n": "1"}, "n", "must be an integer"),
    ({"response_format": "png"}, "response_format", "'url' or 'b64_json'"),
    ({"size": "auto"}, "size", "'1024x1024', '1792x1024' or '1024x1792'"),
    ({"quality": "high"}, "quality", "'standard' or 'hd'"),
    ({"style": "cartoon"}, "style", "'vivid' or 'natural'"),
    ({"background": "auto"}, "background", "is not a known field"),
])
def test_bad_theta_values_are_refused_naming_the_field_and_rule(changes, param, needle):
    error = refused({**THETA, **changes})
    assert error.param == param and error.message.startswith(f"{param}: ") and needle in error.message


def test_theta_prompt_is_required():
    error = refused({"model": "theta-3"})
    assert (error.param, error.message) == ("prompt", "prompt: is required")


# --- edits -----------------------------------------------------------------------------------

def edit_form(fields: dict | None = None, image: bytes | None = PNG, filename: str = "photo.png") -> Form:
    form = Form(fields={"model": "eta-image-edit", "prompt": "make it blue", **(fields or {})})
    if image is not None:
        form.files["image"] = UploadedFile(filename, "image/png", image)
    return form


def edit_refused(form: Form) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_edit_form(form)
    assert caught.value.status == 400
    return caught.value


def test_an_edit_form_from_httpx_is_accepted_with_its_values_coerced():
    # Given a realistic multipart body with every field
    body, content_type = multipart(
        {"model": "eta-image-edit", "prompt": "add a hat", "negative_prompt": "blur", "n": "3",
         "response_format": "b64_json", "seed": str(SEED_MAX)},
        {"image": ("cat.webp", WEBP, "image/webp")})
    # When it is parsed and validated
    request = parse_edit_form(parse_multipart(body, content_type))
    # Then the strings became typed values
    assert (request.n, request.seed, request.response_format, request.image_type) == (3, SEED_MAX, "b64_json", "webp")
    assert image_count(request) == 3
    assert request.upstream_fields() == {"model": "eta-image-edit", "prompt": "add a hat", "negative_prompt": "blur",
                                         "n": "3", "response_format": "b64_json", "seed": str(SEED_MAX)}


def test_edit_defaults():
    request = parse_edit_form(edit_form())
    assert (request.n, request.response_format, request.seed, request.negative_prompt) == (1, "url", None, None)
    assert request.upstream_fields() == {"model": "eta-image-edit", "prompt": "make it blue", "n": "1",
                                         "response_format": "url"}


@pytest.mark.parametrize("data,kind", [(PNG, "png"), (JPEG, "jpeg"), (BMP, "bmp"), (TIFF_LE, "tiff"), (WEBP, "webp")])
def test_every_accepted_format_is_an_edit_image(data, kind):
    assert parse_edit_form(edit_form(image=data)).image_type == kind


def test_the_type_comes_from_the_bytes_not_the_name():
    # A PNG named .jpg is a PNG; a text file named .png is not an image
    assert parse_edit_form(edit_form(image=PNG, filename="holiday.jpg")).image_type == "png"
    error = edit_refused(edit_form(image=b"I am text, honestly", filename="picture.png"))
    assert error.param == "image" and "recognised from its content" in error.message


def test_an_image_of_10_mb_or_more_is_refused_naming_the_rule():
    just_under = PNG + b"\x00" * (MAX_IMAGE_BYTES - 1 - len(PNG))
    assert parse_edit_form(edit_form(image=just_under)).image.size == MAX_IMAGE_BYTES - 1
    error = edit_refused(edit_form(image=just_under + b"\x00"))
    assert error.param == "image" and "under 10 MB" in error.message


@pytest.mark.parametrize("fields,param,needle", [
    ({"n": "2.5"}, "n", "must be an integer"),
    ({"n": "x"}, "n", "must be an integer"),
    ({"n": ""}, "n", "must be an integer"),
    ({"n": "0"}, "n", "must be 1 to 4"),
    ({"n": "5"}, "n", "must be 1 to 4"),
    ({"seed": "-1"}, "seed", f"must be 0 to {SEED_MAX}"),
    ({"seed": str(SEED_MAX + 1)}, "seed", f"must be 0 to {SEED_MAX}"),
    ({"seed": "1e3"}, "seed", "must be an integer"),
    ({"prompt": "x" * (EDIT_PROMPT_MAX + 1)}, "prompt", f"at most {EDIT_PROMPT_MAX} characters"),
    ({"prompt": " "}, "prompt", "must not be empty"),
    ({"response_format": "png"}, "response_format", "'url' or 'b64_json'"),
    ({"model": "theta-3"}, "model", "expected eta-image-edit or an iota-* model"),
    ({"mask": "x"}, "mask", "is not a known field"),
])
def test_bad_edit_values_are_refused_naming_the_field(fields, param, needle):
    error = edit_refused(edit_form(fields))
    assert error.param == param and error.message.startswith(f"{param}: ") and needle in error.message


@pytest.mark.parametrize("fields", [{"n": "4"}, {"n": "1"}, {"seed": "0"}, {"seed": " 42 "},
                                    {"prompt": "y" * EDIT_PROMPT_MAX}, {"negative_prompt": "no people"}])
def test_good_edit_values_are_accepted(fields):
    parse_edit_form(edit_form(fields))


def test_required_edit_fields_are_named():
    form = edit_form()
    del form.fields["prompt"]
    assert edit_refused(form).message == "prompt: is required"
    assert edit_refused(edit_form(image=None)).message == "image: is required"
    form = edit_form()
    del form.fields["model"]
    assert edit_refused(form).param == "model"


def test_the_image_must_be_one_file_part():
    form = edit_form(image=None)
    form.fields["image"] = "iVBORw0KGgo="
    assert "must be a file part" in edit_refused(form).message
    form = edit_form(image=None)
    form.files["image[]"] = UploadedFile("a.png", "image/png", PNG)
    assert edit_refused(form).param == "image"
    form = edit_form()
    form.files["prompt"] = UploadedFile("p.txt", "text/plain", b"hello")
    del form.fields["prompt"]
    assert "must be a text field" in edit_refused(form).message
    assert "is empty" in edit_refused(edit_form(image=b"")).message


def test_an_edit_request_can_be_built_directly():
    request = ImageEditRequest(model="eta-image-edit", prompt="p", image=UploadedFile("a", "b", JPEG), n=2)
    assert image_count(request) == 2 and request.family == "eta"
