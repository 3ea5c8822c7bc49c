"""Request models of the delta, zeta and epsilon video families, with every rule of the spec.

`POST /v1/video/generations` carries a delta or a zeta body (the model id decides which);
`POST /v1/videos` carries an epsilon body. Each model also says what billing needs to price
it: `billable_seconds` (seconds of video across every video asked for) and `sample_count`.
`upstream_body()` is what the task adapter relays; it never holds the client's callback_url.

Rules that depend on the model id run after the fields are parsed, but still name the field
they are about (`instances[0].lastFrame: ...`), because a 400 that names no field is a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, StrictInt, StrictStr,
                      ValidationError, field_validator, model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

from gateway.errors import InvalidRequest
from gateway.validation import parse_model


class _Body(BaseModel):
    # A misspelt field is a 400 rather than a silently dropped option.
    model_config = ConfigDict(extra="forbid")


class _Problems:
    """Collects rule violations found after parsing, each at its own field location."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.errors: list[InitErrorDetails] = []

    def add(self, loc: tuple[str | int, ...], message: str, value: Any = None) -> None:
        # The message goes through the context so braces in it are never read as a template.
        self.errors.append(InitErrorDetails(
            type=PydanticCustomError("video_rule", "{message}", {"message": message}), loc=loc, input=value))

    def raise_if_any(self) -> None:
        if self.errors:
            raise ValidationError.from_exception_data(self.title, self.errors)


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http or https URL")
    return value


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+")


def _check_base64(value: str) -> str:
    """Standard or URL-safe base64, padded or not (what the upstreams themselves accept)."""
    if value.startswith("data:"):
        raise ValueError("must be bare base64, not a data: URL")
    bare = value.rstrip("=")
    if not bare:
        raise ValueError("is empty")
    # A length of 1 mod 4 can never be decoded; anything outside the alphabet is not base64.
    if not _BASE64.fullmatch(bare) or len(bare) % 4 == 1 or len(value) - len(bare) > 2:
        raise ValueError("is not valid base64")
    return value


_MIME = re.compile(r"[a-z]+/[A-Za-z0-9.+-]+")


# --------------------------------------------------------------------------------------------
# Delta
# --------------------------------------------------------------------------------------------

#: Every delta model id and its generation ("2", "3.0" or "3.1").
DELTA_MODELS: dict[str, str] = {
    "delta-2.0-generate-001": "2",
    "delta-2.0-generate-preview": "2",  # named only by the feature table (mask)
    "delta-2.0-generate-exp": "2",  # named only by the feature table (referenceImages)
    "delta-3.0-generate-001": "3.0",
    "delta-3.0-fast-generate-001": "3.0",
    "delta-3.0-generate-preview": "3.0",
    "delta-3.0-fast-generate-preview": "3.0",
    "delta-3.1-generate-preview": "3.1",
    "delta-3.1-fast-generate-preview": "3.1",
    "delta-3.1-generate-001": "3.1",
    "delta-3.1-fast-generate-001": "3.1",
}
_DELTA_GEN_31 = {model for model, gen in DELTA_MODELS.items() if gen == "3.1"}

#: The spec's feature table: the exact model ids that take each optional media input.
#: `prompt` and `image` are taken by every model.
DELTA_MEDIA_SUPPORT: dict[str, frozenset[str]] = {
    "image": frozenset(DELTA_MODELS),
    "lastFrame": frozenset({"delta-2.0-generate-001", *_DELTA_GEN_31}),
    "video": frozenset({"delta-2.0-generate-001"}),
    "mask": frozenset({"delta-2.0-generate-preview"}),
    "referenceImages": frozenset({"delta-2.0-generate-exp", "delta-3.1-generate-preview"}),
}
# The kind of media each input must be (its mimeType's top-level type).
_DELTA_MEDIA_KIND = {"image": "image", "lastFrame": "image", "video": "video", "mask": "image",
                     "referenceImages": "image"}


