"""The sample plant store (spec: Plant, NewPlant)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A plant is one DynamoDB item (at most 400 KB); these keep it far below that.
MAX_NAME_CHARS = 1024
MAX_TAG_CHARS = 1024


class Plant(BaseModel):
    name: Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)]
    tag: Annotated[StrictStr, Field(max_length=MAX_TAG_CHARS)] | None = None


class NewPlant(Plant):
    model_config = ConfigDict(extra="ignore")

    id: Annotated[StrictInt, Field(ge=INT64_MIN, le=INT64_MAX, description="int64 identification number")]
    name: Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_CHARS)]
