"""The beta request (`POST /beta/v1/beta-2-pro`), with every rule.

| field | rule | default |
|---|---|---|
| model | required; `beta-2-pro` (the model of the route) | |
| prompt | required; 1 to 10000 characters | |
| seed | integer, 0 to 4294967295 | random |
| width, height | integers, multiples of 16, 64 to 2048 | 1024 x 768 |
| safety_tolerance | integer, 0 (strictest) to 6 | 2 |
| output_format | `jpeg` or `png` | jpeg |
| prompt_upsampling | boolean | false |
| webhook_url | http(s) URL: the gateway's signed callback when the image is finished | |
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from gateway.schemas.shared import http_url

MODELS = ("beta-2-pro",)
MIN_SIDE, MAX_SIDE, SIDE_STEP = 64, 2048, 16
MAX_PROMPT = 10_000
MAX_SEED = 4_294_967_295
MAX_SAFETY_TOLERANCE = 6


class BetaRequest(BaseModel):
    # A misspelt field is a 400 naming it rather than a silently dropped option.
    model_config = ConfigDict(extra="forbid")

    model: StrictStr
    prompt: StrictStr = Field(min_length=1, max_length=MAX_PROMPT)
    seed: StrictInt | None = Field(None, ge=0, le=MAX_SEED)
    width: StrictInt = Field(1024, ge=MIN_SIDE, le=MAX_SIDE)
    height: StrictInt = Field(768, ge=MIN_SIDE, le=MAX_SIDE)
    safety_tolerance: StrictInt = Field(2, ge=0, le=MAX_SAFETY_TOLERANCE)
    output_format: Literal["jpeg", "png"] = "jpeg"
    prompt_upsampling: StrictBool = False
    webhook_url: StrictStr | None = None

    @field_validator("model")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(f"{value!r} is not a beta model; use one of {', '.join(MODELS)}")
        return value

    @field_validator("prompt")
    @classmethod
    def _words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("width", "height")
    @classmethod
    def _step(cls, value: int) -> int:
        if value % SIDE_STEP:
            raise ValueError(f"must be a multiple of {SIDE_STEP}")
        return value

    @field_validator("webhook_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return http_url(value)

    def upstream_request(self) -> dict[str, Any]:
        """What the adapter relays: never the webhook, which the gateway answers itself once
        the charge is settled."""
        return self.model_dump(exclude_none=True, exclude={"model", "webhook_url"})