class DeltaMedia(_Body):
    """Flat base64 media: `{bytesBase64Encoded, mimeType}`."""

    bytesBase64Encoded: StrictStr
    mimeType: StrictStr

    @model_validator(mode="before")
    @classmethod
    def _flat_base64_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # The upstream answers the nested form with "image is empty"; the spec keeps its words.
            nested = next((key for key in ("inlineData", "inline_data") if key in data), None)
            if nested:
                raise ValueError(f"image is empty: the nested {nested} form is not accepted; "
                                 "send the flat form {bytesBase64Encoded, mimeType}")
            stored = next((key for key in ("gcsUri", "uri", "storageUri") if key in data), None)
            if stored:
                raise ValueError(f"{stored} is not supported: storage-URI media is not accepted; "
                                 "send the media inline as bytesBase64Encoded")
        return data

    @field_validator("bytesBase64Encoded")
    @classmethod
    def _base64(cls, value: str) -> str:
        return _check_base64(value)

    @field_validator("mimeType")
    @classmethod
    def _mime(cls, value: str) -> str:
        if not _MIME.fullmatch(value):
            raise ValueError("must be a MIME type such as image/png or video/mp4")
        return value


class DeltaInstance(_Body):
    prompt: StrictStr = Field(min_length=1)
    image: DeltaMedia | None = None
    lastFrame: DeltaMedia | None = None
    video: DeltaMedia | None = None
    mask: DeltaMedia | None = None
    referenceImages: list[DeltaMedia] | None = Field(None, min_length=1)

    @field_validator("prompt")
    @classmethod
    def _prompt_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class DeltaParameters(_Body):
    durationSeconds: StrictInt
    generateAudio: StrictBool | None = None
    enhancePrompt: StrictBool | None = None
    aspectRatio: Literal["16:9", "9:16", "1:1"] | None = None
    negativePrompt: StrictStr | None = None
    resizeMode: Literal["pad", "crop"] | None = None
    resolution: Literal["720p", "1080p"] | None = None
    personGeneration: Literal["allow_adult", "dont_allow"] | None = None
    sampleCount: StrictInt | None = Field(None, ge=1, le=4)
    seed: StrictInt | None = Field(None, ge=0, le=4294967295)

    @model_validator(mode="before")
    @classmethod
    def _no_storage(cls, data: Any) -> Any:
        if isinstance(data, dict) and "storageUri" in data:
            raise ValueError("storageUri is not supported: results are fetched through the gateway")
        return data


