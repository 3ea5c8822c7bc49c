"""Request models of the imgtask submits, with their rules, and the actions a button stands for.

Images come as data URLs (`data:image/png;base64,...`), checked by their bytes. A body field
the gateway does not know is a 400 (a misspelt option is never dropped silently).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr

from gateway.errors import InvalidRequest
from gateway.imagetypes import IMAGE_MEDIA_TYPES, detect_image_type

MAX_PROMPT_CHARS = 8192
MAX_STATE_CHARS = 1024
MAX_URL_CHARS = 2048
MAX_IMAGES = 5
_DATA_URL = re.compile(r"data:(image/[\w.+-]+);base64,(.+)", re.S)
TASK_ID = re.compile(r"[0-9]{1,19}")


def _data_url(value: str) -> str:
    match = _DATA_URL.fullmatch(value)
    if not match:
        raise ValueError("must be a data URL of an image (data:image/<type>;base64,<data>)")
    try:
        data = base64.b64decode(match[2], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64 after 'base64,'") from None
    kind = detect_image_type(data[:64])
    if kind is None:
        raise ValueError(f"is not an image of a known format ({', '.join(sorted(IMAGE_MEDIA_TYPES))})")
    return value


def _url(value: str) -> str:
    if not re.match(r"https?://[^\s/]+", value) or len(value) > MAX_URL_CHARS:
        raise ValueError(f"must be an http or https URL of at most {MAX_URL_CHARS} characters")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def _task_id(value: str) -> str:
    if not TASK_ID.fullmatch(value):
        raise ValueError("must be a task id (a numeric string) answered by a submit")
    return value


DataUrl = Annotated[StrictStr, AfterValidator(_data_url)]
Url = Annotated[StrictStr, AfterValidator(_url)]
TaskId = Annotated[StrictStr, AfterValidator(_task_id)]
Prompt = Annotated[StrictStr, Field(min_length=1, max_length=MAX_PROMPT_CHARS), AfterValidator(_not_blank)]
BotType = Literal["MID_JOURNEY", "NIJI_JOURNEY"]


class _Submit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    notifyHook: Url | None = None
    state: Annotated[StrictStr, Field(max_length=MAX_STATE_CHARS)] | None = None


class ImagineRequest(_Submit):
    prompt: Prompt
    base64Array: Annotated[list[DataUrl], Field(max_length=MAX_IMAGES)] | None = None
    botType: BotType | None = None


class ActionRequest(_Submit):
    taskId: TaskId
    customId: Annotated[StrictStr, Field(min_length=1, max_length=256)]


class ModalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    taskId: TaskId
    prompt: Annotated[StrictStr, Field(max_length=MAX_PROMPT_CHARS)] | None = None
    maskBase64: DataUrl | None = None


class BlendRequest(_Submit):
    base64Array: Annotated[list[DataUrl], Field(min_length=2, max_length=MAX_IMAGES)]
    dimensions: Literal["PORTRAIT", "SQUARE", "LANDSCAPE"] = "SQUARE"
    botType: BotType | None = None


class DescribeRequest(_Submit):
    base64: DataUrl
    botType: BotType | None = None


class ShortenRequest(_Submit):
    prompt: Prompt
    botType: BotType | None = None


class SwapFaceRequest(_Submit):
    sourceBase64: DataUrl
    targetBase64: DataUrl


# ---------------------------------------------------------------------------------------------
# What a button's customId stands for
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ButtonAction:
    action: str  # the record's `action` (one of the nine)
    price: str  # the price table's action: imgtask-<price>
    modal: str | None = None  # the modal it needs first: "CustomZoom" or "Inpaint"


_BUTTONS: tuple[tuple[re.Pattern[str], ButtonAction], ...] = (
    (re.compile(r"MJ::JOB::upsample(?:_v\d+_2x_(?:subtle|creative))?::\d+::[\w-]+(?:::SOLO)?"),
     ButtonAction("UPSCALE", "upscale")),
    (re.compile(r"MJ::JOB::(?:variation|low_variation|high_variation)::\d+::[\w-]+(?:::SOLO)?"),
     ButtonAction("VARIATION", "variation")),
    (re.compile(r"MJ::JOB::reroll::0::[\w-]+(?:::SOLO)?"), ButtonAction("IMAGINE", "imagine")),
    (re.compile(r"MJ::Outpaint::\d+::\d+::[\w-]+(?:::SOLO)?"), ButtonAction("ZOOM", "zoom")),
    (re.compile(r"MJ::JOB::pan_(?:left|right|up|down)::\d+::[\w-]+(?:::SOLO)?"), ButtonAction("PAN", "pan")),
    (re.compile(r"MJ::CustomZoom::[\w-]+"), ButtonAction("ZOOM", "modal", modal="CustomZoom")),
    (re.compile(r"MJ::Inpaint::\d+::[\w-]+(?:::SOLO)?"), ButtonAction("VARIATION", "modal", modal="Inpaint")),
)


def button_action(custom_id: str) -> ButtonAction:
    """The action of a button's customId; a 400 naming customId for one the gateway cannot price."""
    for pattern, action in _BUTTONS:
        if pattern.fullmatch(custom_id):
            return action
    raise InvalidRequest("customId: is not an action this gateway serves (upscale, variation, reroll, zoom, pan, "
                         "custom zoom, vary region)", param="customId")
