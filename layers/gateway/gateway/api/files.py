"""The Files API (`/v1/files`) in OpenAI's shapes (openai-python `types/file_object.py`,
`file_create_params.py`, `file_list_params.py`; openapi `ListFilesResponse`, `DeleteFileResponse`).

- `POST /v1/files` (multipart: `file`, `purpose`, `expires_after[anchor]`, `expires_after[seconds]`):
  purposes `batch` and `user_data`. A `batch` file is checked line by line before it is stored
  (`tasks/families/batch/lines.check_file`: the first broken line's number in the 400) and its
  summary kept, so a batch holds without reading it again. Every file expires: 30 days after its
  upload by default (OpenAI's default for batch files), `expires_after` from 1 hour to 30 days.
  A body above what a Lambda request carries is a 413 that names the presigned upload for larger
  files (`POST /v1/files/uploads`, `api/uploads`).
- `GET /v1/files` (`purpose`, `limit` 1..10,000, `order`, `after`), `GET /v1/files/{id}`,
  `GET /v1/files/{id}/content` (a redirect to a short presigned S3 link, as the video content
  routes do), `DELETE /v1/files/{id}`.

A file is its owner's only (`store/files`): another user's id answers the same 404 as a missing one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from gateway.auth import Principal
from gateway.errors import InvalidRequest, NotFound, PayloadTooLarge
from gateway.multipart import MAX_REQUEST_BYTES, form_from_event
from gateway.store.files import FilesStore, StoredFile, new_file_id
from gateway.validation import check_text_fields, integer_param

PURPOSES = ("batch", "user_data")
#: OpenAI's bounds of `expires_after.seconds`, and the default of a batch file (30 days).
MIN_EXPIRY, MAX_EXPIRY = 3600, 30 * 24 * 3600
MAX_FILENAME = 255


def file_object(stored: StoredFile) -> dict[str, Any]:
    return {"id": stored.file_id, "object": "file", "bytes": stored.bytes, "created_at": stored.created_at,
            "filename": stored.filename, "purpose": stored.purpose, "status": stored.status,
            "expires_at": stored.expires_at, "status_details": stored.status_details}


def not_found(file_id: str) -> NotFound:
    """OpenAI's answer for a file it does not have (also another user's)."""
    return NotFound(f"No such File object: {file_id}", param="id", code="file_not_found")


def owned(principal: Principal, file_id: str, *, check: bool = True) -> StoredFile:
    """The caller's file; a presigned upload's checked first if its bytes have arrived (`check`)."""
    from gateway.api.uploads import arrived

    stored = FilesStore().get(principal.user_id, file_id or "")
    if stored is None:
        raise not_found(file_id)
    return arrived(stored) if check else stored


def ready(principal: Principal, file_id: str, param: str = "id") -> StoredFile:
    """The caller's file with its bytes checked: else a 400 saying where its upload stands."""
    stored = owned(principal, file_id)
    if stored.status == "uploaded":
        raise InvalidRequest(f"file '{file_id}' has not arrived yet: POST it to its upload's url first",
                             param=param, code="file_not_ready")
    if stored.status == "error":
        raise InvalidRequest(f"file '{file_id}' was refused: {stored.status_details}", param=param,
                             code="file_refused")
    return stored


def _expiry(fields: Mapping[str, str]) -> int:
    anchor = fields.get("expires_after[anchor]")
    seconds = fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return MAX_EXPIRY
    if anchor != "created_at":
        raise InvalidRequest("expires_after.anchor: must be 'created_at'", param="expires_after.anchor")
    try:
        value = int(seconds or "")
    except ValueError:
        value = 0
    if not MIN_EXPIRY <= value <= MAX_EXPIRY:
        raise InvalidRequest(f"expires_after.seconds: must be a whole number from {MIN_EXPIRY} to {MAX_EXPIRY}",
                             param="expires_after.seconds")
    return value


def upload(principal: Principal, event: Mapping[str, Any]) -> dict[str, Any]:
    """POST /v1/files."""
    from gateway.tasks.families.batch.lines import check_file  # only where a batch file is checked

    try:
        form = form_from_event(event)
    except PayloadTooLarge as exc:
        raise PayloadTooLarge(
            f"{exc.message}. POST /v1/files takes files of at most {MAX_REQUEST_BYTES} bytes; for a larger "
            "file, POST /v1/files/uploads {filename, purpose, bytes} and send the file to the presigned "
            "upload it answers (up to 200 MB)",
            code="file_too_large") from None
    check_text_fields(form.fields)
    unknown = set(form.fields) - {"purpose", "expires_after[anchor]", "expires_after[seconds]"}
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidRequest(f"{name}: unknown field", param=name)
    purpose = form.fields.get("purpose")
    if purpose not in PURPOSES:
        raise InvalidRequest(f"purpose: must be one of {', '.join(PURPOSES)} (got {purpose!r})", param="purpose")
    files = form.files_named("file")
    if len(files) != 1:
        raise InvalidRequest("file: exactly one file is required", param="file")
    part = files[0]
    filename = (part.filename or "file")[:MAX_FILENAME]
    seconds = _expiry(form.fields)
    summary = check_file(part.data).as_dict() if purpose == "batch" else {}
    now = time.time()
    stored = StoredFile(file_id=new_file_id(now), owner_id=str(principal.user_id), filename=filename,
                        bytes=part.size, purpose=purpose, created_at=int(now), expires_at=int(now) + seconds,
                        summary=summary)
    FilesStore().put(stored, part.data, part.content_type or "application/octet-stream")
    return file_object(stored)


def listing(principal: Principal, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """GET /v1/files: newest first unless `order=asc`; `after` the last id of the page before."""
    params = params or {}
    limit = integer_param(params, "limit", 10_000, 1, 10_000)
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise InvalidRequest("order: must be 'asc' or 'desc'", param="order")
    purpose = params.get("purpose") or None
    after = params.get("after") or None
    found, more = FilesStore().list(principal.user_id, after=after, newest_first=order == "desc",
                                    limit=min(limit, 1000), purpose=purpose)
    data = [file_object(stored) for stored in found]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": more}


def delete(principal: Principal, file_id: str) -> dict[str, Any]:
    """DELETE /v1/files/{id}."""
    stored = owned(principal, file_id, check=False)
    FilesStore().delete(stored)
    return {"id": stored.file_id, "object": "file", "deleted": True}


def content_link(principal: Principal, file_id: str) -> str:
    """GET /v1/files/{id}/content: where the bytes are (a presigned link of a few minutes)."""
    return FilesStore().presigned(ready(principal, file_id))
