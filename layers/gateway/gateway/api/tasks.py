"""The user's own asynchronous tasks, newest first, page by page (`GET /api/task/self`: the
console's Tasks page, new-api's shape as `/api/log/self`).

- Read through the tasks table's `by_owner` index (owner, created_at) newest first, so nobody
  ever sees another user's task; `family` narrows the query, `status` and the time window filter it.
- Page `p` reads the tasks before it; one read examines at most `MAX_EXAMINED` tasks (a page
  beyond is a 400 naming `p`; narrow the window with `end_timestamp` to reach further back).
- Each row's result links are those of the family's own public answer (`query_answer`, then
  `TaskFamily.answer_links`): beta's and imgtask's signed links are minted as their query routes
  mint them, and no stored upstream URL appears that the family's answer would not hand out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.admission.billing import REFUNDED, SETTLED
from gateway.api.requestlog import PagedQuery
from gateway.errors import InvalidRequest
from gateway.store.tasks import Task, TasksRepository
from gateway.tasks.adapter import UNIFIED
from gateway.tasks.engine import settled_units
from gateway.tasks.families import FAMILIES, family_of

MAX_EXAMINED = 1000


class TaskQuery(PagedQuery):
    """The parameters of one tasks request, each checked (a 400 names the parameter)."""

    def __init__(self, params: Mapping[str, Any] | None):
        super().__init__(params)
        self.family = _one_of(self.params, "family", FAMILIES)
        self.status = _one_of(self.params, "status", UNIFIED)
        self.offset = (self.page - 1) * self.page_size
        if self.offset + self.page_size > MAX_EXAMINED:
            raise InvalidRequest(f"p: pages reach back at most {MAX_EXAMINED} tasks (p x page_size); "
                                 "narrow the window with end_timestamp", param="p")

    def keeps(self, task: Task) -> bool:
        return self.status is None or task.status == self.status


def _one_of(params: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    if name not in params:
        return None
    value = str(params[name]).strip()
    if value not in allowed:
        raise InvalidRequest(f"{name}: must be one of {', '.join(allowed)} (got {value[:40]!r})", param=name)
    return value


def own_tasks(user_id: int, params: Mapping[str, Any] | None,
              tasks: TasksRepository | None = None) -> dict[str, Any]:
    """GET /api/task/self: one page of the caller's tasks, in the account envelope."""
    query = TaskQuery(params)
    tasks = tasks or TasksRepository()
    wanted = query.offset + query.page_size + 1  # one more tells whether another page follows
    matches: list[Task] = []
    examined, exhausted = 0, True
    for task in tasks.by_owner(user_id, family=query.family, at_most=query.end):
        if query.start is not None and task.created_at < query.start:
            break  # newest first: everything after this is older than the window
        if examined >= MAX_EXAMINED or len(matches) >= wanted:
            exhausted = False
            break
        examined += 1
        if query.keeps(task):
            matches.append(task)
    shown = matches[query.offset:query.offset + query.page_size]
    more = len(matches) > query.offset + query.page_size or not exhausted
    return {"success": True, "message": "", "data": {
        "items": [row(task) for task in shown], "page": query.page, "page_size": query.page_size,
        "has_more": more, "total": len(matches), "total_exact": exhausted,
    }}


def row(task: Task) -> dict[str, Any]:
    """One task as the tasks page shows it; status words and links from its family's answer."""
    public_status, links = task.status, list[str]()
    if task.family in FAMILIES:
        family = family_of(task.family)
        public_status = family.public_status(task)
        links = family.answer_links(family.query_answer(task)) if task.status == "succeeded" else []
    return {
        "task_id": task.task_id, "family": task.family, "model": task.model,
        "status": task.status, "public_status": public_status, "progress": task.progress,
        "created_at": task.created_at, "updated_at": task.updated_at, "completed_at": task.completed_at,
        "units_held": int(task.reservation.get("units", 0)),
        "units_charged": _charged(task), "billing": task.billing, "error": task.error,
        "result_links": links,
    }


def _charged(task: Task) -> int | None:
    """What the ledger settled (the family's price of what was delivered), 0 once refunded, None
    while nothing is settled yet (the hold is what the task may cost)."""
    if task.billing == REFUNDED:
        return 0
    if task.billing == SETTLED and task.family in FAMILIES:
        return family_of(task.family).units_charged_after_ratio(task, settled_units(task))
    return None
