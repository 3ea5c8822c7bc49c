"""Request models of the alpha routes, with every rule of the spec and of the upstream.

Every body takes the model as `model_name` or `model` (the spec's samples send `model`). Each
submit model says what its task needs: `operation`, `upstream_body()` (what the adapter relays:
never the client's callback_url or external_task_id), and the `Quantities` its price multiplies.
Images given as base64 are decoded and checked here (format, size, pixels, aspect ratio, masks
against the image); an image given as a URL is checked by the upstream, which fails the task.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from gateway.schemas.shared import Problems, base64_data, http_url
from gateway.tasks.families.alpha.prices import mode_factor
from gateway.tasks.families.base import Quantities

#: text2video models; the first is the default.
TEXT2VIDEO_MODELS = ("alpha-v1", "alpha-v1-5", "alpha-v1-6", "alpha-v2-master", "alpha-v2-1-master",
                     "alpha-v2-5-turbo")
IMAGE2VIDEO_MODELS = (*TEXT2VIDEO_MODELS, "alpha-v2-1")
OMNI_VIDEO_MODELS = ("alpha-video-o1",)
MOTION_CONTROL_MODELS = ("alpha-video-o1",)
OMNI_IMAGE_MODELS = ("alpha-image-o1",)
PRO_ONLY = frozenset({"alpha-v1-5", "alpha-v2-5-turbo"})
NO_MODE = frozenset({"alpha-v2-master", "alpha-v2-1-master"})

MAX_PROMPT = 2500
MAX_IMAGE_BYTES = 10 * 1024 * 1024
MIN_IMAGE_SIDE = 300
MAX_ASPECT = 2.5
MAX_DYNAMIC_MASKS = 6
TRAJECTORY_POINTS = (2, 77)
CAMERA_TYPES = ("simple", "down_back", "forward_up", "right_turn_forward", "left_turn_forward")
CAMERA_AXES = ("horizontal", "vertical", "pan", "tilt", "roll", "zoom")
OMNI_SECONDS = (3, 10)  # an omni-video lasts 3..10 whole seconds
#: The longest motion-control video, by character orientation (the upstream's reference: the
#: reference video may last up to 30 s when the orientation follows it, 10 s when it follows the image).
MOTION_MAX_SECONDS = {"video": 30, "image": 10}
MAX_OMNI_IMAGES = 9


class _Body(BaseModel):
    """Takes the model as `model_name` or `model` (the spec samples' name), and names in an
    error the one the client sent."""

    # A misspelt field is a 400 rather than a silently dropped option.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    model_required: ClassVar[bool] = False

    model_name: StrictStr | None = None
    model_alias: StrictStr | None = Field(None, alias="model")

    @model_validator(mode="after")
    def _one_model(self) -> Any:
        if self.model_alias is not None:
            if self.model_name is not None and self.model_name != self.model_alias:
                raise_at(("model",), "names another model than model_name; send one of them", self.model_alias)
            self.model_name = self.model_alias
        elif self.model_name is None and self.model_required:
            raise_at(("model_name",), "is required (or its other name, model)", None)
        return self


def raise_at(loc: tuple[str | int, ...], message: str, value: Any) -> None:
    problems = Problems("alpha")
    problems.add(loc, message, value)
    problems.raise_if_any()


def _prompt_text(value: str | None) -> str | None:
    if value is not None and len(value) > MAX_PROMPT:
        raise ValueError(f"must be at most {MAX_PROMPT} characters (it has {len(value)})")
    return value


def _nonblank_prompt(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return _prompt_text(value)  # type: ignore[return-value]


# --- images ---------------------------------------------------------------------------------------

def image_size(data: bytes) -> tuple[str, int, int] | None:
    """("png" | "jpeg", width, height) read from the file's header, or None for another format."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "png", width, height
    if data.startswith(b"\xff\xd8"):
        at = 2
        while at + 9 <= len(data):
            if data[at] != 0xFF:
                return None
            marker = data[at + 1]
            if marker == 0xFF:  # fill byte
                at += 1
                continue
            length = struct.unpack(">H", data[at + 2:at + 4])[0]
            # Start of frame (every SOFn but the DHT, JPG and DAC markers) holds the size.
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[at + 5:at + 9])
                return "jpeg", width, height
            at += 2 + length
    return None


