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


#: The largest file a presigned upload takes: a batch input file's limit (OpenAI's 200 MB).
MAX_UPLOAD_BYTES = 200 * 1024 * 1024


class UploadExpiry(StrictBody):
    anchor: Literal["created_at"]
    seconds: Annotated[int, Field(ge=3600, le=30 * 24 * 3600, strict=True)]


class FileUploadCreate(StrictBody):
    """`POST /v1/files/uploads`: the fields of OpenAI's `uploads.create` (`upload_create_params.py`)
    for one presigned form POST of the whole file instead of parts."""

    filename: Annotated[StrictStr, Field(min_length=1, max_length=255)]
    purpose: Literal["batch", "user_data"]
    bytes: Annotated[int, Field(ge=1, le=MAX_UPLOAD_BYTES, strict=True,
                                description="the file's exact size: the upload takes this many bytes and no other")]
    mime_type: Annotated[StrictStr, Field(min_length=1, max_length=255,
                                          pattern=r"^[\w.+-]+/[\w.+-]+$")] = "application/jsonl"
    expires_after: UploadExpiry | None = None