class DeltaVideoRequest(_Body):
    """`POST /v1/video/generations` with a `delta-*` model."""

    model: StrictStr
    instances: list[DeltaInstance] = Field(min_length=1)
    parameters: DeltaParameters

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in DELTA_MODELS:
            raise ValueError(f"{value!r} is not a delta model; use one of {', '.join(DELTA_MODELS)}")
        return value

    @property
    def generation(self) -> str:
        return DELTA_MODELS[self.model]

    @model_validator(mode="after")
    def _model_rules(self) -> DeltaVideoRequest:
        problems = _Problems(type(self).__name__)
        gen, params = self.generation, self.parameters
        for index, instance in enumerate(self.instances):
            for field, allowed in DELTA_MEDIA_SUPPORT.items():
                value = getattr(instance, field)
                if value is None:
                    continue
                loc: tuple[str | int, ...] = ("instances", index, field)
                if self.model not in allowed:
                    problems.add(loc, f"is not supported by {self.model}; models that take it: "
                                      f"{', '.join(sorted(allowed))}")
                    continue
                kind = _DELTA_MEDIA_KIND[field]
                for at, media in ([(loc, value)] if isinstance(value, DeltaMedia)
                                  else [(loc + (i,), item) for i, item in enumerate(value)]):
                    if media.mimeType.split("/")[0] != kind:
                        problems.add(at + ("mimeType",), f"must be {kind}/* for {field}",
                                     media.mimeType)
            if instance.lastFrame is not None and instance.image is None:
                problems.add(("instances", index, "lastFrame"), "needs image (the first frame) as well")

        if gen == "2":
            if not 5 <= params.durationSeconds <= 8:
                problems.add(("parameters", "durationSeconds"),
                             f"must be 5 to 8 for generation 2 models ({self.model})", params.durationSeconds)
        elif params.durationSeconds not in (4, 6, 8):
            problems.add(("parameters", "durationSeconds"),
                         f"must be 4, 6 or 8 for generation {gen} models ({self.model})", params.durationSeconds)
        if gen != "2" and params.generateAudio is None:
            problems.add(("parameters", "generateAudio"), f"is required for generation {gen} models ({self.model})")
        if gen != "2" and params.enhancePrompt is not None:
            problems.add(("parameters", "enhancePrompt"), "is supported by generation 2 models only",
                         params.enhancePrompt)
        if gen == "2" and params.resolution is not None:
            problems.add(("parameters", "resolution"), "is supported by generation 3 and 3.1 models only",
                         params.resolution)
        if params.resizeMode is not None:
            if gen == "2":
                problems.add(("parameters", "resizeMode"), "is supported by generation 3 models only",
                             params.resizeMode)
            elif not any(instance.image is not None for instance in self.instances):
                problems.add(("parameters", "resizeMode"), "applies to image-to-video only: give instances[].image",
                             params.resizeMode)
        problems.raise_if_any()
        return self

    @property
    def sample_count(self) -> int:
        """Videos produced: sampleCount per instance (the upstream makes one set per instance)."""
        return (self.parameters.sampleCount or 1) * len(self.instances)

    @property
    def billable_seconds(self) -> int:
        return self.parameters.durationSeconds * self.sample_count

    def upstream_body(self) -> dict[str, Any]:
        """`{instances, parameters}`: the model travels in the upstream path, not the body."""
        return self.model_dump(include={"instances", "parameters"}, exclude_none=True)


# --------------------------------------------------------------------------------------------
# Zeta
# --------------------------------------------------------------------------------------------

ZETA_LITE_T2V = "zeta-video-1-0-lite-t2v-250428"
ZETA_LITE_I2V = "zeta-video-1-0-lite-i2v-250428"
ZETA_PRO = "zeta-video-1-0-pro-250528"
ZETA_MODELS = (ZETA_LITE_I2V, ZETA_LITE_T2V, ZETA_PRO)

#: The modes each zeta model can run in: text-to-video, or image-to-video (first frame,
#: optionally a last frame). The mode of a request follows from whether it has an image.
ZETA_MODEL_MODES: dict[str, tuple[str, ...]] = {
    ZETA_LITE_T2V: ("text-to-video",),
    ZETA_LITE_I2V: ("image-to-video",),
    ZETA_PRO: ("text-to-video", "image-to-video"),
}
ZETA_DEFAULT_DURATION = 5  # seconds, every zeta model, when --duration is not given

_FIXED_RATIOS = frozenset({"21:9", "16:9", "4:3", "1:1", "3:4", "9:16", "9:21"})
_IMAGE_RATIOS = frozenset({"adaptive", "keep_ratio"})  # follow the input image
_RESOLUTIONS = frozenset({"480p", "720p", "1080p"})
_FIRST_LAST_RESOLUTIONS = frozenset({"480p", "720p"})  # spec: first-and-last-frame


@dataclass(frozen=True)
class CommandRule:
    supported: frozenset[Any] | None  # values relayed as written; None: every value of its domain
    otherwise: Literal["reject", "ignore"]  # what happens to any other well-formed value
    why: str = ""


