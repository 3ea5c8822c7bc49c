"""The gamma family: video synthesis tasks on `/gamma/api/v1/...`, answered in the upstream's
own shape (`{request_id, output: {task_id, task_status, ...}, usage}`), so a client of the
upstream works by changing its base URL and key.

A task the caller does not own (or that does not exist) answers as the upstream answers an id
it does not know: HTTP 200 with `task_status: UNKNOWN`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gateway.auth import Principal
from gateway.errors import NotFound
from gateway.prices import Price, unit_cost
from gateway.store.tasks import Task
from gateway.tasks import engine
from gateway.tasks.engine import NewTask
from gateway.tasks.families.base import Quantities, TaskFamily
from gateway.tasks.families.gamma.adapter import STATUSES, GammaAdapter
from gateway.tasks.families.gamma.prices import RESOLUTION_FACTORS, reported_tier

SUBMIT_ROUTE = "/gamma/api/v1/services/aigc/video-generation/video-synthesis"

#: The upstream's words for the gateway's states.
PUBLIC_STATUS: Mapping[str, str] = {
    "submitted": "PENDING", "queued": "PENDING", "in_progress": "RUNNING",
    "succeeded": "SUCCEEDED", "failed": "FAILED", "cancelled": "CANCELED",
}


def _time(seconds: int | None) -> str | None:
    """The upstream's time format (`2025-01-02 03:04:05.000`), in UTC."""
    if not seconds:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + ".000"


class GammaFamily(TaskFamily):
    name = "gamma"
    adapter = GammaAdapter()
    statuses = STATUSES
    public_statuses = PUBLIC_STATUS

    def new_task_id(self) -> str:
        return str(uuid.uuid4())  # the upstream's own id format

    def owns_model(self, model: Any) -> bool:
        return isinstance(model, str) and model.startswith(self.name)

    def create_task(self, data: Any) -> NewTask:
        """The task of a submit body (a 400 naming the field for a broken one)."""
        from gateway.tasks.families.gamma.schema import GammaRequest  # pydantic only where a body is parsed
        from gateway.validation import parse_model

        request = parse_model(GammaRequest, data)
        return NewTask(family=self.name, model=request.model, upstream_request=request.upstream_request(),
                       route=SUBMIT_ROUTE, duration=str(request.duration),
                       quantities=Quantities(seconds=request.duration, multiplier=str(request.multiplier)).as_dict(),
                       public={"resolution": request.resolution})

    def units_to_settle(self, task: Task, price: Price | None) -> int:
        """The seconds and resolution the upstream reports in `usage` (`prices.py`), at the
        model's price; never above the hold (the hold when it reports neither)."""
        held = int(task.reservation["units"])
        usage = task.details.get("usage") or {}
        seconds = usage.get("video_duration", usage.get("duration"))
        count = usage.get("video_count", 1)
        if price is None or isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            return held
        tier = reported_tier(usage) or str(task.public.get("resolution") or "")
        factor = RESOLUTION_FACTORS.get(tier)
        count = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
        if factor is None:
            return held
        return min(unit_cost(price, seconds=Decimal(str(seconds)) * factor * count), held)

    def settlement_detail(self, task: Task) -> dict[str, Any]:
        return {**super().settlement_detail(task), **{k: v for k, v in (task.details.get("usage") or {}).items()
                                                     if k in ("video_duration", "duration", "SR", "video_ratio",
                                                              "size")}}

    def public_status(self, task: Task) -> str:
        # UNKNOWN stays UNKNOWN (the upstream lost the id); any other failure is FAILED.
        if task.status == "failed" and task.upstream_status == "UNKNOWN":
            return "UNKNOWN"
        return super().public_status(task)

    def submit_answer(self, task: Task) -> dict[str, Any]:
        return {"output": {"task_id": task.task_id, "task_status": "PENDING"}}

    def query_answer(self, task: Task) -> dict[str, Any]:
        details = task.details
        status = self.public_status(task)
        output: dict[str, Any] = {
            "task_id": task.task_id, "task_status": status, "submit_time": _time(task.created_at),
            "scheduled_time": details.get("scheduled_time"),
            "end_time": details.get("end_time") or _time(task.completed_at),
        }
        for name in ("orig_prompt", "actual_prompt"):
            if details.get(name):
                output[name] = details[name]
        if status == "SUCCEEDED":
            output["video_url"] = task.result_urls[0] if task.result_urls else None
        elif status in ("FAILED", "CANCELED", "UNKNOWN"):
            output["code"] = str(details.get("code") or ("TaskTimeout" if task.upstream_status == "timed_out"
                                                         else "InternalError.Task"))
            output["message"] = task.error or f"the task ended {status}"
        answer: dict[str, Any] = {"output": output}
        if status == "SUCCEEDED":
            answer["usage"] = {"video_duration": int(task.duration or 0), "video_count": 1}
        return answer

    def answer_links(self, answer: Mapping[str, Any]) -> list[str]:
        url = answer["output"].get("video_url")
        return [url] if isinstance(url, str) and url else []

    def query(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """The caller's task, or the upstream's answer for an id it does not know."""
        try:
            task = engine.owned_task(principal, task_id)
        except NotFound:
            task = None
        if task is None or task.family != self.name:
            return {"output": {"task_id": task_id, "task_status": "UNKNOWN"}}
        return self.query_answer(task)


FAMILY = GammaFamily()
