"""The delta family: long-running video operations, on `POST /v1/video/generations`."""

from __future__ import annotations

from typing import Any

from gateway.routing.channels import Channel
from gateway.store.tasks import Task
from gateway.tasks.adapter import TaskAdapter
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import GENERIC_TASK_STATUS, Quantities, TaskFamily, generic_result
from gateway.tasks.families.delta.adapter import STATUSES, DeltaAdapter, VertexDeltaAdapter


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

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return {"task_id": task.task_id, "task_status": self.public_status(task), "message": ""}

    def query_answer(self, task: Task) -> dict[str, Any]:
        return generic_result(task)


FAMILY = DeltaFamily()
