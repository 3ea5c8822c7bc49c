"""Request rules of the images routes: generation (iota and theta families) and editing (eta).

`POST /v1/images/generations` takes a JSON body whose shape is chosen by `model`:

- iota family (`iota-*`, gpt-image style; always answers `b64_json`):
  `prompt` 1..32000 characters; `n` integer 1..10 (default 1); `quality` low | medium | high |
  auto (default auto); `size` 1024x1024 | 1024x1536 | 1536x1024 | auto (default auto);
  `output_format` png | jpeg | webp, `background` transparent | opaque | auto (transparent needs
  png or webp), `output_compression` 0..100, `moderation` auto | low, `user`: optional, passed
  through. `response_format` may only be b64_json (or absent).
- theta family (`theta-*`, dall-e style): `prompt` 1..4000 characters; `n` a number or null,
  default 1, and it must be 1; `response_format` url | b64_json or null (default url; a URL
  lives 60 minutes); `size` 1024x1024 | 1792x1024 | 1024x1792 (default 1024x1024); `quality`
  standard | hd (default standard); `style` vivid | natural (default vivid); `user` optional.

The family is recognised by the model id's prefix, so an operator can serve a newer id of a
known family through the channels document without a code change; the ids we ship are listed
in `IOTA_MODELS` / `THETA_MODELS`. Any other model is a 400 naming `model`.

`POST /v1/images/edits` is multipart (see `gateway.multipart`); its fields arrive as strings.
Integers in a form must be written as integers ("2", not "2.5"). The rules follow `model`:

- `eta-image-edit`: `image` one file, JPEG/PNG/BMP/TIFF/WEBP recognised from its bytes, under
  10 MB; `prompt` 1..800 characters; `negative_prompt` optional; `n` integer 1..4 (default 1;
  the charge multiplies); `response_format` url | b64_json (default url); `seed` integer
  0..2147483647.
- iota family: `image` 1..16 files (sent as `image`, repeated `image`, or `image[]`), each a
  PNG, JPEG or WEBP recognised from its bytes whose size can be read, under 50 MB; `mask`
  optional, a PNG with transparency (an alpha channel or tRNS), under 4 MB, of the first
  image's width and height; `prompt` 1..32000 characters; `n` 1..10; `size`, `quality`,
  `background`, `output_format`, `output_compression` as for generation; `input_fidelity` high |
  low; `user`; `response_format` only b64_json; `stream` only false (a streamed edit is refused).

Unknown fields are rejected by name, so a misspelt option is never silently ignored.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    InstanceOf,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from gateway.errors import InvalidRequest
from gateway.imagetypes import detect_image_type, image_dimensions, png_has_alpha
from gateway.multipart import Form, UploadedFile
from gateway.validation import invalid, parse_json, parse_model

IOTA_PREFIX, THETA_PREFIX, ETA_PREFIX = "iota-", "theta-", "eta-"
IOTA_MODELS = ("iota-image-1", "iota-image-1-mini")
THETA_MODELS = ("theta-3",)
ETA_EDIT_MODEL = "eta-image-edit"

# iota: the gpt-image style upstream documents 32000 characters of prompt and up to 10 images.
IOTA_PROMPT_MAX = 32000
IOTA_N_MAX = 10
IotaQuality = Literal["low", "medium", "high", "auto"]
IOTA_QUALITIES = get_args(IotaQuality)
IotaSize = Literal["1024x1024", "1024x1536", "1536x1024", "auto"]
IOTA_SIZES = get_args(IotaSize)
IotaOutputFormat = Literal["png", "jpeg", "webp"]
IOTA_OUTPUT_FORMATS = get_args(IotaOutputFormat)
IotaBackground = Literal["transparent", "opaque", "auto"]
IOTA_BACKGROUNDS = get_args(IotaBackground)
IotaModeration = Literal["auto", "low"]
IOTA_MODERATIONS = get_args(IotaModeration)

# The spec states both 1000 and 4000 characters for theta prompts. 1000 is the limit of the
# family's older generation; 4000 is the one of the model we route (theta-3). Refusing prompts
# the model accepts would be the gateway's own bug, while a lower limit of some other upstream
# still comes back as that upstream's own 400.
THETA_PROMPT_MAX = 4000
# theta-3 makes one image per request; anything more is refused upstream, so refuse it here
# with a message that says so instead of spending a round trip.
THETA_N_MAX = 1
ThetaSize = Literal["1024x1024", "1792x1024", "1024x1792"]
THETA_SIZES = get_args(ThetaSize)
ThetaQuality = Literal["standard", "hd"]
THETA_QUALITIES = get_args(ThetaQuality)
ThetaStyle = Literal["vivid", "natural"]
THETA_STYLES = get_args(ThetaStyle)

ImageResponseFormat = Literal["url", "b64_json"]
RESPONSE_FORMATS = get_args(ImageResponseFormat)
# The tuples above are the one source of the accepted values: the models below use them as
# `Literal[...]`, which is how the allowed values end up in each error message.

EDIT_PROMPT_MAX = 800
EDIT_N_MAX = 4
SEED_MAX = 2147483647
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # "under 10MB": 10 MiB and more is refused


# --- reusable field rules --------------------------------------------------------------------

def _prompt(max_chars: int):
    def check(value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                raise ValueError("must not be empty")
            if len(value) > max_chars:
                raise ValueError(f"must be at most {max_chars} characters (got {len(value)})")
        return value
    return BeforeValidator(check)


def _json_integer(default: int | None, low: int, high: int, *, allow_integral_number: bool = False,
                  why: str = ""):
    """An integer of a JSON body: null means `default`; true/false and "2" are not integers."""
    def check(value: Any) -> int | None:
        if value is None:
            return default
        if isinstance(value, float) and allow_integral_number and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer")
        if not low <= value <= high:
            raise ValueError(f"must be {low}" + (why if low == high else f" to {high}") + f" (got {value})")
        return value
    return BeforeValidator(check)


_FORM_INTEGER = re.compile(r"[+-]?[0-9]+")


def _form_integer(default: int | None, low: int, high: int):
    """An integer sent as a form field: "2" is 2; "2.5", "x" and "" are not integers."""
    def check(value: Any) -> int | None:
        if value is None:
            return default
        if isinstance(value, str):
            text = value.strip()
            if not _FORM_INTEGER.fullmatch(text):
                raise ValueError(f"must be an integer (got {value[:40]!r})")
            value = int(text)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer")
        if not low <= value <= high:
            raise ValueError(f"must be {low} to {high} (got {value})")
        return value
    return BeforeValidator(check)


def _null_is(default: str):
    return BeforeValidator(lambda value: default if value is None else value)


# --- generation ------------------------------------------------------------------------------

class _IotaRequest(BaseModel):
    """What an iota generation and an iota edit share: the model, the prompt, the output options."""

    model_config = ConfigDict(extra="forbid")

    model: str
    prompt: Annotated[str, _prompt(IOTA_PROMPT_MAX)]
    quality: Annotated[IotaQuality, _null_is("auto")] = "auto"
    size: Annotated[IotaSize, _null_is("auto")] = "auto"
    output_format: IotaOutputFormat | None = None
    background: IotaBackground | None = None
    response_format: Literal["b64_json"] | None = None
    user: str | None = None

    @field_validator("response_format", mode="before")
    @classmethod
    def _only_b64(cls, value: Any) -> Any:
        if value not in (None, "b64_json"):
            raise ValueError("iota models always answer b64_json; leave response_format out")
        return value

    @field_validator("model")
    @classmethod
    def _iota_model(cls, value: str) -> str:
        if _family_of(value) != "iota":
            raise ValueError(f"{value[:80]!r} is not an iota model")
        return value

    @field_validator("background")
    @classmethod
    def _transparent_needs_alpha(cls, value: str | None, info: ValidationInfo) -> str | None:
        # output_format is declared first, so it is already validated here.
        if value == "transparent" and info.data.get("output_format") == "jpeg":
            raise ValueError("transparent needs output_format png or webp (jpeg has no alpha channel)")
        return value

    @property
    def family(self) -> str:
        return "iota"


class IotaGenerationRequest(_IotaRequest):
    n: Annotated[int, _json_integer(1, 1, IOTA_N_MAX)] = 1
    output_compression: Annotated[int | None, _json_integer(None, 0, 100)] = None
    moderation: IotaModeration | None = None

    def upstream_payload(self) -> dict[str, Any]:
        """The JSON body for the upstream: what the client set, with our defaults resolved.
        Never `response_format`: gpt-image answers b64_json only and refuses the field (400
        "Unknown parameter: 'response_format'"), so the gateway takes it and does not relay it."""
        return self.model_dump(exclude={"response_format"}, exclude_none=True)


class ThetaGenerationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    prompt: Annotated[str, _prompt(THETA_PROMPT_MAX)]
    n: Annotated[int, _json_integer(1, 1, THETA_N_MAX, allow_integral_number=True,
                                    why=" for theta models (one image per request)")] = 1
    response_format: Annotated[ImageResponseFormat, _null_is("url")] = "url"
    size: Annotated[ThetaSize, _null_is("1024x1024")] = "1024x1024"
    quality: Annotated[ThetaQuality, _null_is("standard")] = "standard"
    style: Annotated[ThetaStyle, _null_is("vivid")] = "vivid"
    user: str | None = None

    @field_validator("model")
    @classmethod
    def _theta_model(cls, value: str) -> str:
        if _family_of(value) != "theta":
            raise ValueError(f"{value[:80]!r} is not a theta model")
        return value

    @property
    def family(self) -> str:
        return "theta"

    def upstream_payload(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


GenerationRequest = IotaGenerationRequest | ThetaGenerationRequest


def _family_of(model: Any) -> str | None:
    if isinstance(model, str):
        for prefix in (IOTA_PREFIX, THETA_PREFIX):
            if model.startswith(prefix) and len(model) > len(prefix):
                return prefix[:-1]
        if model == ETA_EDIT_MODEL:
            return "eta"
    return None


def image_family(model: str) -> str:
    """"iota", "theta" or "eta" for a model id; a 400 naming `model` for anything else."""
    family = _family_of(model)
    if family is not None:
        return family
    raise InvalidRequest(f"model: unknown image model {str(model)[:80]!r}; expected an iota-* or "
                         f"theta-* model (e.g. {IOTA_MODELS[0]}, {THETA_MODELS[0]}) or {ETA_EDIT_MODEL}",
                         param="model")


def parse_generation(data: Any) -> GenerationRequest:
    """A decoded generation body as the request model of its family (a 400 names the field)."""
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    if data.get("model") is None:
        raise InvalidRequest("model: is required", param="model")
    family = image_family(data["model"])
    if family == "eta":
        raise InvalidRequest(f"model: {ETA_EDIT_MODEL} is an image-edit model; use POST /v1/images/edits",
                             param="model")
    if family == "iota":
        return parse_model(IotaGenerationRequest, data)
    return parse_model(ThetaGenerationRequest, data)


def parse_generation_body(body: str | bytes | None) -> GenerationRequest:
    return parse_generation(parse_json(body))


# --- editing ---------------------------------------------------------------------------------

_EDIT_TEXT_FIELDS = ("model", "prompt", "negative_prompt", "n", "response_format", "seed")


class ImageEditRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    image: InstanceOf[UploadedFile]
    prompt: Annotated[str, _prompt(EDIT_PROMPT_MAX)]
    negative_prompt: str | None = None
    n: Annotated[int, _form_integer(1, 1, EDIT_N_MAX)] = 1
    response_format: Annotated[ImageResponseFormat, _null_is("url")] = "url"
    seed: Annotated[int | None, _form_integer(None, 0, SEED_MAX)] = None

    @field_validator("model")
    @classmethod
    def _edit_model(cls, value: str) -> str:
        if value != ETA_EDIT_MODEL:
            raise ValueError(f"unknown image-edit model {value[:80]!r}; expected {ETA_EDIT_MODEL}")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: UploadedFile) -> UploadedFile:
        if value.size == 0:
            raise ValueError("the file is empty")
        if value.size >= MAX_IMAGE_BYTES:
            raise ValueError(f"must be under 10 MB ({MAX_IMAGE_BYTES} bytes); got {value.size} bytes")
        if detect_image_type(value.data) is None:
            raise ValueError("is not a JPEG, PNG, BMP, TIFF or WEBP image (recognised from its content, "
                             "not its name or declared type)")
        return value

    @property
    def family(self) -> str:
        return "eta"

    @property
    def image_type(self) -> str:
        """"png", "jpeg", ... as recognised from the image's bytes."""
        return detect_image_type(self.image.data) or ""

    def upstream_fields(self) -> dict[str, str]:
        """The text fields for the upstream form, with our defaults resolved."""
        fields = self.model_dump(exclude={"image"}, exclude_none=True)
        return {key: str(value) for key, value in fields.items()}

    def upstream_files(self) -> list[tuple[str, UploadedFile]]:
        return [("image", self.image)]