ZETA_COMMAND_RULES: dict[str, dict[str, CommandRule]] = {
    "text-to-video": {
        "ratio": CommandRule(_FIXED_RATIOS, "ignore", "adaptive and keep_ratio follow an input image; "
                                                     "with none there is nothing to follow"),
        "duration": CommandRule(frozenset({5, 10}), "reject", "the length is what the task is charged for"),
        "rs": CommandRule(_RESOLUTIONS, "reject", "the resolution changes the price"),
        "fps": CommandRule(frozenset({24}), "ignore", "the model renders 24 fps; the price is unchanged"),
        "wm": CommandRule(frozenset({True, False}), "reject"),
        "seed": CommandRule(None, "reject"),
        "cf": CommandRule(frozenset({True, False}), "reject"),
    },
    "image-to-video": {
        "ratio": CommandRule(_FIXED_RATIOS | _IMAGE_RATIOS, "reject"),
        "duration": CommandRule(frozenset({5, 10}), "reject", "the length is what the task is charged for"),
        "rs": CommandRule(_RESOLUTIONS, "reject", "first-and-last-frame: 480p and 720p only (spec)"),
        "fps": CommandRule(frozenset({24}), "ignore", "the model renders 24 fps; the price is unchanged"),
        "wm": CommandRule(frozenset({True, False}), "reject"),
        "seed": CommandRule(None, "reject"),
        "cf": CommandRule(frozenset({True, False}), "reject"),
    },
}
#: The docstring of ZETA_COMMAND_RULES, kept as a constant so the README can quote it verbatim.
ZETA_COMMAND_RULES_DOC = """\
Zeta text commands (`--name value` in the prompt text), checked per model:

| command | lite t2v (and pro without an image) | lite i2v (and pro with an image) | other well-formed values |
|---|---|---|---|
| --ratio | 21:9 16:9 4:3 1:1 3:4 9:16 9:21 | those, plus adaptive and keep_ratio | text-to-video: adaptive/keep_ratio IGNORED (no image to follow); image-to-video: n/a |
| --duration | 5, 10 | 5, 10 | REJECTED (400): length is what is charged |
| --rs | 480p 720p 1080p | 480p 720p 1080p; first+last frame 480p 720p | REJECTED (400): resolution changes the price |
| --fps | 24 | 24 | IGNORED: the model renders 24 fps, price unchanged |
| --wm | true false | true false | n/a |
| --seed | -1 (random) to 4294967295 | same | n/a |
| --cf | true false | true false | n/a |

Always REJECTED (400), on every model: a value outside the command's own domain (e.g.
`--duration abc`, `--rs 4k`, `--ratio 5:7`, `--wm yes`, `--seed 2^32`), a command with no
value, the same command given twice (aliases included), and images on lite t2v.
Long aliases are read too: --dur, --resolution, --framepersecond, --watermark, --camerafixed.
IGNORED commands are stripped from the text before it is relayed; everything else, and any
`--word` that is not a known command, is relayed as written.
"""

#: Command names as written -> the canonical name of the spec's table.
ZETA_COMMAND_NAMES = {
    "ratio": "ratio", "duration": "duration", "dur": "duration", "rs": "rs", "resolution": "rs",
    "fps": "fps", "framepersecond": "fps", "wm": "wm", "watermark": "wm", "seed": "seed",
    "cf": "cf", "camerafixed": "cf",
}
# `--name` standing alone, then its value (the next word that is not itself a `--name`).
_COMMAND = re.compile(r"(?<!\S)--(?P<name>[a-z]+)(?!\S)(?:[ \t]+(?P<value>(?!--)\S+))?")


@dataclass(frozen=True)
class TextCommand:
    name: str  # canonical (ratio, duration, rs, fps, wm, seed, cf)
    written: str  # as it appears in the text, e.g. "--dur 10"
    value: Any  # typed: str, int or bool
    start: int
    end: int


