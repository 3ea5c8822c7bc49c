"""Results the gateway keeps: the bytes of a task's result, in the results bucket (S3), by task.

An upstream whose result links expire within minutes (beta) gets its result copied here when
the task succeeds, so the gateway's own link serves it for as long as the bucket keeps it (its
lifecycle rule: 1 day). With no bucket configured (`RESULTS_BUCKET` unset) nothing is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.settings import get_settings
from gateway.store.aws import client


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

    def get(self, key: str) -> KeptResult | None:
        """The kept bytes, or None when they were never kept or have expired."""
        try:
            answer = client("s3").get_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        return KeptResult(answer["Body"].read(), answer.get("ContentType") or "application/octet-stream")
