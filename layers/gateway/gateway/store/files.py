"""The Files API's files (`/v1/files`): the record in the accounts table, the bytes in the files bucket.

| item | pk | sk |
|---|---|---|
| a file | `FILES#<user id>` | `<file id>` (TTL at its expiry) |

A file lives under its owner's partition and its bytes under its owner's prefix
(`files/<user id>/<file id>`): a read always names the caller's own user id, so another user's
file id is missing, never found and refused. Ids are the gateway's own (`file-` + the creation
time in milliseconds, hex, + random hex): a partition's keys sort by creation, which is the
list's order, and never name an upstream's file. The bucket encrypts at rest (SSE-S3) and its
lifecycle removes what the item's TTL has expired (template.yaml, `FilesBucket`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values
from gateway.store.table import AccountsTable

#: How long a presigned link to a file's bytes serves: the client follows it at once (a redirect).
PRESIGNED_SECONDS = 300


def files_pk(user_id: int | str) -> str:
    return f"FILES#{user_id}"


def new_file_id(now: float | None = None) -> str:
    millis = int((time.time() if now is None else now) * 1000)
    return f"file-{millis:012x}{secrets.token_hex(8)}"


@dataclass(frozen=True)
class StoredFile:
    file_id: str
    owner_id: str
    filename: str
    bytes: int
    purpose: str
    created_at: int
    expires_at: int | None = None
    status: str = "processed"
    #: A batch input file's summary (`tasks/families/batch/lines.FileSummary` as a dict).
    summary: dict[str, Any] = field(default_factory=dict)
    #: Why a presigned upload was refused (`status` "error"; OpenAI's FileObject field).
    status_details: str | None = None
    #: Until when a presigned upload's link takes the bytes (`status` "uploaded": `api/uploads`).
    upload_until: int | None = None

    @property
    def key(self) -> str:
        return f"files/{self.owner_id}/{self.file_id}"

    def item(self) -> dict[str, Any]:
        values = {k: v for k, v in asdict(self).items() if v is not None and k not in ("owner_id", "file_id")}
        ttl = {"expires_ttl": self.expires_at} if self.expires_at else {}
        return {"pk": files_pk(self.owner_id), "sk": self.file_id, **values, **ttl}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> StoredFile:
        return cls(file_id=item["sk"], owner_id=str(item["pk"]).removeprefix("FILES#"), filename=item["filename"],
                   bytes=int(item["bytes"]), purpose=item["purpose"], created_at=int(item["created_at"]),
                   expires_at=int(item["expires_at"]) if item.get("expires_at") is not None else None,
                   status=item.get("status") or "processed", summary=dict(item.get("summary") or {}),
                   status_details=item.get("status_details"),
                   upload_until=int(item["upload_until"]) if item.get("upload_until") is not None else None)


class FilesStore(AccountsTable):
    def __init__(self, table: str | None = None, bucket: str | None = None):
        super().__init__(table)
        self._bucket = bucket

    @property
    def bucket(self) -> str:
        return self._bucket or get_settings().files_bucket

    def put(self, stored: StoredFile, data: bytes, media_type: str = "application/octet-stream") -> None:
        """The bytes first, then the record: a record always has its bytes (a put again with the
        same id, a batch's output written again after a crash, replaces both)."""
        client("s3").put_object(Bucket=self.bucket, Key=stored.key, Body=data, ContentType=media_type,
                                ServerSideEncryption="AES256")
        self._db.put_item(TableName=self.table, Item=to_item(stored.item()))

    def get(self, owner_id: int | str, file_id: str, *, now: float | None = None) -> StoredFile | None:
        """The caller's file, or None (missing, another user's, expired)."""
        if not file_id.startswith("file-") or len(file_id) > 64:
            return None
        found = self._get(files_pk(owner_id), file_id, consistent=True)
        if found is None:
            return None
        stored = StoredFile.from_item(found)
        if stored.expires_at is not None and stored.expires_at <= (time.time() if now is None else now):
            return None  # DynamoDB's TTL deletes it within days; it is gone from the moment it expires
        return stored

    def list(self, owner_id: int | str, *, after: str | None = None, newest_first: bool = True,
             limit: int = 100, purpose: str | None = None) -> tuple[list[StoredFile], bool]:
        """A page of the owner's files and whether more follow; `after` is the last id of the page before."""
        condition = "pk = :pk"
        values: dict[str, Any] = {":pk": files_pk(owner_id)}
        if after:
            condition += " AND sk " + ("< :after" if newest_first else "> :after")
            values[":after"] = after
        now = time.time()
        found: list[StoredFile] = []
        start: dict[str, Any] | None = None
        while True:
            answer = self._db.query(TableName=self.table, KeyConditionExpression=condition,
                                    ExpressionAttributeValues=to_values(values), ScanIndexForward=not newest_first,
                                    ConsistentRead=True, **({"ExclusiveStartKey": start} if start else {}))
            for item in answer.get("Items", []):
                stored = StoredFile.from_item(from_item(item) or {})
                if stored.expires_at is not None and stored.expires_at <= now:
                    continue
                if purpose is not None and stored.purpose != purpose:
                    continue
                if len(found) == limit:
                    return found, True
                found.append(stored)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return found, False

    def record(self, stored: StoredFile) -> None:
        """A presigned upload's record, before its bytes (`status` "uploaded")."""
        self._db.put_item(TableName=self.table, Item=to_item(stored.item()))

    def settle_upload(self, stored: StoredFile) -> bool:
        """A presigned upload's outcome (`stored`: processed or error), written once: False when
        another request wrote it first (or the file was deleted meanwhile)."""
        try:
            self._db.put_item(TableName=self.table, Item=to_item(stored.item()),
                              ConditionExpression="#s = :uploaded", ExpressionAttributeNames={"#s": "status"},
                              ExpressionAttributeValues=to_values({":uploaded": "uploaded"}))
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def presigned_post(self, stored: StoredFile, media_type: str, seconds: int) -> dict[str, Any]:
        """A form POST straight to the file's key (S3's POST policy): exactly `stored.bytes` bytes
        (`content-length-range`), this key only, encrypted at rest, until `seconds` from now."""
        fields = {"Content-Type": media_type, "x-amz-server-side-encryption": "AES256"}
        return client("s3").generate_presigned_post(
            Bucket=self.bucket, Key=stored.key, Fields=fields, ExpiresIn=seconds,
            Conditions=[{"Content-Type": media_type}, {"x-amz-server-side-encryption": "AES256"},
                        ["content-length-range", stored.bytes, stored.bytes]])

    def size(self, stored: StoredFile) -> int | None:
        """The size of the file's bytes, None while none are there."""
        s3 = client("s3")
        try:
            return int(s3.head_object(Bucket=self.bucket, Key=stored.key)["ContentLength"])
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def chunks(self, stored: StoredFile, size: int = 1 << 20) -> Iterator[bytes]:
        """The file's bytes, a chunk at a time (a file too large to hold at once)."""
        body = client("s3").get_object(Bucket=self.bucket, Key=stored.key)["Body"]
        try:
            while chunk := body.read(size):
                yield chunk
        finally:
            body.close()

    def read(self, stored: StoredFile) -> bytes:
        return client("s3").get_object(Bucket=self.bucket, Key=stored.key)["Body"].read()

    def presigned(self, stored: StoredFile, *, seconds: int = PRESIGNED_SECONDS) -> str:
        return client("s3").generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": stored.key},
                                                   ExpiresIn=seconds)

    def delete(self, stored: StoredFile) -> None:
        """The record first (the file is gone for its owner at once), then the bytes."""
        self._db.delete_item(TableName=self.table, Key=to_item({"pk": files_pk(stored.owner_id),
                                                                "sk": stored.file_id}))
        self.delete_bytes(stored)

    def delete_bytes(self, stored: StoredFile) -> None:
        client("s3").delete_object(Bucket=self.bucket, Key=stored.key)
