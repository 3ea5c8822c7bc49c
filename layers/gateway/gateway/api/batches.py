"""The Batch API (`/v1/batches`) in OpenAI's shapes (openai-python `types/batch.py`,
`batch_create_params.py`, `batch_list_params.py`; openapi `ListBatchesResponse`).

`POST /v1/batches` checks the request, finds the caller's input file (its summary kept at upload)
and submits the batch through the task engine (`tasks/families/batch`): the hold is taken there,
against the key's allowlist, quota and budget, and counts as one request against its rpm.
`GET` (one, or a page) reads the task store only. `POST .../cancel` marks the batch cancelling
and wakes its poll, which sends the upstream's cancel and, once it ends, collects the lines that
completed (billed) and those cancelled (not).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from gateway.api import files
from gateway.auth import Principal
from gateway.errors import Conflict, InvalidRequest, NotFound, shown
from gateway.observability import logger
from gateway.store.tasks import Task
from gateway.tasks import engine, queue
from gateway.tasks.adapter import TERMINAL
from gateway.tasks.engine import NewTask
from gateway.tasks.families.batch import FAMILY
from gateway.tasks.families.batch.lines import FileSummary
from gateway.validation import integer_param, parse_model

ROUTE = "/v1/batches"


def create(principal: Principal, body: Any) -> dict[str, Any]:
    """POST /v1/batches."""
    from gateway.schemas.batches import BatchCreate  # pydantic only where a body is parsed

    request = parse_model(BatchCreate, body)
    file_id, endpoint = request.input_file_id, request.endpoint
    try:
        stored = files.ready(principal, file_id, param="input_file_id")
    except NotFound:
        raise NotFound(files.not_found(file_id).message, param="input_file_id", code="file_not_found") from None
    if stored.purpose != "batch" or not stored.summary:
        raise InvalidRequest(f"input_file_id: file '{file_id}' was not uploaded with purpose batch",
                             param="input_file_id")
    summary = FileSummary.of(stored.summary)
    if summary.url != endpoint:
        raise InvalidRequest(f"endpoint: the file's requests are for {summary.url}, not {endpoint}",
                             param="endpoint", code="invalid_url")
    task = engine.submit(principal, NewTask(
        family=FAMILY.name, model=summary.model, route=ROUTE, quantities=summary.as_dict(),
        upstream_request={"owner_id": str(principal.user_id), "file_id": file_id, "endpoint": endpoint},
        public={"endpoint": endpoint, "input_file_id": file_id, "metadata": request.metadata}))
    return FAMILY.query_answer(task)


def owned(principal: Principal, batch_id: str) -> Task:
    task = None
    if isinstance(batch_id, str) and batch_id.startswith(FAMILY.id_prefix):
        try:
            task = engine.owned_task(principal, batch_id)
        except NotFound:
            task = None
    if task is None or task.family != FAMILY.name:
        raise NotFound(f"No such Batch object: {shown(batch_id)}", param="batch_id", code="batch_not_found")
    return task


def retrieve(principal: Principal, batch_id: str) -> dict[str, Any]:
    return FAMILY.query_answer(owned(principal, batch_id))


def listing(principal: Principal, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """GET /v1/batches: newest first, `limit` 1..100 (20), `after` the last id of the page before."""
    params = params or {}
    limit = integer_param(params, "limit", 20, 1, 100)
    after = params.get("after") or None
    edge = None
    if after is not None:
        edge = owned(principal, after).created_at
    data: list[dict[str, Any]] = []
    passed = after is None
    more = False
    for task in engine.tasks().by_owner(principal.user_id, family=FAMILY.name, at_most=edge):
        if not passed:
            passed = task.task_id == after
            continue
        if len(data) == limit:
            more = True
            break
        data.append(FAMILY.query_answer(task))
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": more}


def cancel(principal: Principal, batch_id: str) -> dict[str, Any]:
    """POST /v1/batches/{id}/cancel: `cancelling` until its poll sees the upstream end."""
    for _ in range(5):
        task = owned(principal, batch_id)
        if task.status in TERMINAL or task.details.get("cancel_requested"):
            if task.status == "succeeded":
                raise Conflict(f"batch '{batch_id}' has completed and cannot be cancelled", param="batch_id",
                               code="batch_completed")
            return FAMILY.query_answer(task)
        updated = engine.tasks().update(task, {"details": {**task.details, "cancel_requested": True,
                                                           "batch_status": "cancelling",
                                                           "cancelling_at": int(time.time())}})
        if updated is not None:
            try:
                queue.send_poll(updated.task_id, 0)
            except Exception:  # its poll already waits in the queue; the sweeper enqueues one if not
                logger.exception("the cancel's poll was not enqueued", extra={"task_id": updated.task_id})
            return FAMILY.query_answer(updated)
    raise Conflict(f"batch '{batch_id}' kept changing; try again", param="batch_id", code="batch_busy")
