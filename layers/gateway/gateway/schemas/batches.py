"""The Batch API's request (`POST /v1/batches`): openai-python's `batch_create_params.py`, the
endpoints the gateway batches (`tasks/families/batch/lines.ENDPOINTS`) and the one completion window."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictStr, field_validator

from gateway.schemas.shared import StrictBody

MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512


class BatchCreate(StrictBody):
    input_file_id: Annotated[StrictStr, Field(min_length=1, max_length=64,
                                              description="a file uploaded with purpose batch")]
    endpoint: Literal["/v1/chat/completions", "/v1/embeddings", "/v1/responses"]
    completion_window: Literal["24h"]
    metadata: dict[Annotated[StrictStr, Field(max_length=MAX_METADATA_KEY)],
                   Annotated[StrictStr, Field(max_length=MAX_METADATA_VALUE)]] | None = None

    @field_validator("metadata")
    @classmethod
    def _pairs(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and len(value) > MAX_METADATA_PAIRS:
            raise ValueError(f"at most {MAX_METADATA_PAIRS} pairs")
        return value
