"""Zeta upstream: a content-generation task, polled by id until it has a `content.video_url`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from gateway.tasks.adapter import TaskSnapshot, UpstreamError, join, object_at, read_json, unified
from gateway.tasks.families.zeta.errors import ERRORS

TASKS_PATH = "/api/v3/contents/generations/tasks"

#: Ark's task states (its API reference, "query a content generation task": queued, running,
#: cancelled, succeeded, failed, expired). `expired`: the task outlived its
#: `execution_expires_after` upstream and will never finish, so it fails (and is refunded) now
#: rather than being polled as running until the gateway's age limit.
STATUSES: Mapping[str, str] = {
    "queued": "queued", "running": "in_progress", "succeeded": "succeeded",
    "failed": "failed", "cancelled": "cancelled", "expired": "failed",
}


def _error_text(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return ": ".join(str(part) for part in (error.get("code"), error.get("message")) if part) or None
    return None


class ZetaAdapter:
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        # Only model and content: the gateway answers the client's callback_url itself, and an
        # upstream callback would reach the client before the gateway has settled the charge.
        body = {"model": upstream_model, "content": request["content"]}
        return httpx.Request("POST", join(base_url, TASKS_PATH),
                             headers={"Authorization": f"Bearer {api_key}"}, json=body)

    def parse_submit(self, response: httpx.Response) -> str:
        body = read_json(response, _error_text, retry_unreadable=False, errors=ERRORS)
        task_id = body.get("id")
        if not isinstance(task_id, str) or not task_id:
            raise UpstreamError(502, "upstream accepted the task without an id", retryable=False)
        return task_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, f"{TASKS_PATH}/{quote(upstream_task_id, safe='')}"),
                             headers={"Authorization": f"Bearer {api_key}"})

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        body = read_json(response, _error_text, retry_unreadable=True, errors=ERRORS)
        word = str(body.get("status") or "")
        status = unified(STATUSES, word)
        content = object_at(body, "content")
        video_url = content.get("video_url")
        urls = [video_url] if isinstance(video_url, str) and video_url else []
        error = None
        if status == "failed":
            error = _error_text(body) or ("the upstream task expired before it finished" if word == "expired"
                                          else "the upstream task failed without a reason")
        elif status == "succeeded" and not urls:
            status, error = "failed", "the upstream finished without a video_url"
        duration = body.get("duration")
        details: dict[str, Any] = {}
        tokens = object_at(body, "usage").get("completion_tokens")
        if status == "succeeded" and isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
            details["completion_tokens"] = tokens  # what Ark bills (zeta/prices.py)
        return TaskSnapshot(status=status, upstream_status=word, progress=100 if status == "succeeded" else None,
                            result_urls=urls, error=error,
                            duration=str(duration) if isinstance(duration, (int, str)) and duration != "" else None,
                            raw=body, details=details)