def check_image(value: str) -> tuple[int, int] | None:
    """An image field: an http(s) URL (None: the upstream checks it) or bare base64 of a
    jpg/jpeg/png of at most 10 MB, each side at least 300 px, aspect 1:2.5..2.5:1 (its size)."""
    if value.startswith(("http://", "https://")):
        http_url(value)
        return None
    base64_data(value)
    bare = value.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        data = base64.b64decode(bare + "=" * (-len(bare) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is neither an http(s) URL nor valid base64") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"must be at most 10 MB (it is {len(data)} bytes)")
    found = image_size(data)
    if found is None:
        raise ValueError("must be a jpg, jpeg or png image")
    _, width, height = found
    if width < MIN_IMAGE_SIDE or height < MIN_IMAGE_SIDE:
        raise ValueError(f"must be at least {MIN_IMAGE_SIDE}x{MIN_IMAGE_SIDE} pixels (it is {width}x{height})")
    if not 1 / MAX_ASPECT <= width / height <= MAX_ASPECT:
        raise ValueError(f"must have an aspect ratio between 1:2.5 and 2.5:1 (it is {width}x{height})")
    return width, height


def _same_aspect(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] * b[1] == a[1] * b[0]


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a number between 0 and 1")
    return value


#: A number 0..1 (not a string of one, not a boolean).
CfgScale = Annotated[float, BeforeValidator(_number), Field(ge=0, le=1)]


# --- parts ----------------------------------------------------------------------------------------

class CameraConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    horizontal: StrictInt = Field(0, ge=-10, le=10)
    vertical: StrictInt = Field(0, ge=-10, le=10)
    pan: StrictInt = Field(0, ge=-10, le=10)
    tilt: StrictInt = Field(0, ge=-10, le=10)
    roll: StrictInt = Field(0, ge=-10, le=10)
    zoom: StrictInt = Field(0, ge=-10, le=10)

    @model_validator(mode="before")
    @classmethod
    def _tit_is_tilt(cls, data: Any) -> Any:
        """The spec spells the axis `tit`, the upstream `tilt`: either (the same value if both)."""
        if isinstance(data, dict) and "tit" in data:
            data = dict(data)
            tit = data.pop("tit")
            if "tilt" in data and data["tilt"] != tit:
                raise ValueError("tit and tilt are the same axis; send one of them")
            data["tilt"] = tit
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> CameraConfig:
        moving = [axis for axis in CAMERA_AXES if getattr(self, axis)]
        if len(moving) != 1:
            raise ValueError(f"exactly one of {', '.join(CAMERA_AXES)} must be non-zero "
                             f"({len(moving)} are)")
        return self


class CameraControl(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal[CAMERA_TYPES] | None = None  # type: ignore[valid-type]
    config: CameraConfig | None = None

    @model_validator(mode="after")
    def _config_with_simple(self) -> CameraControl:
        kind = self.type or ("simple" if self.config is not None else None)
        if kind == "simple" and self.config is None:
            raise ValueError("config is required when type is simple")
        if kind not in (None, "simple") and self.config is not None:
            raise ValueError(f"config is only taken when type is simple, not {kind}")
        self.type = kind
        return self

    def upstream(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.config is not None:
            out["config"] = self.config.model_dump()
        return out


class Point(BaseModel):
    """A trajectory point: pixels from the lower left; the spec types them as strings."""

    model_config = ConfigDict(extra="forbid")

    x: int = Field(ge=0)
    y: int = Field(ge=0)

    @field_validator("x", "y", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str)
                                                                        and value.strip().isdigit())):
            raise ValueError("must be a whole number of pixels (a non-negative integer or its digits)")
        return int(value)


class DynamicMask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mask: StrictStr
    trajectories: list[Point] = Field(min_length=TRAJECTORY_POINTS[0], max_length=TRAJECTORY_POINTS[1])


# --- submits --------------------------------------------------------------------------------------

class _Submit(_Body):
    operation: ClassVar[str]
    models: ClassVar[tuple[str, ...]]

    callback_url: StrictStr | None = None
    external_task_id: StrictStr | None = Field(None, min_length=1, max_length=128)

    @field_validator("model_name", "model_alias")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        if value is not None and value not in cls.models:
            raise ValueError(f"{value!r} is not taken here; use one of {', '.join(cls.models)}")
        return value

    @property
    def model(self) -> str:
        return self.model_alias or self.model_name or self.models[0]

    def upstream_body(self) -> dict[str, Any]:
        skip = {"model_name", "model_alias", "callback_url", "external_task_id"}
        return {k: v for k, v in self.model_dump(exclude_none=True).items() if k not in skip}

    def quantities(self) -> Quantities:
        raise NotImplementedError

    @property
    def duration(self) -> str | None:
        return None


class _Video(_Submit):
    """What text2video and image2video share."""

    models: ClassVar[tuple[str, ...]] = TEXT2VIDEO_MODELS

    negative_prompt: StrictStr | None = None
    cfg_scale: CfgScale | None = None
    mode: Literal["std", "pro"] | None = None
    aspect_ratio: Literal["16:9", "9:16", "1:1"] | None = None
    duration_: Literal["5", "10"] = Field("5", alias="duration")
    camera_control: CameraControl | None = None

    @field_validator("duration_", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("negative_prompt")
    @classmethod
    def _negative(cls, value: str | None) -> str | None:
        return _prompt_text(value)

    @property
    def duration(self) -> str:
        return self.duration_

    @property
    def effective_mode(self) -> str:
        return self.mode or ("pro" if self.model in PRO_ONLY else "std")

    def _mode_rules(self, problems: Problems) -> None:
        if self.model in NO_MODE and self.mode is not None:
            problems.add(("mode",), f"is not taken by {self.model}; leave it out", self.mode)
        elif self.model in PRO_ONLY and self.mode == "std":
            problems.add(("mode",), f"{self.model} runs in pro mode only", self.mode)

    def upstream_body(self) -> dict[str, Any]:
        body = super().upstream_body()
        body.pop("duration_", None)
        body["duration"] = self.duration
        if self.model not in NO_MODE:
            body["mode"] = self.effective_mode
        if self.camera_control is not None:
            body["camera_control"] = self.camera_control.upstream()
        return body

    def quantities(self) -> Quantities:
        return Quantities(seconds=int(self.duration), multiplier=mode_factor(self.effective_mode))


class Text2VideoRequest(_Video):
    operation = "text2video"

    prompt: StrictStr = Field(min_length=1)

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        return _nonblank_prompt(value)

    @model_validator(mode="after")
    def _rules(self) -> Text2VideoRequest:
        problems = Problems(type(self).__name__)
        self._mode_rules(problems)
        problems.raise_if_any()
        return self


class Image2VideoRequest(_Video):
    operation = "image2video"
    models = IMAGE2VIDEO_MODELS

    image: StrictStr
    image_tail: StrictStr | None = None
    prompt: StrictStr | None = None
    static_mask: StrictStr | None = None
    dynamic_masks: list[DynamicMask] | None = Field(None, max_length=MAX_DYNAMIC_MASKS)

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str | None) -> str | None:
        return _prompt_text(value)

    @model_validator(mode="after")
    def _rules(self) -> Image2VideoRequest:
        problems = Problems(type(self).__name__)
        self._mode_rules(problems)
        sizes: dict[tuple[str | int, ...], tuple[int, int] | None] = {}
        images: list[tuple[tuple[str | int, ...], str]] = [(("image",), self.image)]
        if self.image_tail is not None:
            images.append((("image_tail",), self.image_tail))
        if self.static_mask is not None:
            images.append((("static_mask",), self.static_mask))
        for n, mask in enumerate(self.dynamic_masks or []):
            images.append((("dynamic_masks", n, "mask"), mask.mask))
        for loc, value in images:
            try:
                sizes[loc] = check_image(value)
            except ValueError as exc:
                problems.add(loc, str(exc), value[:64])
        if self.image_tail is not None and self.effective_mode != "pro":
            problems.add(("image_tail",), "needs mode pro", None)
        masks = self.static_mask is not None or bool(self.dynamic_masks)
        chosen = [name for name, used in (("image_tail", self.image_tail is not None), ("masks", masks),
                                          ("camera_control", self.camera_control is not None)) if used]
        if len(chosen) > 1:
            second = chosen[1] if chosen[1] != "masks" else (
                "static_mask" if self.static_mask is not None else "dynamic_masks")
            problems.add((second,),
                         f"{' and '.join(chosen)} are alternatives; send only one of them", None)
        image = sizes.get(("image",))
        mask_sizes = [(loc, size) for loc, size in sizes.items() if loc[0] in ("static_mask", "dynamic_masks")
                      and size is not None]
        for loc, size in mask_sizes:
            if image is not None and not _same_aspect(image, size):
                problems.add(loc, f"must have the image's aspect ratio ({image[0]}x{image[1]}; "
                                  f"the mask is {size[0]}x{size[1]})", None)
        static = sizes.get(("static_mask",))
        for loc, size in mask_sizes:
            if static is not None and loc[0] == "dynamic_masks" and size != static:
                problems.add(loc, f"must have the static mask's resolution ({static[0]}x{static[1]}; "
                                  f"it is {size[0]}x{size[1]})", None)
        problems.raise_if_any()
        return self

    def upstream_body(self) -> dict[str, Any]:
        body = super().upstream_body()
        if self.dynamic_masks:
            body["dynamic_masks"] = [{"mask": m.mask, "trajectories": [p.model_dump() for p in m.trajectories]}
                                     for m in self.dynamic_masks]
        return body


class _WholeSeconds(_Submit):
    """omni-video: an integer `duration` of 3..10 s and a mode."""

    model_required = True
    duration_: StrictInt = Field(5, alias="duration", ge=OMNI_SECONDS[0], le=OMNI_SECONDS[1])
    mode: Literal["std", "pro"] = "std"

    @property
    def duration(self) -> str:
        return str(self.duration_)

    def upstream_body(self) -> dict[str, Any]:
        body = super().upstream_body()
        body["duration"] = body.pop("duration_")
        return body

    def quantities(self) -> Quantities:
        return Quantities(seconds=self.duration_, multiplier=mode_factor(self.mode))


class OmniVideoRequest(_WholeSeconds):
    """The schema marks every field required; the gateway requires the model and the prompt and
    fills the rest as the upstream does (5 s, 16:9, std)."""

    operation = "omni-video"
    models = OMNI_VIDEO_MODELS

    prompt: StrictStr = Field(min_length=1)
    negative_prompt: StrictStr | None = None
    aspect_ratio: Literal["16:9", "9:16", "1:1"] = "16:9"
    cfg_scale: CfgScale | None = None

    @field_validator("prompt", "negative_prompt")
    @classmethod
    def _prompts(cls, value: str | None) -> str | None:
        return None if value is None else _nonblank_prompt(value)


class MotionControlRequest(_Submit):
    """A character of `image_url` moving as in `video_url`.

    The upstream's motion control has no duration (its API reference, "Motion Control": prompt,
    image_url, video_url, keep_original_sound, character_orientation, mode; new-api's Kling
    documentation the same): the video lasts as long as the reference video, up to 30 s when the
    character's orientation follows the video and 10 s when it follows the image. The spec's
    `duration` is taken (an integer) and never relayed; the hold is that worst case and the
    settlement the seconds of the video the upstream reports (`AlphaFamily.units_to_settle`)."""

    operation = "motion-control"
    models = MOTION_CONTROL_MODELS
    model_required = True

    image_url: StrictStr
    video_url: StrictStr
    character_orientation: Literal["image", "video"] = "image"
    mode: Literal["std", "pro"] = "std"
    keep_original_sound: Literal["yes", "no"] | None = None
    prompt: StrictStr | None = None
    duration_: StrictInt | None = Field(None, alias="duration", ge=1, le=MOTION_MAX_SECONDS["video"])

    @field_validator("image_url")
    @classmethod
    def _image(cls, value: str) -> str:
        check_image(value)
        return value

    @field_validator("video_url")
    @classmethod
    def _video(cls, value: str) -> str:
        return http_url(value)

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str | None) -> str | None:
        return _prompt_text(value)

    @property
    def max_seconds(self) -> int:
        return MOTION_MAX_SECONDS[self.character_orientation]

    def upstream_body(self) -> dict[str, Any]:
        body = super().upstream_body()
        body.pop("duration_", None)  # the upstream has no duration: the reference video sets it
        return body

    def quantities(self) -> Quantities:
        return Quantities(seconds=self.max_seconds, multiplier=mode_factor(self.mode))


class OmniImageRequest(_Submit):
    operation = "omni-image"
    models = OMNI_IMAGE_MODELS

    prompt: StrictStr = Field(min_length=1)
    n: StrictInt = Field(1, ge=1, le=MAX_OMNI_IMAGES)
    aspect_ratio: Literal["16:9", "9:16", "1:1", "4:3", "3:4", "3:2", "2:3", "21:9"] | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        return _nonblank_prompt(value)

    def quantities(self) -> Quantities:
        return Quantities(images=self.n, samples=self.n)


SUBMITS: dict[str, type[_Submit]] = {
    model.operation: model
    for model in (Text2VideoRequest, Image2VideoRequest, OmniVideoRequest, MotionControlRequest, OmniImageRequest)
}


# --- custom elements and voices -------------------------------------------------------------------

class _Custom(_Body):
    model_required = True

    def record(self) -> dict[str, Any]:
        """The fields the client gave, as the upstream names them."""
        return {k: v for k, v in self.model_dump(exclude_none=True).items() if k != "model_alias"}


def _image_url(value: str) -> str:
    """An element's images are links: its record is kept, and base64 images would not fit it."""
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http or https URL of the image (an element keeps links, not bytes)")
    return http_url(value)


class ReferImage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    image_url: StrictStr

    @field_validator("image_url")
    @classmethod
    def _image(cls, value: str) -> str:
        return _image_url(value)


class Tag(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tag_id: StrictStr = Field(min_length=1)


class CustomElementRequest(_Custom):
    element_name: StrictStr = Field(min_length=1, max_length=100)
    element_description: StrictStr = Field(min_length=1, max_length=MAX_PROMPT)
    element_frontal_image: StrictStr
    element_refer_list: list[ReferImage]
    tag_list: list[Tag]

    @field_validator("element_frontal_image")
    @classmethod
    def _frontal(cls, value: str) -> str:
        return _image_url(value)


class CustomVoiceRequest(_Custom):
    voice_name: StrictStr = Field(min_length=1, max_length=20)  # the upstream's limit ("Create Custom Voice")
    voice_url: StrictStr

    @field_validator("voice_url")
    @classmethod
    def _voice(cls, value: str) -> str:
        return http_url(value)


CUSTOMS: dict[str, type[_Custom]] = {"element": CustomElementRequest, "voice": CustomVoiceRequest}