IOTA_EDIT_IMAGES_MAX = 16
IOTA_EDIT_IMAGE_BYTES = 50 * 1024 * 1024  # "less than 50MB" each
IOTA_MASK_BYTES = 4 * 1024 * 1024  # "less than 4MB"
IOTA_EDIT_IMAGE_TYPES = ("png", "jpeg", "webp")
IotaInputFidelity = Literal["high", "low"]
IOTA_INPUT_FIDELITIES = get_args(IotaInputFidelity)
_IOTA_EDIT_TEXT_FIELDS = ("model", "prompt", "n", "size", "quality", "background", "output_format",
                          "output_compression", "input_fidelity", "response_format", "user", "stream")


def _check_upload(value: UploadedFile, limit: int, kinds: tuple[str, ...]) -> UploadedFile:
    if value.size == 0:
        raise ValueError("the file is empty")
    if value.size >= limit:
        raise ValueError(f"must be under {limit // (1024 * 1024)} MB ({limit} bytes); got {value.size} bytes")
    kind = detect_image_type(value.data)
    if kind not in kinds:
        names = ", ".join(k.upper() for k in kinds)
        raise ValueError(f"is not a {names} image (recognised from its content, not its name or declared type)")
    if image_dimensions(value.data) is None:
        raise ValueError(f"is a {kind.upper()} whose width and height cannot be read (a damaged header)")
    return value


