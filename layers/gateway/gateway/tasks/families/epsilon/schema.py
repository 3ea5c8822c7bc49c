"""Epsilon request rules (`POST /v1/videos`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator, model_validator

from gateway.schemas.shared import Problems, Prompt, StrictBody

EPSILON_SECONDS = ("4", "8", "12")
EPSILON_PRO_SIZES = frozenset({"1024x1792", "1792x1024"})


class EpsilonVideoRequest(StrictBody):
    """`POST /v1/videos`."""

    prompt: Prompt
    model: Literal["epsilon-2", "epsilon-2-pro"] = "epsilon-2"
    seconds: Literal["4", "8", "12"] = "4"  # the shortest, so a bare request is the cheapest
    size: Literal["720x1280", "1280x720", "1024x1792", "1792x1024"] = "1280x720"

    @field_validator("seconds", mode="before")
    @classmethod
    def _seconds_is_a_string(cls, value: Any) -> Any:
        if not isinstance(value, str) or value not in EPSILON_SECONDS:
            raise ValueError('must be one of the strings "4", "8" or "12"')
        return value

    @model_validator(mode="after")
    def _pro_sizes(self) -> EpsilonVideoRequest:
        if self.size in EPSILON_PRO_SIZES and self.model != "epsilon-2-pro":
            problems = Problems(type(self).__name__)
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
