"""Gamma upstream: an asynchronous video-synthesis task (`X-DashScope-Async: enable`), polled by id.

Errors are `{request_id, code, message}`; a failed task carries `output.code` and
`output.message`; `UNKNOWN` (with HTTP 200) means an id the upstream does not know (or no longer
keeps). A word not in the table is recorded and polled on (`adapter.unified`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from gateway.tasks.adapter import TaskSnapshot, UpstreamError, join, object_at, read_json, unified
from gateway.tasks.families.gamma.errors import ERRORS

SUBMIT_PATH = "/api/v1/services/aigc/video-generation/video-synthesis"
TASKS_PATH = "/api/v1/tasks"

STATUSES: Mapping[str, str] = {
    "PENDING": "queued", "RUNNING": "in_progress", "SUCCEEDED": "succeeded", "FAILED": "failed",
    "CANCELED": "cancelled", "UNKNOWN": "failed",
}
#: Fields of the upstream's `output` the gateway's query answer repeats.
DETAIL_FIELDS = ("submit_time", "scheduled_time", "end_time", "orig_prompt", "actual_prompt", "code", "message")


def error_text(body: Any) -> str | None:
    if isinstance(body, dict) and (body.get("code") or body.get("message")):
        return ": ".join(str(part) for part in (body.get("code"), body.get("message")) if part)
    return None


class GammaAdapter:
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        body = {"model": upstream_model, "input": request["input"], "parameters": request["parameters"]}
        return httpx.Request("POST", join(base_url, SUBMIT_PATH), json=body, headers={
            "Authorization": f"Bearer {api_key}", "X-DashScope-Async": "enable"})

    def parse_submit(self, response: httpx.Response) -> str:
        body = read_json(response, error_text, retry_unreadable=False, errors=ERRORS)
        output = object_at(body, "output")
        task_id = output.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise UpstreamError(502, "upstream accepted the task without an output.task_id", retryable=False)
        return task_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, f"{TASKS_PATH}/{quote(upstream_task_id, safe='')}"),
                             headers={"Authorization": f"Bearer {api_key}"})

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        body = read_json(response, error_text, retry_unreadable=True, errors=ERRORS)
        output = object_at(body, "output")
        word = str(output.get("task_status") or "")
        status = unified(STATUSES, word)
        video_url = output.get("video_url")
        urls = [video_url] if status == "succeeded" and isinstance(video_url, str) and video_url else []
        error = None
        if status in ("failed", "cancelled"):
            error = error_text(output) or ("the upstream does not know this task (UNKNOWN)" if word == "UNKNOWN"
                                           else f"the upstream task ended {word}")
        usage = object_at(body, "usage")
        details: dict[str, Any] = {name: output[name] for name in DETAIL_FIELDS
                                   if isinstance(output.get(name), (str, int, float))}
        if usage:
            details["usage"] = {k: v for k, v in usage.items() if isinstance(v, (int, float, str))}
        duration = usage.get("video_duration") or usage.get("duration")
        return TaskSnapshot(status=status, upstream_status=word, progress=100 if status == "succeeded" else None,
                            result_urls=urls, error=error,
                            duration=str(duration) if isinstance(duration, (int, float)) else None,
                            raw=body, details=details)
