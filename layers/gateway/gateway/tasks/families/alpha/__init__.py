"""The alpha family: five task operations on `/alpha/v1/...` (text2video, image2video, omni-video,
motion-control, omni-image) answered in the upstream's own envelope, and its text2video and
image2video models on the generic `POST /v1/video/generations` too.

A task keeps its `operation` (and the client's `external_task_id`) in `public`: the operation
names the upstream path it is polled at and the query route that shows it. Callbacks follow
every change of status, with the upstream's payload. Custom elements and voices: `customs.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

from gateway.errors import InvalidRequest, NotFound
from gateway.store.tasks import Task
from gateway.tasks.adapter import Sender, TaskSnapshot, poll
from gateway.tasks.engine import NewTask
from gateway.tasks.families.alpha.adapter import STATUSES, AlphaAdapter
from gateway.tasks.families.base import GENERIC_TASK_STATUS, TaskFamily, base_hold
from gateway.upstreams.errors import UpstreamError

#: The upstream's own words (the spec: "the complete value set"); a cancelled task did not succeed.
PUBLIC_STATUS: Mapping[str, str] = {
    "submitted": "submitted", "queued": "submitted", "in_progress": "processing",
    "succeeded": "succeed", "failed": "failed", "cancelled": "failed",
}
IMAGE_OPERATIONS = frozenset({"omni-image"})


class AlphaFamily(TaskFamily):
    name = "alpha"
    adapter = AlphaAdapter()
    statuses = STATUSES
    public_statuses = PUBLIC_STATUS
    callback_on_change = True  # the upstream posts every status change
    generic_route = True

    # --- requests ------------------------------------------------------------------------------

    def new_task(self, operation: str, data: Any, route: str, *, generic: bool = False) -> NewTask:
        """The task of an alpha submit body (`operation` one of the schema's `SUBMITS`)."""
        from gateway.tasks.families.alpha.schema import SUBMITS  # pydantic only where a body is parsed
        from gateway.validation import parse_model

        request = parse_model(SUBMITS[operation], data)
        public: dict[str, Any] = {"operation": operation}
        if request.external_task_id is not None:
            public["external_task_id"] = request.external_task_id
        if generic:
            public["generic"] = True
        return NewTask(family=self.name, model=request.model, route=route,
                       upstream_request={"operation": operation, "body": request.upstream_body()},
                       quantities=request.quantities().as_dict(), callback_url=request.callback_url,
                       duration=request.duration, public=public)

    def generic_task(self, data: dict[str, Any], route: str) -> NewTask:
        from gateway.tasks.families.alpha.schema import SUBMITS

        operation = "image2video" if "image" in data else "text2video"
        models = SUBMITS[operation].models
        if data.get("model") not in models:
            raise InvalidRequest(f"model: {data.get('model')!r} is not an alpha {operation} model; the generic route "
                                 f"takes {', '.join(models)} (the other alpha operations have their own "
                                 "routes under /alpha/v1)", param="model")
        return self.new_task(operation, data, route, generic=True)

    # --- the upstream --------------------------------------------------------------------------

    def poll_upstream(self, http: Sender, channel: Any,
                      tasks: Sequence[Task]) -> Sequence[TaskSnapshot | UpstreamError]:
        """Each task at its operation's own query path."""
        return [poll(http, self.adapter.for_operation(self.operation(task)), channel.base_url, channel.api_key,
                     task.upstream_task_id) for task in tasks]

    @staticmethod
    def operation(task: Task) -> str:
        return str(task.public.get("operation") or "text2video")

    def settlement_detail(self, task: Task) -> dict[str, Any]:
        noun = "images" if self.operation(task) in IMAGE_OPERATIONS else "videos"
        return {"operation": self.operation(task), noun: len(task.result_urls)}

    # --- answers -------------------------------------------------------------------------------

    def owned(self, principal: Any, task_id: str, operations: Sequence[str] | None = None) -> Task:
        """The caller's alpha task (of one of `operations`, when given); anything else is a 404."""
        from gateway.tasks import engine

        task = engine.owned_task(principal, task_id)
        if task.family != self.name or (operations is not None and self.operation(task) not in operations):
            raise NotFound(f"task '{task_id}' does not exist", param="task_id", code="task_not_found")
        return task

    def submit_answer(self, task: Task) -> dict[str, Any]:
        """The `data` of the submit envelope; on the generic route, the generic submit answer."""
        if task.public.get("generic"):
            return {"task_id": task.task_id, "task_status": GENERIC_TASK_STATUS[task.status], "message": ""}
        return {"task_id": task.task_id, "task_status": self.public_status(task), "task_info": self._info(task),
                "created_at": task.created_at * 1000, "updated_at": task.updated_at * 1000}

    def query_answer(self, task: Task) -> dict[str, Any]:
        """The `data` of the query envelope (and the body of a callback)."""
        status = self.public_status(task)
        if self.operation(task) in IMAGE_OPERATIONS:
            images = list(task.details.get("images") or [])
            result: dict[str, Any] = {"result_type": "single" if len(images) <= 1 else "series",
                                      "images": images, "series_images": []}
        else:
            result = {"videos": list(task.details.get("videos") or [])}
        message = task.error if status == "failed" else task.details.get("task_status_msg")
        return {"task_id": task.task_id, "task_status": status, "task_status_msg": message or "",
                "task_info": self._info(task), "task_result": result,
                "created_at": task.created_at * 1000, "updated_at": task.updated_at * 1000,
                "final_unit_deduction": str(self.units_charged(task))}

    def answer_links(self, answer: Mapping[str, Any]) -> list[str]:
        result = answer.get("task_result") or {}
        return [item["url"] for item in [*(result.get("images") or []), *(result.get("videos") or [])]
                if isinstance(item, dict) and isinstance(item.get("url"), str) and item["url"]]

    def units_to_settle(self, task: Task, price: Any) -> int:
        """The hold, less the share of the images an omni-image task did not deliver: from the
        task alone, so its answers and callbacks (the callback sender reads no price table) show
        exactly what the ledger settled."""
        held = base_hold(task)
        if self.operation(task) == "motion-control":
            return self._reported_seconds_share(task, held)
        samples = max(int(task.quantities.get("samples", 1)), 1)
        delivered = min(len(task.result_urls) or samples, samples)
        return -(-held * delivered // samples)  # rounded up, as every price is

    @staticmethod
    def _reported_seconds_share(task: Task, held: int) -> int:
        """A motion-control video lasts as long as its reference video: the hold covers the
        longest (`quantities.seconds`), the settlement the whole seconds the upstream reports
        (rounded up), as that share of the hold; the hold when it reports none."""
        longest = int(task.quantities.get("seconds") or 0)
        try:
            reported = Decimal(str(task.duration)) if task.duration else None
        except ArithmeticError:
            reported = None
        if not longest or reported is None or not reported.is_finite() or reported <= 0:
            return held
        seconds = min(int(reported.to_integral_value(rounding=ROUND_CEILING)), longest)
        return -(-held * seconds // longest)

    def units_charged(self, task: Task) -> int:
        """What the task costs the caller so far: the hold while it runs, the settlement once it
        succeeded, nothing once it failed (the hold is refunded)."""
        if task.status == "succeeded":
            return self.units_charged_after_ratio(task, self.units_to_settle(task, None))
        if task.status in ("failed", "cancelled"):
            return 0
        return int(task.reservation.get("units", 0))

    @staticmethod
    def _info(task: Task) -> dict[str, Any]:
        external = task.public.get("external_task_id")
        return {"external_task_id": external} if external else {}


FAMILY = AlphaFamily()
