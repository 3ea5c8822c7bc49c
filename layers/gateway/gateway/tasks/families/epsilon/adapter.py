"""Epsilon upstream: a video object polled by id; its bytes come from a separate content endpoint.

The video object carries no link, so a snapshot's `result_urls` stays empty: the gateway serves
`GET /videos/{id}/content` itself by relaying `build_content` (the upstream needs our key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from gateway.tasks.adapter import TaskSnapshot, UpstreamError, join, read_json, unified
from gateway.tasks.families.epsilon.errors import ERRORS

STATUSES: Mapping[str, str] = {
    "queued": "queued", "in_progress": "in_progress", "completed": "succeeded", "failed": "failed",
}
#: `variant` of the content endpoint -> the media type of its bytes.
CONTENT_VARIANTS: Mapping[str, str] = {
    "video": "video/mp4", "thumbnail": "image/webp", "spritesheet": "image/jpeg",
}


def _error_text(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error.get("message") or error.get("code") or None
    return None


class EpsilonAdapter:
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        body = {key: request[key] for key in ("prompt", "seconds", "size") if request.get(key) is not None}
        body["model"] = upstream_model
        return httpx.Request("POST", join(base_url, "/v1/videos"),
                             headers={"Authorization": f"Bearer {api_key}"}, json=body)

    def parse_submit(self, response: httpx.Response) -> str:
        body = read_json(response, _error_text, retry_unreadable=False, errors=ERRORS)
        video_id = body.get("id")
        if not isinstance(video_id, str) or not video_id:
            raise UpstreamError(502, "upstream accepted the video without an id", retryable=False)
        return video_id

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        return httpx.Request("GET", join(base_url, f"/v1/videos/{quote(upstream_task_id, safe='')}"),
                             headers={"Authorization": f"Bearer {api_key}"})

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        body = read_json(response, _error_text, retry_unreadable=True, errors=ERRORS)
        word = str(body.get("status") or "")
        status = unified(STATUSES, word)
        progress = body.get("progress")
        progress = max(0, min(100, int(progress))) if isinstance(progress, (int, float)) else None
        if status == "succeeded":
            progress = 100
        error = (_error_text(body) or "the upstream video failed without a reason") if status == "failed" else None
        seconds = body.get("seconds")
        return TaskSnapshot(status=status, upstream_status=word, progress=progress, result_urls=[], error=error,
                            duration=str(seconds) if seconds not in (None, "") else None, raw=body)

    def build_content(self, base_url: str, api_key: str, upstream_task_id: str,
                      variant: str = "video") -> httpx.Request:
        """The request for a finished video's bytes; answer it with `CONTENT_VARIANTS[variant]`."""
        if variant not in CONTENT_VARIANTS:  # the family answers the client; this only guards the URL
            raise ValueError(f"not an epsilon content variant: {variant!r}")
        return httpx.Request("GET", join(base_url, f"/v1/videos/{quote(upstream_task_id, safe='')}/content"),
                             params={"variant": variant}, headers={"Authorization": f"Bearer {api_key}"})
