"""The zeta family: content-generation video tasks, on `POST /v1/video/generations`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.prices import Price
from gateway.store.tasks import Task
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import Quantities, TaskFamily, generic_result
from gateway.tasks.families.zeta.adapter import STATUSES, ZetaAdapter
from gateway.tasks.families.zeta.prices import tokens_cost

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
                       quantities={**Quantities(seconds=request.billable_seconds,
                                                samples=request.sample_count).as_dict(),
                                   "tokens": request.worst_case_tokens},
                       callback_url=request.callback_url, duration=str(request.duration))

    # --- money: Ark's tokens (`prices.py`) -------------------------------------------------------

    def units_to_hold(self, request: NewTask, price: Price) -> int:
        if price.output_per_million is None:  # an operator's per-second price (prices: in the channels document)
            return super().units_to_hold(request, price)
        return tokens_cost(price, int(request.quantities["tokens"]))

    def units_to_settle(self, task: Task, price: Price | None) -> int:
        """The tokens Ark reports for the video, at the model's price; never above the hold."""
        held = int(task.reservation["units"])
        reported = task.details.get("completion_tokens")
        if price is None or price.output_per_million is None or not isinstance(reported, int):
            return super().units_to_settle(task, price)
        return min(tokens_cost(price, reported), held)

    def settlement_detail(self, task: Task) -> dict[str, Any]:
        detail = super().settlement_detail(task)
        if isinstance(task.details.get("completion_tokens"), int):
            detail["tokens"] = task.details["completion_tokens"]
        return detail

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return {"taskId": task.task_id, "status": self.public_status(task)}

    def query_answer(self, task: Task) -> dict[str, Any]:
        return generic_result(task)


FAMILY = ZetaFamily()
