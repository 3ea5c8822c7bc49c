"""The beta family: image tasks on `/beta/v1/...`, answered in the upstream's own shape
(`{id, polling_url}`, then `{id, status, result, progress}`), so a client of the upstream works
by changing its base URL and key.

- The upstream names a polling URL of its own, possibly on another host: it is polled as given
  when it is one of BFL's own hosts (`adapter.documented_poll_url`) or the channel allows it
  (`Channel.allows_poll_url`: https and a host the channel lists); any other is never called, and
  the task is polled at the channel's own `/v1/get_result?id=` instead (BFL charged at submit).
- Priced by megapixels as BFL bills them (`prices.py`): held at the size asked, settled to the
  `output_mp` BFL reports.
- The upstream's `result.sample` expires in about ten minutes, so it is never handed on. When
  a task turns Ready the poller copies the image into the results bucket (`store/results`;
  a copy that fails is retried by the next poll while the upstream's link lives); the gateway's
  `result.sample` is a signed link to its own sample route (`tasks/links`), which serves the kept
  copy by a redirect to a presigned S3 link (`tasks/kept`: the image never passes through a
  Lambda answer). With no bucket configured it relays the upstream's bytes while the upstream still has
  them (asking it for a fresh link if the stored one has expired), and answers 410 after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from gateway.errors import NotFound, PayloadTooLarge, UpstreamFailed
from gateway.multipart import MAX_BINARY_ANSWER_BYTES
from gateway.observability import logger
from gateway.prices import Price
from gateway.routing.outbound import sync_client
from gateway.store.results import KeptResult, ResultsStore
from gateway.store.tasks import Task
from gateway.tasks import engine, kept, links
from gateway.tasks.adapter import Accepted, Sender, TaskSnapshot, send
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import Quantities, TaskFamily
from gateway.tasks.families.beta.adapter import (
    MODERATED,
    STATUSES,
    BetaAdapter,
    billed_megapixels,
    documented_poll_url,
)
from gateway.tasks.families.beta.prices import megapixel_cost, megapixels
from gateway.upstreams.errors import UpstreamError

PUBLIC_STATUS: Mapping[str, str] = {
    "submitted": "Pending", "queued": "Pending", "in_progress": "Pending",
    "succeeded": "Ready", "failed": "Error", "cancelled": "Error",
}
NOT_FOUND = "Task not found"
SUBMIT_ROUTE = "/beta/v1/{model}"
MEDIA_TYPES = {"jpeg": "image/jpeg", "png": "image/png"}


Gone = kept.Gone


def result_path(task_id: str) -> str:
    return f"/beta/v1/get_result/{task_id}"


def sample_path(task_id: str) -> str:
    return f"/beta/v1/results/{task_id}/sample"


class BetaFamily(TaskFamily):
    name = "beta"
    adapter = BetaAdapter()
    statuses = STATUSES
    public_statuses = PUBLIC_STATUS
    result_noun = "images"

    def create_task(self, data: Any, public_base_url: str) -> NewTask:
        """The task of a submit body (a 400 naming the field for a broken one). The gateway's
        public base URL is kept with it: its polling URL and sample links are built on it."""
        from gateway.tasks.families.beta.schema import BetaRequest  # pydantic only where a body is parsed
        from gateway.validation import parse_model

        request = parse_model(BetaRequest, data)
        return NewTask(family=self.name, model=request.model, upstream_request=request.upstream_request(),
                       route=SUBMIT_ROUTE.format(model=request.model),
                       quantities={**Quantities(images=1).as_dict(),
                                   "megapixels": megapixels(request.width, request.height)},
                       callback_url=request.webhook_url, callback_field="webhook_url",
                       public={"base_url": public_base_url.rstrip("/"), "output_format": request.output_format,
                               "width": request.width, "height": request.height})

    # --- money: BFL's megapixels (`prices.py`) ---------------------------------------------------

    def units_to_hold(self, request: NewTask, price: Price) -> int:
        return megapixel_cost(price, int(request.quantities.get("megapixels", 1)))

    def units_to_settle(self, task: Task, price: Price | None) -> int:
        """The megapixels BFL reported charging at submit, at the model's price; never above the hold."""
        held = int(task.reservation["units"])
        reported = billed_megapixels((task.details.get("charged") or {}).get("output_mp"))
        if price is None or reported is None:
            return held
        return min(megapixel_cost(price, reported), held)

    # --- the upstream --------------------------------------------------------------------------

    def submit_upstream(self, http: Sender, channel, upstream_model: str, request: NewTask) -> Accepted:
        response = send(http, self.adapter.build_submit(channel.base_url, channel.api_key, upstream_model,
                                                        request.upstream_request), repeatable=False)
        return self.adapter.parse_accepted(response)

    def poll_upstream(self, http: Sender, channel,
                      tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        snapshots: list[TaskSnapshot | UpstreamError] = []
        for task in tasks:
            try:
                snapshot = self._ask(http, channel, task)
                if snapshot.status == "succeeded":
                    snapshot = self._keep(http, task, snapshot)
                snapshots.append(snapshot)
            except UpstreamError as exc:
                snapshots.append(exc)
        return snapshots

    def _ask(self, http: Sender, channel, task: Task) -> TaskSnapshot:
        """One poll: at the upstream's own polling URL when it is one of BFL's hosts or the
        channel allows it; otherwise at the channel's own `/v1/get_result?id=`. The key never
        goes to a host nobody vouched for, and the task (paid upstream at submit) is not thrown
        away for it: it is asked for where the channel's key belongs."""
        url = task.poll_url
        if url and not (documented_poll_url(channel.base_url, url) or channel.allows_poll_url(url)):
            logger.error("the upstream named a polling URL on a host the channel does not allow; polling the "
                         "channel's own base URL instead (list the host in poll_hosts if it is the upstream's)",
                         extra={"task_id": task.task_id, "channel": channel.name,
                                "poll_host": urlsplit(url).hostname if "://" in url else None})
            url = None
        request = (self.adapter.build_poll_url(url, channel.api_key) if url
                   else self.adapter.build_poll(channel.base_url, channel.api_key, task.upstream_task_id))
        return self.adapter.parse_poll(send(http, request, repeatable=True))

    def _keep(self, http: Sender, task: Task, snapshot: TaskSnapshot) -> TaskSnapshot:
        """Copies a Ready task's image into the results bucket before the task is written Ready.
        A copy that fails for now is retried by the next poll; an image the upstream no longer
        serves is a failed task (refunded): nobody could ever download it."""
        store = ResultsStore()
        if not store.enabled:
            return snapshot
        try:
            answer = self._fetch(http, snapshot.result_urls[0])
        except UpstreamFailed as exc:
            raise UpstreamError(502, exc.message, retryable=True) from None
        if answer is None:
            return TaskSnapshot(status="failed", upstream_status=snapshot.upstream_status, progress=None,
                                result_urls=[], error="the upstream's image had expired before the gateway "
                                "could fetch it", duration=None, raw=snapshot.raw)
        store.put(store.key(self.name, task.task_id), KeptResult(answer.content, self._media_type(task, answer)))
        return snapshot

    # --- answers -------------------------------------------------------------------------------

    def public_status(self, task: Task) -> str:
        if task.status == "failed" and task.upstream_status in MODERATED:
            return str(task.upstream_status)
        return super().public_status(task)

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return {"id": task.task_id, "polling_url": task.public["base_url"] + result_path(task.task_id)}

    def query_answer(self, task: Task) -> dict[str, Any]:
        status = self.public_status(task)
        answer: dict[str, Any] = {"id": task.task_id, "status": status, "result": None,
                                  "progress": round(task.progress / 100, 2) if status == "Pending" else None}
        if status == "Ready":
            answer["result"] = {**task.details.get("result", {}),
                                "sample": links.sign(task.public["base_url"], sample_path(task.task_id))}
        elif task.status in ("failed", "cancelled"):
            answer["details"] = {**task.details.get("details", {}), "error": task.error or status}
        return answer

    def answer_links(self, answer: Mapping[str, Any]) -> list[str]:
        sample = (answer.get("result") or {}).get("sample")
        return [sample] if isinstance(sample, str) and sample else []

    def not_found(self, task_id: str) -> dict[str, Any]:
        return {"id": task_id, "status": NOT_FOUND, "result": None, "progress": None}

    def query(self, principal, task_id: str) -> dict[str, Any]:
        """The caller's task; `Task not found` for an unknown id or another user's task."""
        try:
            task = engine.owned_task(principal, task_id)
        except NotFound:
            return self.not_found(task_id)
        return self.not_found(task_id) if task.family != self.name else self.query_answer(task)

    # --- the sample ----------------------------------------------------------------------------

    def sample(self, task_id: str, expires: str | None, signature: str | None) -> tuple[str, Any]:
        """The image of a Ready task, for whoever holds a link signed by the gateway:
        ("redirect", a presigned S3 link) to the kept copy, else ("bytes", (data, media type))."""
        links.verify(sample_path(task_id), expires, signature)
        task = engine.tasks().get(task_id)
        if task is None or task.family != self.name or task.status != "succeeded" or not task.result_urls:
            raise NotFound(f"no image for task '{task_id}'", code="result_not_found")
        store = ResultsStore()
        if store.enabled:
            return "redirect", kept.presigned(self.name, task_id, 0, "image")
        http = sync_client
        answer = self._fetch(http, task.result_urls[0])
        if answer is None:
            # The upstream's link expired: a result it still keeps comes with a fresh one.
            try:
                fresh = self._ask(http, engine.channel_named(task.channel), task)
            except UpstreamError:
                fresh = None
            if fresh is not None and fresh.result_urls and fresh.result_urls[0] != task.result_urls[0]:
                answer = self._fetch(http, fresh.result_urls[0])
        if answer is None:
            raise Gone(f"the image of task '{task_id}' is gone: the upstream keeps a result about ten minutes "
                       "after it is Ready, and this gateway has no results bucket to keep it in")
        return "bytes", self._servable(KeptResult(answer.content, self._media_type(task, answer)))

    @staticmethod
    def _servable(result: KeptResult) -> tuple[bytes, str]:
        if len(result.data) > MAX_BINARY_ANSWER_BYTES:
            raise PayloadTooLarge(f"the image is {len(result.data)} bytes, more than the {MAX_BINARY_ANSWER_BYTES} "
                                  "bytes a Lambda response can carry", code="content_too_large", status=502)
        return result.data, result.media_type

    @staticmethod
    def _media_type(task: Task, answer: httpx.Response) -> str:
        media_type = answer.headers.get("content-type", "").split(";")[0].strip()
        return media_type if media_type.startswith("image/") else \
            MEDIA_TYPES.get(str(task.public.get("output_format")), "image/jpeg")

    @staticmethod
    def _fetch(http: Sender, url: str) -> httpx.Response | None:
        """The upstream's signed link, fetched without our key (it carries its own signature);
        None once it no longer serves."""
        try:
            answer = http.send(httpx.Request("GET", url))
        except httpx.HTTPError as exc:
            raise UpstreamFailed(f"fetching the image from the upstream failed: {type(exc).__name__}") from None
        if answer.status_code in (401, 403, 404, 410):
            return None
        if not answer.is_success:
            raise UpstreamFailed(f"the upstream answered {answer.status_code} for the image")
        return answer


FAMILY = BetaFamily()
