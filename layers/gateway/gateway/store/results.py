"""Results the gateway keeps: the bytes of a task's result, in the results bucket (S3), by task.

An upstream whose result links expire within minutes (beta), answer only with the channel's
key (delta's `video.uri`, epsilon's content) gets its result copied here when the task succeeds,
so the gateway's own link serves it for as long as the bucket keeps it (its lifecycle rule:
`KEPT_SECONDS`). The bytes leave through a short presigned S3 link (`presigned`) the gateway's
route redirects to, never through a Lambda answer (6 MB). With no bucket configured
(`RESULTS_BUCKET` unset) nothing is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.settings import get_settings
from gateway.store.aws import client

#: How long a kept result stays: the bucket's lifecycle rule (template.yaml, `ExpirationInDays: 1`)
#: removes an object at the first midnight UTC a day or more after it was written, so a day at least.
KEPT_SECONDS = 24 * 3600
#: How long a presigned link to a kept result serves: the client follows it at once (a redirect).
PRESIGNED_SECONDS = 300


@dataclass(frozen=True)
class KeptResult:
    data: bytes
    media_type: str


class ResultsStore:
    def __init__(self, bucket: str | None = None):
        self.bucket = bucket if bucket is not None else get_settings().results_bucket

    @property
    def enabled(self) -> bool:
        return bool(self.bucket)

    @staticmethod
    def key(family: str, task_id: str, index: int = 0) -> str:
        return f"{family}/{task_id}/{index}"

    def put(self, key: str, result: KeptResult) -> None:
        client("s3").put_object(Bucket=self.bucket, Key=key, Body=result.data, ContentType=result.media_type)

    def exists(self, key: str) -> bool:
        try:
            client("s3").head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    def presigned(self, key: str, *, seconds: int = PRESIGNED_SECONDS) -> str:
        """A link that serves the object to anyone for `seconds` (signed with this function's own
        credentials: its role needs s3:GetObject on the bucket)."""
        return client("s3").generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": key},
                                                   ExpiresIn=seconds)

    def get(self, key: str) -> KeptResult | None:
        """The kept bytes, or None when they were never kept or have expired."""
        try:
            answer = client("s3").get_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        return KeptResult(answer["Body"].read(), answer.get("ContentType") or "application/octet-stream")
