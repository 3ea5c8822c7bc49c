"""The zeta family: content-generation video tasks, on `POST /v1/video/generations`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.store.tasks import Task
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import Quantities, TaskFamily, generic_result
from gateway.tasks.families.zeta.adapter import STATUSES, ZetaAdapter

#: Public words of the zeta submit answer `{taskId, status}`: the upstream's own, which a zeta
#: client already knows (the generic result speaks the spec's `task_status` set).
PUBLIC_SUBMIT_STATUS: Mapping[str, str] = {
    "submitted": "queued", "queued": "queued", "in_progress": "running",
    "succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled",
}


class ZetaFamily(TaskFamily):
    name = "zeta"
    adapter = ZetaAdapter()
    statuses = STATUSES
    public_statuses = PUBLIC_SUBMIT_STATUS
    generic_route = True

    def generic_task(self, data: dict[str, Any], route: str) -> NewTask:
        from gateway.tasks.families.zeta.schema import ZetaVideoRequest  # pydantic only where a body is parsed
        from gateway.validation import parse_model

        request = parse_model(ZetaVideoRequest, data)
        return NewTask(family=self.name, model=request.model, upstream_request=request.upstream_body(), route=route,
                       quantities=Quantities(seconds=request.billable_seconds,
                                             samples=request.sample_count).as_dict(),
                       callback_url=request.callback_url, duration=str(request.duration))

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return {"taskId": task.task_id, "status": self.public_status(task)}

    def query_answer(self, task: Task) -> dict[str, Any]:
        return generic_result(task)


FAMILY = ZetaFamily()
