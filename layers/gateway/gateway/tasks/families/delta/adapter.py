"""Delta upstream: a long-running operation (`:predictLongRunning`) polled until `done`.

Results come as links under `response.generateVideoResponse.generatedSamples[].video.uri`,
or under `response.generatedVideos[]` / `response.videos[]` (clients disagree; we accept all),
or as inline `bytesBase64Encoded`. Inline bytes are never turned into a data URL (a video is
megabytes: too big for a task record or a JSON answer); they travel in
`TaskSnapshot.inline_results` for the engine to store, and are elided from `raw`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from gateway.tasks.adapter import InlineResult, TaskSnapshot, UpstreamError, join, object_at, read_json, unified
from gateway.tasks.families.delta.errors import ERRORS
from gateway.upstreams.vertex import VertexSite, tokens

#: The upstream has no status word; the adapter names the three states an operation can be in.
STATUSES: Mapping[str, str] = {
    "running": "in_progress",  # done: false (no queued/running distinction upstream)
    "succeeded": "succeeded",  # done: true with response (and at least one video)
    "failed": "failed",  # done: true with error, or a response with no video (filtered)
}

# An operation name is a relative resource path; anything else must not reach the URL.
_OPERATION_NAME = re.compile(r"[A-Za-z0-9._~-]+(?:/[A-Za-z0-9._~-]+)*")


def _error_text(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return " ".join(str(part) for part in (error.get("status"), error.get("message")) if part) or None
    return None


def _samples(response: dict) -> list[dict]:
    lists = (
        (response.get("generateVideoResponse") or {}).get("generatedSamples"),
        response.get("generatedVideos"),
        response.get("videos"),
    )
    return next((items for items in lists if isinstance(items, list) and items), [])


def _elide_inline(value: Any) -> Any:
    """A copy of `value` with every base64 payload replaced by its length, safe to store and log."""
    if isinstance(value, dict):
        return {key: (f"<{len(item)} base64 characters>" if key == "bytesBase64Encoded" and isinstance(item, str)
                      else _elide_inline(item)) for key, item in value.items()}
    if isinstance(value, list):
        return [_elide_inline(item) for item in value]
    return value


class DeltaAdapter:
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        body = {"instances": request["instances"], "parameters": request.get("parameters", {})}
        path = f"/v1beta/models/{quote(upstream_model, safe='')}:predictLongRunning"
        return httpx.Request("POST", join(base_url, path),
                             headers={"x-goog-api-key": api_key}, json=body)

    def parse_submit(self, response: httpx.Response) -> str:
        body = read_json(response, _error_text, retry_unreadable=False, errors=ERRORS)
        name = body.get("name")
        if not isinstance(name, str) or not _OPERATION_NAME.fullmatch(name) or ".." in name.split("/"):
            raise UpstreamError(502, "upstream accepted the task without a usable operation name", retryable=False)
        return name

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        if not _OPERATION_NAME.fullmatch(upstream_task_id) or ".." in upstream_task_id.split("/"):
            raise ValueError(f"not a delta operation name: {upstream_task_id!r}")
        return httpx.Request("GET", join(base_url, f"/v1beta/{upstream_task_id}"), headers={"x-goog-api-key": api_key})

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot:
        body = read_json(response, _error_text, retry_unreadable=True, errors=ERRORS)
        raw = _elide_inline(body)
        if not body.get("done"):
            return self._snapshot("running", raw)
        error = body.get("error")
        if error:
            message = (error.get("message") if isinstance(error, dict) else None) or str(error)
            return self._snapshot("failed", raw, error=message)

        response_body = object_at(body, "response")
        urls: list[str] = []
        inline: list[InlineResult] = []
        for sample in _samples(response_body):
            video = sample.get("video", sample) if isinstance(sample, dict) else {}
            if not isinstance(video, dict):
                continue
            link = video.get("uri") or video.get("gcsUri")
            if isinstance(link, str) and link:
                urls.append(link)
            elif isinstance(video.get("bytesBase64Encoded"), str):
                try:
                    data = base64.b64decode(video["bytesBase64Encoded"], validate=False)
                except (binascii.Error, ValueError):
                    continue
                inline.append(InlineResult(video.get("mimeType") or "video/mp4", data))
        if urls or inline:
            return self._snapshot("succeeded", raw, urls=urls, inline=inline)
        # Done with nothing to show: the upstream's safety filter, or an empty answer.
        reasons = (response_body.get("generateVideoResponse") or {}).get("raiMediaFilteredReasons") \
            or response_body.get("raiMediaFilteredReasons")
        reason = "; ".join(map(str, reasons)) if isinstance(reasons, list) and reasons else None
        return self._snapshot("failed", raw, error=f"filtered by the upstream: {reason}" if reason
                              else "the upstream finished without a video")

    @staticmethod
    def _snapshot(word: str, raw: dict, *, urls: list[str] | None = None, inline: list[InlineResult] | None = None,
                  error: str | None = None) -> TaskSnapshot:
        status = unified(STATUSES, word)
        return TaskSnapshot(status=status, upstream_status=word, progress=100 if status == "succeeded" else None,
                            result_urls=urls or [], error=error, duration=None, raw=raw,
                            inline_results=inline or [])


#: The model a bare operation id (the health probe's) is fetched under.
PROBE_MODEL = "veo-3.0-generate-001"
# A Vertex AI operation's name: projects/P/locations/L/publishers/google/models/M/operations/ID.
_VERTEX_OPERATION = re.compile(r"projects/[^/]+/locations/[^/]+/publishers/google/models/([^/]+)/operations/[^/]+")


class VertexDeltaAdapter(DeltaAdapter):
    """Delta on Vertex AI (`upstreams/vertex.py`): `:predictLongRunning` under the project's
    publisher model, then `:fetchPredictOperation` with `{"operationName": name}` (a POST: Vertex
    has no GET of a publisher model's operation), with an OAuth access token from the channel's
    service account. Vertex answers the videos inline, `response.videos[].bytesBase64Encoded`
    (no `storageUri` is ever sent: the schema refuses it), which `parse_poll` already reads.
    Sources: Vertex AI "Veo video generation API" reference; new-api `relay/channel/task/vertex`."""

    def __init__(self, site: VertexSite):
        self.site = site

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens().token(api_key)}"}

    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request:
        body = {"instances": request["instances"], "parameters": request.get("parameters", {})}
        return httpx.Request("POST", join(base_url, self.site.model_path(upstream_model, "predictLongRunning")),
                             headers=self._headers(api_key), json=body)

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request:
        if "/" not in upstream_task_id and _OPERATION_NAME.fullmatch(upstream_task_id):
            # A bare id (the health probe's): an operation of this channel's own project.
            upstream_task_id = (f"{self.site.model_path(PROBE_MODEL, '').removeprefix('/v1/').removesuffix(':')}"
                                f"/operations/{upstream_task_id}")
        found = _VERTEX_OPERATION.fullmatch(upstream_task_id)
        if not found or not _OPERATION_NAME.fullmatch(upstream_task_id) or ".." in upstream_task_id.split("/"):
            raise ValueError(f"not a Vertex AI operation name: {upstream_task_id!r}")
        return httpx.Request("POST", join(base_url, self.site.model_path(found[1], "fetchPredictOperation")),
                             headers=self._headers(api_key), json={"operationName": upstream_task_id})
