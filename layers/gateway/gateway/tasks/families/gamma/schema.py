"""The gamma request (`POST /gamma/api/v1/services/aigc/video-generation/video-synthesis`), with
every rule: which models exist, what each accepts, and what the price multiplies.

| model | input | resolution (default) | duration s (default 5) | shot_type | audio_url |
|---|---|---|---|---|---|
| gamma2.6-i2v | img_url required, prompt optional | 720P, 1080P (1080P) | 5, 10, 15 | single, multi | yes |
| gamma2.6-t2v | prompt required, no img_url | 720P, 1080P (1080P) | 5, 10, 15 | single, multi | yes |
| gamma2.5-i2v-preview | img_url required, prompt optional | 480P, 720P, 1080P (1080P) | 5, 10 | - | yes |
| gamma2.5-t2v-preview | prompt required, no img_url | 480P, 720P, 1080P (1080P) | 5, 10 | - | yes |

The charge is the model's price per second x duration x the resolution factor (480P 0.5,
720P 1, 1080P 1.5): the price table holds the 720P rate. It is held at submit and settled to the
seconds and resolution the upstream reports in `usage` (never above the hold).

Text-to-video takes its size as `parameters.size`, `W*H` (DashScope's Wan text-to-video
reference; new-api's relay/channel/task/ali `AliVideoParameters.Size`): the upstream ignores
`resolution` there and renders its default size. So a t2v request's `resolution` (the spec's
field) is relayed as that tier's 16:9 landscape size, and a `size` of the upstream's own table
is taken as written (its tier is the resolution billed). Image-to-video takes `resolution`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from gateway.schemas.shared import Problems, http_url
from gateway.tasks.families.gamma.prices import RESOLUTION_FACTORS, T2V_SIZES, tier_of_size


@dataclass(frozen=True)
class GammaModel:
    image_to_video: bool
    resolutions: tuple[str, ...]
    default_resolution: str
    durations: tuple[int, ...]
    shot_types: tuple[str, ...]  # empty: the model takes no shot_type


_V26: dict[str, Any] = dict(resolutions=("720P", "1080P"), default_resolution="1080P", durations=(5, 10, 15),
                            shot_types=("single", "multi"))
_V25: dict[str, Any] = dict(resolutions=("480P", "720P", "1080P"), default_resolution="1080P", durations=(5, 10),
                            shot_types=())

MODELS: dict[str, GammaModel] = {
    "gamma2.6-i2v": GammaModel(image_to_video=True, **_V26),
    "gamma2.6-t2v": GammaModel(image_to_video=False, **_V26),
    "gamma2.5-i2v-preview": GammaModel(image_to_video=True, **_V25),
    "gamma2.5-t2v-preview": GammaModel(image_to_video=False, **_V25),
}
DEFAULT_DURATION = 5
MAX_PROMPT = 2000
MAX_NEGATIVE_PROMPT = 500
MAX_SEED = 2147483647


def _image(value: str) -> str:
    return value if value.startswith("data:") else http_url(value)


class _Strict(BaseModel):
    # A misspelt field is a 400 naming it rather than a silently dropped option.
    model_config = ConfigDict(extra="forbid")


class GammaInput(_Strict):
    prompt: StrictStr | None = Field(None, max_length=MAX_PROMPT)
    negative_prompt: StrictStr | None = Field(None, max_length=MAX_NEGATIVE_PROMPT)
    img_url: StrictStr | None = None
    audio_url: StrictStr | None = None

    # An explicit null is the field left out (validators see it too).
    @field_validator("img_url")
    @classmethod
    def _img(cls, value: str | None) -> str | None:
        return None if value is None else _image(value)

    @field_validator("audio_url")
    @classmethod
    def _audio(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)


class GammaParameters(_Strict):
    resolution: StrictStr | None = None
    size: StrictStr | None = None  # text-to-video only: `W*H` of the upstream's table
    prompt_extend: StrictBool = True
    duration: StrictInt | None = None
    shot_type: StrictStr | None = None
    seed: StrictInt | None = Field(None, ge=0, le=MAX_SEED)
    watermark: StrictBool | None = None


class GammaRequest(_Strict):
    model: StrictStr
    input: GammaInput
    parameters: GammaParameters = Field(default_factory=GammaParameters)

    @field_validator("model")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(f"{value!r} is not a gamma model; use one of {', '.join(MODELS)}")
        return value

    @model_validator(mode="after")
    def _model_rules(self) -> GammaRequest:
        spec = MODELS[self.model]
        p = self.parameters
        problems = Problems(type(self).__name__)
        if spec.image_to_video and not self.input.img_url:
            problems.add(("input", "img_url"), f"is required for the image-to-video model {self.model}")
        if not spec.image_to_video:
            if self.input.img_url is not None:
                problems.add(("input", "img_url"), f"{self.model} makes video from text; "
                                 "use an i2v model for an image")
            if not (self.input.prompt or "").strip():
                problems.add(("input", "prompt"), f"is required for the text-to-video model {self.model}")
        if p.resolution is not None and p.resolution not in spec.resolutions:
            problems.add(("parameters", "resolution"), f"{self.model} accepts {', '.join(spec.resolutions)}")
        if p.size is not None:
            sizes = [size for tier in spec.resolutions for size in T2V_SIZES[tier]]
            if spec.image_to_video:
                problems.add(("parameters", "size"), f"{self.model} takes resolution, not size "
                             "(the size follows the image)")
            elif p.size not in sizes:
                problems.add(("parameters", "size"), f"{self.model} accepts {', '.join(sizes)} (W*H)")
            elif p.resolution is not None and tier_of_size(p.size) != p.resolution:
                problems.add(("parameters", "size"), f"{p.size} is a {tier_of_size(p.size)} size, "
                             f"not {p.resolution}; send one of them")
        if p.duration is not None and p.duration not in spec.durations:
            problems.add(("parameters", "duration"),
                             f"{self.model} accepts {', '.join(map(str, spec.durations))} seconds")
        if p.shot_type is not None and p.shot_type not in spec.shot_types:
            problems.add(("parameters", "shot_type"),
                             f"{self.model} accepts {', '.join(spec.shot_types)}" if spec.shot_types
                             else f"{self.model} takes no shot_type")
        problems.raise_if_any()
        return self

    @property
    def resolution(self) -> str:
        if self.parameters.size is not None:
            return tier_of_size(self.parameters.size) or MODELS[self.model].default_resolution
        return self.parameters.resolution or MODELS[self.model].default_resolution

    @property
    def duration(self) -> int:
        return self.parameters.duration or DEFAULT_DURATION

    @property
    def multiplier(self) -> Decimal:
        return RESOLUTION_FACTORS[self.resolution]

    def upstream_request(self) -> dict[str, Any]:
        """The body the adapter relays (the model is the channel's upstream name, set there)."""
        parameters = self.parameters.model_dump(exclude_none=True)
        parameters["duration"] = self.duration
        if MODELS[self.model].image_to_video:
            parameters["resolution"] = self.resolution
        else:  # Wan text-to-video reads `size` and ignores `resolution`
            parameters.pop("resolution", None)
            parameters["size"] = self.parameters.size or T2V_SIZES[self.resolution][0]
        return {"input": self.input.model_dump(exclude_none=True), "parameters": parameters}
