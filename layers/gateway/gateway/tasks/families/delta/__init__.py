"""The delta family: long-running video operations, on `POST /v1/video/generations`.

The upstream's `generatedSamples[].video.uri` answers only with the channel's key (a client given
it gets 403; new-api's `controller/video_proxy.go` fetches it with `x-goog-api-key`), and the
upstream keeps a video two days. So it is never handed on: when the operation is done the poller
copies each video (a link's, or inline `bytesBase64Encoded`) into the results bucket
(`tasks/kept`), and the answer's `video_results` are the gateway's own signed links
(`result_path`), which redirect to the kept copy. With no bucket configured the link's route
relays the upstream's bytes itself (a buffered answer: about 4.6 MB at most).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.errors import NotFound, PayloadTooLarge, UpstreamFailed
from gateway.multipart import MAX_BINARY_ANSWER_BYTES
from gateway.routing.channel import Channel
from gateway.store.results import KeptResult, ResultsStore
from gateway.store.tasks import Task
from gateway.tasks import kept, links
from gateway.tasks.adapter import Sender, TaskAdapter, TaskSnapshot, poll
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import GENERIC_TASK_STATUS, Quantities, TaskFamily, generic_result
from gateway.tasks.families.delta.adapter import STATUSES, DeltaAdapter, VertexDeltaAdapter
from gateway.upstreams.errors import UpstreamError

#: A result the upstream gave inline: kept, with this in place of its link in the task record.
INLINE = "inline:"


def result_path(task_id: str, index: int) -> str:
    return f"/v1/video/results/{task_id}/{index}"


class DeltaFamily(TaskFamily):
    name = "delta"
    adapter = DeltaAdapter()
    statuses = STATUSES
    public_statuses = GENERIC_TASK_STATUS
    generic_route = True

    def adapter_for(self, channel: Channel) -> TaskAdapter:
        return VertexDeltaAdapter(channel.vertex) if channel.vertex is not None else self.adapter

    def generic_task(self, data: dict[str, Any], route: str) -> NewTask:
        from gateway.tasks.families.delta.schema import DeltaVideoRequest  # pydantic only where a body is parsed
        from gateway.validation import parse_model

        request = parse_model(DeltaVideoRequest, data)
        return NewTask(family=self.name, model=request.model, upstream_request=request.upstream_body(), route=route,
                       quantities=Quantities(seconds=request.billable_seconds,
                                             samples=request.sample_count).as_dict(),
                       duration=str(request.parameters.durationSeconds))

    # --- the upstream --------------------------------------------------------------------------

    def poll_upstream(self, http: Sender, channel, tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        snapshots: list[TaskSnapshot | UpstreamError] = []
        for task in tasks:
            try:
                snapshot = poll(http, self.adapter_for(channel), channel.base_url, channel.api_key,
                                task.upstream_task_id)
                if snapshot.status == "succeeded":
                    snapshot = self._keep(http, channel, task, snapshot)
                snapshots.append(snapshot)
            except UpstreamError as exc:
                snapshots.append(exc)
        return snapshots

    def _keep(self, http: Sender, channel, task: Task, snapshot: TaskSnapshot) -> TaskSnapshot:
        """Copies every video of a done operation into the results bucket, before the task is
        written succeeded; the task's `result_urls` stay the upstream's (never shown)."""
        if not ResultsStore().enabled:
            return snapshot
        urls = list(snapshot.result_urls)
        for index, url in enumerate(urls):
            answer = kept.fetch(http, url, channel, {"x-goog-api-key": channel.api_key})
            if answer is None:
                return TaskSnapshot(status="failed", upstream_status=snapshot.upstream_status, progress=None,
                                    result_urls=[], error="the upstream's video was no longer served when the "
                                    "gateway fetched it", duration=None, raw=snapshot.raw)
            media_type = kept.media_type_of(answer, "video/mp4")
            kept.put(self.name, task.task_id, index, KeptResult(answer.content, media_type))
        for inline in snapshot.inline_results:
            kept.put(self.name, task.task_id, len(urls), KeptResult(inline.data, inline.mime_type))
            urls.append(f"{INLINE}{len(urls)}")
        return TaskSnapshot(status=snapshot.status, upstream_status=snapshot.upstream_status,
                            progress=snapshot.progress, result_urls=urls, error=snapshot.error,
                            duration=snapshot.duration, raw=snapshot.raw)

    # --- answers -------------------------------------------------------------------------------

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return {"task_id": task.task_id, "task_status": self.public_status(task), "message": ""}

    def query_answer(self, task: Task) -> dict[str, Any]:
        return self.generic_answer(task)

    def generic_answer(self, task: Task) -> dict[str, Any]:
        """The generic result, its links the gateway's own (the upstream's need the channel's key)."""
        answer = generic_result(task)
        base_url = str(task.public.get("base_url") or "")
        own = [kept.link(base_url, result_path(task.task_id, index), task) for index in range(len(task.result_urls))] \
            if task.status == "succeeded" and base_url and links.configured() else []
        return {**answer, "video_result": own[0] if own else "", "video_results": own}

    # --- the link's route ----------------------------------------------------------------------

    def result(self, task_id: str, index: str, expires: str | None, signature: str | None) -> tuple[str, Any]:
        """What a signed link serves: ("redirect", a presigned S3 link) for a kept video, else
        ("bytes", (data, media type)) relayed from the upstream with the channel's key."""
        if not index.isdigit():
            raise NotFound(f"no video {index!r} for task '{task_id}'", code="result_not_found")
        position = int(index)
        task = kept.verified_task(result_path(task_id, position), task_id, expires, signature, self.name)
        if position >= len(task.result_urls):
            raise NotFound(f"task '{task_id}' has no video {position}", code="result_not_found")
        if ResultsStore().enabled:
            return "redirect", kept.presigned(self.name, task_id, position, "video")
        from gateway.routing.outbound import sync_client
        from gateway.tasks import engine

        url = task.result_urls[position]
        try:
            channel = engine.channel_named(task.channel)
            answer = kept.fetch(sync_client, url, channel, {"x-goog-api-key": channel.api_key})
        except UpstreamError as exc:
            raise UpstreamFailed(exc.message) from None
        if answer is None:
            raise kept.Gone(f"the video of task '{task_id}' is gone: the upstream keeps a video two days, and "
                            "this gateway has no results bucket to keep it in")
        if len(answer.content) > MAX_BINARY_ANSWER_BYTES:
            raise PayloadTooLarge(f"the video is {len(answer.content)} bytes, more than the {MAX_BINARY_ANSWER_BYTES} "
                                  "bytes a Lambda response can carry (configure the results bucket)",
                                  code="content_too_large", status=502)
        return "bytes", (answer.content, kept.media_type_of(answer, "video/mp4"))


FAMILY = DeltaFamily()
