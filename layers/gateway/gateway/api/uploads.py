"""Files larger than a Lambda request carries (`POST /v1/files/uploads`): a presigned S3 upload.

`POST /v1/files` takes at most `multipart.MAX_REQUEST_BYTES` (a Lambda request event's 6 MB after
base64); its 413 names this route. The request takes the fields of OpenAI's `uploads.create`
(`filename`, `purpose`, `bytes`, `mime_type`, `expires_after`; openai-python
`upload_create_params.py`), but instead of OpenAI's parts (S3 joins parts of 5 MiB or more only,
which a Lambda request cannot carry) it answers the file, `status: "uploaded"`, with one S3
presigned POST (`upload: {url, fields, expires_at}`): the client posts `fields` and then the file
as a multipart form to `url`, straight to the file's own key in the files bucket. The POST policy
takes exactly `bytes` bytes (`content-length-range`), that key only, SSE-S3, for
`UPLOAD_SECONDS`. The bytes never pass through a function.

The file is checked when it is next read (`arrived`: `GET /v1/files/{id}`, which
`client.files.wait_for_processing` polls, its content, or a batch naming it): its size against
`bytes` (the local emulator does not enforce a POST policy, so the check does not trust it), then
a batch file line by line as `POST /v1/files` checks it, streamed. It becomes `processed` with its
summary, or `error` with `status_details` naming the first bad line (`line N: ...`), its bytes
deleted. A link that expired with nothing uploaded leaves the file `error` too.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from gateway.auth import Principal
from gateway.errors import InvalidRequest
from gateway.observability import logger
from gateway.store.files import FilesStore, StoredFile, new_file_id
from gateway.validation import parse_model

#: How long the presigned POST takes the bytes (S3 checks the policy's expiration).
UPLOAD_SECONDS = 3600


def create(principal: Principal, body: Any) -> dict[str, Any]:
    """POST /v1/files/uploads: the file's record and the form that uploads its bytes."""
    from gateway.api.files import MAX_EXPIRY, MAX_FILENAME, file_object
    from gateway.schemas.batches import FileUploadCreate  # pydantic only where a body is parsed

    request = parse_model(FileUploadCreate, body)
    now = int(time.time())
    seconds = request.expires_after.seconds if request.expires_after else MAX_EXPIRY
    stored = StoredFile(file_id=new_file_id(now), owner_id=str(principal.user_id),
                        filename=request.filename[:MAX_FILENAME], bytes=request.bytes, purpose=request.purpose,
                        created_at=now, expires_at=now + seconds, status="uploaded",
                        upload_until=now + UPLOAD_SECONDS)
    store = FilesStore()
    store.record(stored)
    form = store.presigned_post(stored, request.mime_type, UPLOAD_SECONDS)
    return {**file_object(stored), "upload": {"url": form["url"], "fields": form["fields"],
                                              "expires_at": stored.upload_until}}


def arrived(stored: StoredFile, *, now: float | None = None) -> StoredFile:
    """A presigned upload's file, checked once its bytes are there (the record as it now stands)."""
    if stored.status != "uploaded":
        return stored
    store = FilesStore()
    size = store.size(stored)
    now = time.time() if now is None else now
    if size is None:
        if stored.upload_until is not None and now <= stored.upload_until:
            return stored  # still on its way
        outcome = _refused(stored, "the upload did not arrive before its link expired")
    elif size != stored.bytes:
        outcome = _refused(stored, f"the upload is {size} bytes, not the {stored.bytes} it was declared")
    elif stored.purpose == "batch":
        from gateway.tasks.families.batch.lines import check_lines, split_lines

        try:
            summary = check_lines(split_lines(store.chunks(stored)))
        except InvalidRequest as exc:
            outcome = _refused(stored, exc.message)
        else:
            outcome = dataclasses.replace(stored, status="processed", summary=summary.as_dict(), upload_until=None)
    else:
        outcome = dataclasses.replace(stored, status="processed", upload_until=None)
    if store.settle_upload(outcome):
        if outcome.status == "error" and size is not None:
            store.delete_bytes(stored)  # refused bytes are kept nowhere
        return outcome
    return store.get(stored.owner_id, stored.file_id) or outcome  # another request checked it first


def _refused(stored: StoredFile, why: str) -> StoredFile:
    logger.info("a presigned upload was refused", extra={"file_id": stored.file_id, "why": why})
    return dataclasses.replace(stored, status="error", status_details=why, upload_until=None)
