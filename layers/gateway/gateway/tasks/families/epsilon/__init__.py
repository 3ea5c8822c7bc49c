"""The epsilon family: video objects on `POST /v1/videos`, whose bytes the gateway serves.

The video object carries no link, so a success has no result links; the upstream's content
endpoint answers only with the channel's key. When a video completes the poller copies its MP4
into the results bucket (`tasks/kept`; a copy that fails for now is retried by the next poll),
and `GET /videos/{id}/content` answers a redirect to a presigned S3 link of it: a video of any
size leaves without passing through a Lambda answer (6 MB; the openai SDK follows the redirect,
dropping its key for the other host). The thumbnail and spritesheet, small, are relayed from the
upstream with the channel's key, as is the video when no bucket is configured (about 4.6 MB at most).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from gateway.auth import Principal
from gateway.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, UpstreamFailed
from gateway.multipart import MAX_BINARY_ANSWER_BYTES
from gateway.routing.outbound import sync_client
from gateway.store.results import KeptResult, ResultsStore
from gateway.store.tasks import Task
from gateway.tasks import engine, kept
from gateway.tasks.adapter import Sender, TaskSnapshot, poll, timed
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import Quantities, TaskFamily
from gateway.tasks.families.epsilon.adapter import CONTENT_VARIANTS, STATUSES, EpsilonAdapter
from gateway.upstreams.errors import UpstreamError

#: Public words of the video object's `status`. It has no cancelled: a cancelled video never completed.
PUBLIC_STATUS: Mapping[str, str] = {
    "submitted": "queued", "queued": "queued", "in_progress": "in_progress",
    "succeeded": "completed", "failed": "failed", "cancelled": "failed",
}
# Within API Gateway's 29 s, with time left to answer.
CONTENT_TIMEOUT = httpx.Timeout(25.0, connect=3.0)


class EpsilonFamily(TaskFamily):
    name = "epsilon"
    adapter = EpsilonAdapter()
    statuses = STATUSES
    public_statuses = PUBLIC_STATUS
    id_prefix = "video_"
    result_links = False
    submit_route = "POST /v1/videos"

    def create_task(self, data: Any, route: str) -> NewTask:
        """The task of a `POST /v1/videos` body."""
        from gateway.tasks.families.epsilon.schema import EpsilonVideoRequest  # pydantic only where a body is parsed
        from gateway.validation import parse_model

        request = parse_model(EpsilonVideoRequest, data)
        return NewTask(family=self.name, model=request.model, upstream_request=request.upstream_body(), route=route,
                       quantities=Quantities(seconds=request.billable_seconds).as_dict(), duration=request.seconds,
                       public={"seconds": request.seconds, "size": request.size})

    # --- the upstream --------------------------------------------------------------------------

    def poll_upstream(self, http: Sender, channel, tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        snapshots: list[TaskSnapshot | UpstreamError] = []
        for task in tasks:
            try:
                snapshot = poll(http, self.adapter, channel.base_url, channel.api_key, task.upstream_task_id)
                if snapshot.status == "succeeded":
                    snapshot = self._keep(http, channel, task, snapshot)
                snapshots.append(snapshot)
            except UpstreamError as exc:
                snapshots.append(exc)
        return snapshots

    def _keep(self, http: Sender, channel, task: Task, snapshot: TaskSnapshot) -> TaskSnapshot:
        """Copies a completed video's MP4 into the results bucket before the task is written succeeded."""
        if not ResultsStore().enabled:
            return snapshot
        request = self.adapter.build_content(channel.base_url, channel.api_key, task.upstream_task_id, "video")
        answer = kept.fetch(http, str(request.url), channel, {"Authorization": f"Bearer {channel.api_key}"})
        if answer is None:
            return TaskSnapshot(status="failed", upstream_status=snapshot.upstream_status, progress=None,
                                result_urls=[], error="the upstream's video content was no longer served when "
                                "the gateway fetched it", duration=None, raw=snapshot.raw)
        kept.put(self.name, task.task_id, "video", KeptResult(answer.content, kept.media_type_of(answer, "video/mp4")))
        return snapshot

    # --- answers -------------------------------------------------------------------------------

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return self.query_answer(task)

    def query_answer(self, task: Task) -> dict[str, Any]:
        """The video object."""
        status = self.public_status(task)
        error = None
        if status == "failed":
            error = {"code": "video_generation_failed", "message": task.error or "the video failed"}
        return {
            "id": task.task_id, "object": "video", "created_at": task.created_at, "status": status,
            "completed_at": task.completed_at if status == "completed" and task.completed_at else None,
            "error": error, "expires_at": None, "model": task.model, "progress": task.progress,
            "remixed_from_video_id": None, "seconds": str(task.public.get("seconds", task.duration or "")),
            "size": task.public.get("size", ""),
        }

    def owned_video(self, principal: Principal, video_id: str) -> Task:
        """The caller's video (anybody else's, or another family's task, is a 404)."""
        task = engine.owned_task(principal, video_id)
        if task.family != self.name:
            raise NotFound(f"video '{video_id}' does not exist", param="video_id", code="video_not_found")
        return task

    def content(self, principal: Principal, video_id: str, variant: str | None) -> tuple[str, Any]:
        """A completed video (or its thumbnail or spritesheet): ("redirect", a presigned S3 link)
        for a kept video, else ("bytes", (data, media type)) relayed from the upstream."""
        variant = variant or "video"
        if variant not in CONTENT_VARIANTS:
            raise InvalidRequest(f"variant: must be one of {', '.join(CONTENT_VARIANTS)}", param="variant")
        task = self.owned_video(principal, video_id)
        if task.status != "succeeded":
            status = self.public_status(task)
            raise Conflict(f"video '{task.task_id}' is {status}; its content exists once it is completed"
                           + (" (it failed, so it never will)" if status == "failed" else ""),
                           param="video_id", code="video_not_ready")
        if variant == "video" and ResultsStore().enabled:
            return "redirect", kept.presigned(self.name, task.task_id, "video", "video")
        try:
            channel = engine.channel_named(task.channel)
            answer = sync_client.send(timed(self.adapter.build_content(
                channel.base_url, channel.api_key, task.upstream_task_id, variant), CONTENT_TIMEOUT))
        except UpstreamError as exc:
            raise UpstreamFailed(exc.message) from None
        except httpx.HTTPError as exc:
            raise UpstreamFailed(f"the upstream content request failed: {type(exc).__name__}") from None
        if answer.status_code == 404:
            raise NotFound(f"the upstream no longer has the {variant} of video '{task.task_id}'",
                           code="content_not_found")
        if not answer.is_success:
            raise UpstreamFailed(f"the upstream answered {answer.status_code} for the video content")
        if len(answer.content) > MAX_BINARY_ANSWER_BYTES:
            raise PayloadTooLarge(f"the {variant} is {len(answer.content)} bytes, more than the "
                                  f"{MAX_BINARY_ANSWER_BYTES} bytes a Lambda response can carry",
                                  code="content_too_large", status=502)
        media_type = answer.headers.get("content-type", "").split(";")[0].strip() or CONTENT_VARIANTS[variant]
        return "bytes", (answer.content, media_type)


FAMILY = EpsilonFamily()