class IotaEditRequest(_IotaRequest):
    """An iota-family edit: several images, an optional mask, the generation's options."""

    image: list[InstanceOf[UploadedFile]]
    mask: InstanceOf[UploadedFile] | None = None
    n: Annotated[int, _form_integer(1, 1, IOTA_N_MAX)] = 1
    output_compression: Annotated[int | None, _form_integer(None, 0, 100)] = None
    input_fidelity: IotaInputFidelity | None = None
    stream: Literal["false"] | None = None

    @field_validator("image")
    @classmethod
    def _images(cls, value: list[UploadedFile]) -> list[UploadedFile]:
        if not value:
            raise ValueError("at least one image is required")
        if len(value) > IOTA_EDIT_IMAGES_MAX:
            raise ValueError(f"at most {IOTA_EDIT_IMAGES_MAX} images (got {len(value)})")
        for index, upload in enumerate(value):
            try:
                _check_upload(upload, IOTA_EDIT_IMAGE_BYTES, IOTA_EDIT_IMAGE_TYPES)
            except ValueError as exc:
                raise ValueError(f"image {index + 1} of {len(value)} {exc}" if len(value) > 1 else str(exc)) from None
        return value

    @field_validator("mask")
    @classmethod
    def _mask(cls, value: UploadedFile | None, info: ValidationInfo) -> UploadedFile | None:
        if value is None:
            return None
        _check_upload(value, IOTA_MASK_BYTES, ("png",))
        if not png_has_alpha(value.data):
            raise ValueError("must be a PNG with transparency (an alpha channel): its transparent pixels mark "
                             "what to edit")
        images = info.data.get("image")
        if images:  # image is declared first; when it failed, its own error is the one reported
            first, mask = image_dimensions(images[0].data), image_dimensions(value.data)
            if first != mask:
                raise ValueError(f"must have the first image's size {_size(first)} (got {_size(mask)})")
        return value

    @field_validator("stream", mode="before")
    @classmethod
    def _not_streamed(cls, value: Any) -> Any:
        if value is not None and str(value).strip().lower() not in ("false", "0"):
            raise ValueError("streamed edits are not supported; leave stream out")
        return None

    @property
    def input_images(self) -> int:
        """The images the upstream reads: every image, and the mask."""
        return len(self.image) + (self.mask is not None)

    def upstream_fields(self) -> dict[str, str]:
        # Not `response_format`: gpt-image refuses it (see IotaGenerationRequest.upstream_payload).
        fields = self.model_dump(exclude={"image", "mask", "stream", "response_format"}, exclude_none=True)
        return {key: str(value) for key, value in fields.items()}

    def upstream_files(self) -> list[tuple[str, UploadedFile]]:
        """The files as the upstream's form takes them: `image[]` per image, then `mask`."""
        name = "image" if len(self.image) == 1 else "image[]"
        return [(name, image) for image in self.image] + ([("mask", self.mask)] if self.mask else [])


