"""Zeta request rules (`POST /v1/video/generations` with a `zeta-*` model): content items, frame
rules, text commands and the reject/ignore table of the spec.

`upstream_body()` is what the adapter relays; it never holds the client's callback_url (the
gateway answers that itself, once the charge is settled).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, PrivateAttr, StrictStr, field_validator, model_validator

from gateway.schemas.shared import HttpUrl, Problems, StrictBody, data_url

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
#: The docstring of ZETA_COMMAND_RULES, kept as a constant so docs/families.md can quote it verbatim.
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
"""  # noqa: E501 - a markdown table, quoted verbatim by docs/families.md

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


class ZetaImageURL(StrictBody):
    url: HttpUrl | None = None
    image_url: StrictStr | None = None

    @field_validator("image_url")
    @classmethod
    def _data_url(cls, value: str) -> str:
        return data_url(value, "image")

    @model_validator(mode="after")
    def _exactly_one(self) -> ZetaImageURL:
        if (self.url is None) == (self.image_url is None):
            raise ValueError("give exactly one of url (an http/https link) or image_url (a data URL)")
        return self


class ZetaContentItem(StrictBody):
    type: Literal["text", "image_url"]
    text: StrictStr | None = None
    image_url: ZetaImageURL | None = None
    role: Literal["first_frame", "last_frame"] | None = None

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> ZetaContentItem:
        problems = Problems(type(self).__name__)
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


class ZetaVideoRequest(StrictBody):
    """`POST /v1/video/generations` with a `zeta-*` model."""

    model: StrictStr
    content: list[ZetaContentItem] = Field(min_length=1)
    callback_url: HttpUrl | None = None

    _commands: dict[str, TextCommand] = PrivateAttr(default_factory=dict)
    _ignored: list[TextCommand] = PrivateAttr(default_factory=list)
    _mode: str = PrivateAttr("text-to-video")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in ZETA_MODELS:
            raise ValueError(f"{value!r} is not a zeta model; use one of {', '.join(ZETA_MODELS)}")
        return value

    @model_validator(mode="after")
    def _model_rules(self) -> ZetaVideoRequest:
        problems = Problems(type(self).__name__)
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

    def _check_frames(self, images: list[tuple[int, ZetaContentItem]], problems: Problems) -> bool:
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

    @property
    def worst_case_tokens(self) -> int:
        """The tokens Ark can bill for this video at most (`zeta/prices.py`)."""
        from gateway.tasks.families.zeta.prices import default_resolution, worst_case_tokens

        # Ark's default ratio: 16:9 for text-to-video, `adaptive` (the image's) for image-to-video.
        ratio = self.commands.get("ratio") or ("16:9" if self._mode == "text-to-video" else "adaptive")
        return worst_case_tokens(self.commands.get("rs", default_resolution(self.model)),
                                 None if ratio in _IMAGE_RATIOS else ratio, self.duration)

    def upstream_body(self) -> dict[str, Any]:
        """`{model, content}` with ignored commands stripped; never the client's callback_url."""
        content = []
        for item in self.content:
            dumped = item.model_dump(exclude_none=True)
            if item.image_url is not None:
                # Ark takes an image as `image_url.url` only, a link or a data URL alike (Ark's
                # content-generation API reference; new-api's relay/channel/task/doubao MediaURL):
                # the spec's `image_url.image_url` (a data URL) is relayed there.
                dumped["image_url"] = {"url": item.image_url.url or item.image_url.image_url}
            if item.type == "text" and self._ignored:
                dumped["text"] = _strip_commands(item.text or "", self._ignored)
            content.append(dumped)
        return {"model": self.model, "content": content}