def _bool_value(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return raw.lower() == "true"


def _int_value(raw: str, what: str) -> int:
    if not re.fullmatch(r"-?\d+", raw):
        raise ValueError(f"must be {what}")
    return int(raw)


def _typed_value(name: str, raw: str) -> Any:
    """A command's value in its own domain, or ValueError; whether a model takes it comes later."""
    if name == "ratio":
        if raw not in _FIXED_RATIOS | _IMAGE_RATIOS:
            raise ValueError(f"must be one of {', '.join(sorted(_FIXED_RATIOS | _IMAGE_RATIOS))}")
        return raw
    if name == "rs":
        if raw.lower() not in _RESOLUTIONS:
            raise ValueError("must be 480p, 720p or 1080p")
        return raw.lower()
    if name == "duration":
        seconds = _int_value(raw, "a whole number of seconds")
        if seconds <= 0:
            raise ValueError("must be a whole number of seconds")
        return seconds
    if name == "fps":
        fps = _int_value(raw, "a whole number of frames per second")
        if fps <= 0:
            raise ValueError("must be a whole number of frames per second")
        return fps
    if name == "seed":
        seed = _int_value(raw, "an integer from -1 to 4294967295")
        if not -1 <= seed <= 4294967295:
            raise ValueError("must be an integer from -1 (random) to 4294967295")
        return seed
    return _bool_value(raw)  # wm, cf


def parse_text_commands(text: str) -> list[TextCommand]:
    """The known `--name value` commands in a zeta prompt, typed; ValueError names the bad one."""
    found: dict[str, TextCommand] = {}
    for match in _COMMAND.finditer(text):
        name = ZETA_COMMAND_NAMES.get(match["name"])
        if name is None:
            continue  # an unknown `--word` is ordinary prompt text
        written = match.group(0).strip()
        if match["value"] is None:
            raise ValueError(f"--{match['name']} needs a value")
        if name in found:
            raise ValueError(f"--{name} is given twice ({found[name].written!r} and {written!r})")
        try:
            value = _typed_value(name, match["value"])
        except ValueError as exc:
            raise ValueError(f"--{match['name']} {match['value']}: {exc}") from None
        found[name] = TextCommand(name, written, value, match.start(), match.end())
    return list(found.values())


def _strip_commands(text: str, commands: list[TextCommand]) -> str:
    for command in sorted(commands, key=lambda c: c.start, reverse=True):
        text = text[:command.start] + text[command.end:]
    return re.sub(r"[ \t]{2,}", " ", text).strip()


_DATA_IMAGE = re.compile(r"data:image/(?P<format>[a-z0-9.+-]+);base64,(?P<data>.*)", re.DOTALL)


class ZetaImageURL(_Body):
    url: StrictStr | None = None
    image_url: StrictStr | None = None

    @field_validator("url")
    @classmethod
    def _link(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("image_url")
    @classmethod
    def _data_url(cls, value: str) -> str:
        match = _DATA_IMAGE.fullmatch(value)
        if not match:
            raise ValueError("must be a data URL of the form data:image/<format>;base64,<data>")
        _check_base64(match["data"])
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> ZetaImageURL:
        if (self.url is None) == (self.image_url is None):
            raise ValueError("give exactly one of url (an http/https link) or image_url (a data URL)")
        return self


class ZetaContentItem(_Body):
    type: Literal["text", "image_url"]
    text: StrictStr | None = None
    image_url: ZetaImageURL | None = None
    role: Literal["first_frame", "last_frame"] | None = None

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> ZetaContentItem:
        problems = _Problems(type(self).__name__)
        if self.type == "text":
            if self.text is None:
                problems.add(("text",), "is required for a text item")
            for field in ("image_url", "role"):
                if getattr(self, field) is not None:
                    problems.add((field,), "is only allowed on image_url items")
        else:
            if self.image_url is None:
                problems.add(("image_url",), "is required for an image_url item")
            if self.text is not None:
                problems.add(("text",), "is only allowed on text items")
        problems.raise_if_any()
        return self


class ZetaVideoRequest(_Body):
    """`POST /v1/video/generations` with a `zeta-*` model."""

    model: StrictStr
    content: list[ZetaContentItem] = Field(min_length=1)
    callback_url: StrictStr | None = None

    _commands: dict[str, TextCommand] = PrivateAttr(default_factory=dict)
    _ignored: list[TextCommand] = PrivateAttr(default_factory=list)
    _mode: str = PrivateAttr("text-to-video")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in ZETA_MODELS:
            raise ValueError(f"{value!r} is not a zeta model; use one of {', '.join(ZETA_MODELS)}")
        return value

    @field_validator("callback_url")
    @classmethod
    def _callback(cls, value: str) -> str:
        return _http_url(value)

    @model_validator(mode="after")
    def _model_rules(self) -> ZetaVideoRequest:
        problems = _Problems(type(self).__name__)
        images = [(i, item) for i, item in enumerate(self.content) if item.type == "image_url"]
        texts = [(i, item) for i, item in enumerate(self.content) if item.type == "text"]
        modes = ZETA_MODEL_MODES[self.model]
        self._mode = "image-to-video" if images else "text-to-video"

        if len(texts) > 1:
            problems.add(("content", texts[1][0]), "only one text item is allowed")
        if images and "image-to-video" not in modes:
            problems.add(("content", images[0][0]), f"{self.model} takes text only; "
                         f"use {ZETA_LITE_I2V} or {ZETA_PRO} for images")
        elif not images and "text-to-video" not in modes:
            problems.add(("content",), f"{self.model} needs a first-frame image "
                         "(an image_url item with role first_frame or no role)")
        first_last = self._check_frames(images, problems)

        if texts:
            index, item = texts[0]
            loc: tuple[str | int, ...] = ("content", index, "text")
            try:
                commands = parse_text_commands(item.text or "")
            except ValueError as exc:
                problems.add(loc, str(exc), item.text)
                commands = []
            rules = ZETA_COMMAND_RULES[self._mode]
            for command in commands:
                rule = rules[command.name]
                if command.name == "rs" and first_last and command.value not in _FIRST_LAST_RESOLUTIONS:
                    problems.add(loc, f"{command.written}: first-and-last-frame video supports only 480p and 720p")
                elif rule.supported is None or command.value in rule.supported:
                    self._commands[command.name] = command
                elif rule.otherwise == "ignore":
                    self._ignored.append(command)
                else:
                    allowed = ", ".join(str(v).lower() for v in sorted(rule.supported or ()))
                    problems.add(loc, f"{command.written}: {self.model} accepts {allowed}")
            if self._mode == "text-to-video" and not _strip_commands(item.text or "", commands):
                problems.add(loc, "text-to-video needs a prompt besides the --commands")
        elif self._mode == "text-to-video" and "text-to-video" in modes:
            problems.add(("content",), "text-to-video needs a text item with the prompt")
        problems.raise_if_any()
        return self

    def _check_frames(self, images: list[tuple[int, ZetaContentItem]], problems: _Problems) -> bool:
        """Spec frame rules; True when the request is first-and-last-frame."""
        if len(images) > 2:
            problems.add(("content", images[2][0]), "at most two images: one first frame and one last frame")
            return False
        roles = [item.role for _, item in images]
        if len(images) == 2:
            for index, item in images:
                if item.role is None:
                    problems.add(("content", index, "role"), "is required when two images are given "
                                 "(first_frame and last_frame)")
            if roles.count("first_frame") > 1:
                problems.add(("content", images[1][0], "role"), "at most one first_frame image")
            if roles.count("last_frame") > 1:
                problems.add(("content", images[1][0], "role"), "at most one last_frame image")
            return sorted(roles, key=str) == ["first_frame", "last_frame"]
        if roles == ["last_frame"]:
            problems.add(("content", images[0][0], "role"), "a last_frame image requires a first_frame image")
        return False

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def commands(self) -> dict[str, Any]:
        """The commands relayed to the upstream, typed (`{"duration": 10, "wm": False}`)."""
        return {name: command.value for name, command in self._commands.items()}

    @property
    def ignored_commands(self) -> list[str]:
        """Commands the model does not support and that were stripped, as written."""
        return [command.written for command in self._ignored]

    @property
    def duration(self) -> int:
        return self.commands.get("duration", ZETA_DEFAULT_DURATION)

    @property
    def sample_count(self) -> int:
        return 1

    @property
    def billable_seconds(self) -> int:
        return self.duration

    def upstream_body(self) -> dict[str, Any]:
        """`{model, content}` with ignored commands stripped; never the client's callback_url."""
        content = []
        for item in self.content:
            dumped = item.model_dump(exclude_none=True)
            if item.type == "text" and self._ignored:
                dumped["text"] = _strip_commands(item.text or "", self._ignored)
            content.append(dumped)
        return {"model": self.model, "content": content}


# --------------------------------------------------------------------------------------------
# Epsilon
# --------------------------------------------------------------------------------------------

EPSILON_MODELS = ("epsilon-2", "epsilon-2-pro")
EPSILON_SECONDS = ("4", "8", "12")
EPSILON_SIZES = ("720x1280", "1280x720", "1024x1792", "1792x1024")
EPSILON_PRO_SIZES = frozenset({"1024x1792", "1792x1024"})


class EpsilonVideoRequest(_Body):
    """`POST /v1/videos`."""

    prompt: StrictStr = Field(min_length=1)
    model: Literal["epsilon-2", "epsilon-2-pro"] = "epsilon-2"
    seconds: Literal["4", "8", "12"] = "4"  # the shortest, so a bare request is the cheapest
    size: Literal["720x1280", "1280x720", "1024x1792", "1792x1024"] = "1280x720"

    @field_validator("seconds", mode="before")
    @classmethod
    def _seconds_is_a_string(cls, value: Any) -> Any:
        if not isinstance(value, str) or value not in EPSILON_SECONDS:
            raise ValueError('must be one of the strings "4", "8" or "12"')
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @model_validator(mode="after")
    def _pro_sizes(self) -> EpsilonVideoRequest:
        if self.size in EPSILON_PRO_SIZES and self.model != "epsilon-2-pro":
            problems = _Problems(type(self).__name__)
            problems.add(("size",), f"{self.size} is only available with epsilon-2-pro", self.size)
            problems.raise_if_any()
        return self

    @property
    def sample_count(self) -> int:
        return 1

    @property
    def billable_seconds(self) -> int:
        return int(self.seconds)

    def upstream_body(self) -> dict[str, Any]:
        return self.model_dump()


# --------------------------------------------------------------------------------------------
# Family routing
# --------------------------------------------------------------------------------------------

VideoRequest = DeltaVideoRequest | ZetaVideoRequest | EpsilonVideoRequest
VIDEO_REQUESTS: dict[str, type[BaseModel]] = {
    "delta": DeltaVideoRequest, "zeta": ZetaVideoRequest, "epsilon": EpsilonVideoRequest,
}


def video_family(model: str) -> str:
    """"delta", "zeta" or "epsilon" by the model id's prefix, or a 400 naming the model."""
    if isinstance(model, str):
        for family in VIDEO_REQUESTS:
            if model.startswith(f"{family}-"):
                return family
    raise InvalidRequest(f"model: {model!r} is not a video model of the delta, zeta or epsilon family",
                         param="model")


def generic_family(data: Any) -> str:
    """The family of a `POST /v1/video/generations` body, by its model; a 400 naming the field."""
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    if "model" not in data:
        raise InvalidRequest("model: is required", param="model")
    from gateway.tasks.families import families  # a family of the registry serving this route

    for registered in families():
        if registered.generic_route and registered.name not in VIDEO_REQUESTS and registered.owns_model(data["model"]):
            return registered.name
    family = video_family(data["model"])
    if family == "epsilon":
        raise InvalidRequest("model: epsilon videos are created with POST /v1/videos", param="model")
    return family


def parse_generation_request(data: Any) -> DeltaVideoRequest | ZetaVideoRequest:
    """The body of `POST /v1/video/generations`, validated by its family's model."""
    return parse_model(VIDEO_REQUESTS[generic_family(data)], data)  # type: ignore[return-value]