EditRequest = ImageEditRequest | IotaEditRequest


def parse_edit_form(form: Form) -> EditRequest:
    """A parsed edit form as the request model of its model's family (a 400 names the field and the rule)."""
    model = form.fields.get("model")
    if model is None:
        raise InvalidRequest("model: is required", param="model")
    if _family_of(model) == "iota":
        return _parse_iota_edit(form)
    if model != ETA_EDIT_MODEL:
        raise InvalidRequest(f"model: unknown image-edit model {model[:80]!r}; expected {ETA_EDIT_MODEL} or an "
                             f"iota-* model (e.g. {IOTA_MODELS[0]})", param="model")
    return _parse_eta_edit(form)


def _size(dimensions: tuple[int, int] | None) -> str:
    return f"{dimensions[0]}x{dimensions[1]}" if dimensions else "unknown"


def _parse_iota_edit(form: Form) -> IotaEditRequest:
    for name in ("image", "image[]", "mask"):
        if name in form.fields:
            raise InvalidRequest(f"{name.rstrip('[]')}: must be a file part (with a filename), not a text field",
                                 param=name.rstrip("[]"))
    if "image" in form.files and "image[]" in form.files:
        raise InvalidRequest("image: send the images either as `image` or as `image[]`, not both", param="image")
    if form.more_files.get("mask"):
        raise InvalidRequest("mask: is sent more than once; it takes a single file", param="mask")
    for name in form.files:
        if name in _IOTA_EDIT_TEXT_FIELDS:
            raise InvalidRequest(f"{name}: must be a text field, not a file", param=name)
    data: dict[str, Any] = {**form.fields, **{k: v for k, v in form.files.items() if k not in ("image", "image[]")},
                            "image": form.files_named("image") or form.files_named("image[]")}
    if not data["image"]:
        raise InvalidRequest("image: is required (one or more image files)", param="image")
    try:
        return IotaEditRequest.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from None


def _parse_eta_edit(form: Form) -> ImageEditRequest:
    """An eta edit form as the request model (a 400 names the field and the rule)."""
    if "image" in form.fields:
        raise InvalidRequest("image: must be a file part (with a filename), not a text field", param="image")
    if "image[]" in form.files:
        raise InvalidRequest("image: send exactly one file, as the field `image`", param="image")
    for name in form.files:
        if name in _EDIT_TEXT_FIELDS:
            raise InvalidRequest(f"{name}: must be a text field, not a file", param=name)
    for name in form.more_files:
        raise InvalidRequest(f"{name}: is sent more than once; {ETA_EDIT_MODEL} takes a single file", param=name)
    try:
        return ImageEditRequest.model_validate({**form.fields, **form.files})
    except ValidationError as exc:
        raise invalid(exc) from None


def image_count(request: GenerationRequest | EditRequest) -> int:
    """How many images a request asks for: the multiplier of its per-image price."""
    return request.n
