"""The asynchronous task engine every task family uses: submit, poll, finish, sweep.

- `submit`: the key may use the model, a channel serves it, the price is reserved (reservation
  id = task id), the upstream accepts the task (a refusal refunds at once and answers the
  error), the task is stored and its first poll is enqueued with a delay.
- `poll_once` (the poller, once per SQS message): asks the upstream, maps its status through the
  adapter's table, writes the task conditioned on its version, and re-enqueues the next poll
  with backoff while it runs.
- `finish`: a terminal task is first written (its outcome decided once, by whoever wins the
  versioned write), then settled or refunded (idempotent per reservation), then its callback
  enqueued, then closed (it leaves the open-task index). A crash anywhere in between leaves the
  task terminal but open, and the next poll message or the sweeper finishes it: exactly one
  settlement or refund, however many messages or crashes.
- `sweep` (the schedule): re-enqueues open tasks whose poll is overdue (a lost message must not
  lose a task), fails and refunds tasks older than the maximum age, finishes half-finished ones.

Queries read the task store only; nothing on a client's path calls the upstream but submit.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway import billing
from gateway.auth import Principal
from gateway.channels import Channel, get_catalog, report_success
from gateway.errors import NotFound
from gateway.observability import logger
from gateway.prices import unit_cost
from gateway.settings import get_settings
from gateway.store.tasks import TasksRepository, open_shard
from gateway.tasks import queue
from gateway.tasks.adapters import ADAPTERS, TERMINAL, TaskSnapshot, UpstreamRejected
from gateway.tasks.adapters import poll as poll_upstream
from gateway.tasks.adapters import submit as submit_upstream
from gateway.upstreams.verdict import exhausted_error, record_failure

SUBMITTED = "submitted"
# Submits and polls of a task are quick upstream calls (the work happens later, upstream).
POLL_TIMEOUT = httpx.Timeout(10.0, connect=3.0)

_http_lock = threading.Lock()
_http: httpx.Client | None = None


def http_client() -> httpx.Client:
    """One pooled client per execution environment (the adapters are synchronous)."""
    global _http
    with _http_lock:
        if _http is None or _http.is_closed:
            _http = httpx.Client(timeout=POLL_TIMEOUT, follow_redirects=False,
                                 limits=httpx.Limits(max_connections=32, max_keepalive_connections=16))
        return _http


def tasks() -> TasksRepository:
    return TasksRepository()


@dataclass
class NewTask:
    """A validated request of some family, in the terms the engine needs."""

    family: str  # the adapter's protocol: delta, zeta, epsilon
    model: str
    upstream_request: dict[str, Any]  # what the adapter relays
    billable_seconds: int  # seconds of video across every video asked for
    sample_count: int
    route: str
    id_prefix: str = "task_"
    callback_url: str | None = None
    duration: str | None = None  # seconds of one video, as a string
    public: dict[str, Any] = field(default_factory=dict)  # family fields the answers repeat (size, seconds)


def submit(principal: Principal, new: NewTask) -> dict[str, Any]:
    """Reserve, submit upstream, store, enqueue the first poll; the stored task."""
    principal.require_model(new.model)
    price, channels = get_catalog().serving(new.model, (new.family,))
    task_id = new.id_prefix + uuid.uuid4().hex
    reservation = billing.reserve(principal, unit_cost(price, seconds=new.billable_seconds), model=new.model,
                                  route=new.route, reservation_id=task_id, hold_seconds=billing.task_hold_seconds())
    try:
        channel, upstream_task_id = _first_accepting(channels, new)
        now = time.time()
        task = {
            "task_id": task_id, "owner_id": str(principal.user_id), "family": new.family, "model": new.model,
            "channel": channel.name, "upstream_task_id": upstream_task_id, "status": SUBMITTED,
            "upstream_status": None, "progress": 0, "result_urls": [], "error": None, "duration": new.duration,
            "billable_seconds": new.billable_seconds, "sample_count": new.sample_count,
            "reservation": dataclasses.asdict(reservation), "callback_url": new.callback_url,
            "public": new.public or None, "created_at": int(now), "updated_at": int(now), "polls": 0,
            "open_shard": open_shard(task_id), "next_poll_at": int(now + get_settings().task_poll_seconds),
        }
        tasks().put(task)
    except BaseException as exc:
        billing.refund(reservation, reason=getattr(exc, "message", type(exc).__name__)[:200])
        raise
    try:
        queue.send_poll(task_id, get_settings().task_poll_seconds)
    except Exception:
        # The task is stored with its next poll time: the sweeper enqueues it.
        logger.exception("first poll not enqueued; the sweeper will pick the task up", extra={"task_id": task_id})
    logger.info("task submitted", extra={"task_id": task_id, "family": new.family, "model": new.model,
                                         "channel": channel.name, "units": reservation.units})
    task["version"] = 1
    return task


def _first_accepting(channels: list[Channel], new: NewTask) -> tuple[Channel, str]:
    failures: list[UpstreamRejected] = []
    adapter = ADAPTERS[new.family]
    for channel in channels:
        try:
            upstream_task_id = submit_upstream(http_client(), adapter, channel.base_url, channel.api_key,
                                               channel.upstream_model(new.model), new.upstream_request)
        except UpstreamRejected as exc:
            record_failure(channel, exc, failures)
            continue
        report_success(channel)
        return channel, upstream_task_id
    raise exhausted_error(failures)


# ---------------------------------------------------------------------------------------------
# Polling
# ---------------------------------------------------------------------------------------------

def poll_delay(polls: int) -> float:
    """Seconds until the next poll: grows by half each time, up to the cap."""
    settings = get_settings()
    return min(settings.task_poll_seconds * (1.5 ** polls), settings.task_poll_max_seconds)


def poll_once(task_id: str, *, now: float | None = None) -> str:
    """One poll of one task; what happened ("running", "finished", "stale", "done", "missing").

    Raises when the task store or the queue fails, so the message comes back and is retried.
    """
    task = tasks().get(task_id)
    if task is None:
        logger.warning("poll for an unknown task", extra={"task_id": task_id})
        return "missing"
    if task["status"] in TERMINAL:
        if "open_shard" in task:  # written terminal, then interrupted before it was closed
            finish(task, now=now)
            return "finished"
        return "done"
    try:
        channel = channel_named(task["channel"])
        snapshot = poll_upstream(http_client(), ADAPTERS[task["family"]], channel.base_url, channel.api_key,
                                 task["upstream_task_id"])
    except UpstreamRejected as exc:
        if exc.retryable:
            logger.warning("upstream poll failed; retrying later", extra={"task_id": task_id, "error": exc.message})
            return _reschedule(task, now=now)
        snapshot = _failed(f"the upstream no longer answers for this task: {exc.message}", str(exc.status))
    return record(task, snapshot, now=now)


def channel_named(name: str) -> Channel:
    for channel in get_catalog().channels:
        if channel.name == name:
            return channel
    # Removed from the document while the task ran: retried, then failed by the sweeper's age limit.
    raise UpstreamRejected(503, f"channel {name!r} is no longer configured", retryable=True)


def _failed(message: str, word: str = "failed") -> TaskSnapshot:
    return TaskSnapshot(status="failed", upstream_status=word, progress=None, result_urls=[], error=message,
                        duration=None, raw={})


def _reschedule(task: dict[str, Any], changes: dict[str, Any] | None = None, *, now: float | None = None) -> str:
    """Writes `changes` with the next poll time, then enqueues that poll."""
    now = time.time() if now is None else now
    delay = poll_delay(int(task.get("polls", 0)))
    updated = tasks().update(task, {**(changes or {}), "next_poll_at": int(now + delay),
                                    "polls": int(task.get("polls", 0)) + 1})
    if updated is None:
        return "stale"  # another poller moved it first and enqueued its next poll
    queue.send_poll(task["task_id"], delay)
    return "running"


def record(task: dict[str, Any], snapshot: TaskSnapshot, *, now: float | None = None) -> str:
    """Writes what the upstream said; a terminal answer goes on to `finish`."""
    now = time.time() if now is None else now
    if snapshot.status == "succeeded" and not snapshot.result_urls and task["family"] != "epsilon":
        # Inline bytes (delta) would need an object store this gateway does not have. Epsilon
        # has no links by design: its bytes are relayed by the content endpoint.
        snapshot = _failed("the upstream returned the video inline; this gateway relays video links only"
                           if snapshot.inline_results else "the upstream finished without a video",
                           snapshot.upstream_status)
    changes: dict[str, Any] = {"status": snapshot.status, "upstream_status": snapshot.upstream_status,
                               "updated_at": int(now)}
    if snapshot.progress is not None:
        changes["progress"] = snapshot.progress
    if snapshot.duration:
        changes["duration"] = snapshot.duration
    if not snapshot.terminal:
        return _reschedule(task, changes, now=now)
    changes.update(result_urls=snapshot.result_urls, error=snapshot.error, completed_at=int(now),
                   next_poll_at=int(now))
    updated = tasks().update(task, changes)
    if updated is None:
        return "stale"
    finish(updated, now=now)
    return "finished"


def finish(task: dict[str, Any], *, now: float | None = None) -> None:
    """Settles or refunds a terminal task's reservation, enqueues its callback, closes it."""
    now = time.time() if now is None else now
    reservation = billing.Reservation(**task["reservation"])
    if task["status"] == "succeeded":
        units = settled_units(task)
        billing.settle(reservation, units, detail={"task_id": task["task_id"], "videos": len(task["result_urls"]),
                                                   "channel": task["channel"]})
        outcome = billing.SETTLED
    else:
        billing.refund(reservation, reason=(task.get("error") or task["status"])[:200],
                       error=task["status"] == "failed")
        outcome = billing.REFUNDED
    if task.get("callback_url"):
        queue.send_callback(task["task_id"])
    tasks().update(task, {"billing": outcome, "closed_at": int(now)}, remove=("open_shard",))
    logger.info("task finished", extra={"task_id": task["task_id"], "status": task["status"], "billing": outcome})


def settled_units(task: dict[str, Any]) -> int:
    """The price of what was delivered: fewer videos than asked cost proportionally less."""
    reservation = task["reservation"]
    samples = max(int(task.get("sample_count") or 1), 1)
    delivered = min(len(task.get("result_urls") or []) or samples, samples)
    if delivered == samples:
        return int(reservation["units"])
    price = get_catalog().prices.get(task["model"])
    seconds = int(task["billable_seconds"]) * delivered // samples
    return min(unit_cost(price, seconds=seconds), int(reservation["units"]))


# ---------------------------------------------------------------------------------------------
# Sweeping
# ---------------------------------------------------------------------------------------------

def sweep(*, now: float | None = None) -> dict[str, int]:
    """One pass over the overdue open tasks; how many were re-enqueued, timed out, finished."""
    settings = get_settings()
    now = time.time() if now is None else now
    counts = {"requeued": 0, "timed_out": 0, "finished": 0, "stale": 0}
    for task in tasks().overdue(now - settings.task_sweep_grace_seconds):
        try:
            if task["status"] in TERMINAL:
                finish(task, now=now)
                counts["finished"] += 1
            elif now - int(task["created_at"]) > settings.task_max_age_seconds:
                outcome = record(task, _failed(f"the task did not finish within {int(settings.task_max_age_seconds)} "
                                               "seconds", "timed_out"), now=now)
                counts["timed_out" if outcome == "finished" else "stale"] += 1
            elif tasks().update(task, {"next_poll_at": int(now + settings.task_sweep_grace_seconds)}) is None:
                counts["stale"] += 1  # the index copy was behind: the task moved meanwhile
            else:
                queue.send_poll(task["task_id"], 0)
                counts["requeued"] += 1
        except Exception:
            logger.exception("sweeping a task failed", extra={"task_id": task.get("task_id")})
    if any(counts.values()):
        logger.info("sweep", extra=counts)
    return counts


def owned_task(principal: Principal, task_id: str) -> dict[str, Any]:
    """A task of the caller's own account (another user's answers 404, as a missing one does)."""
    if not isinstance(task_id, str) or not task_id.strip():
        raise NotFound("task id is required", param="task_id", code="task_not_found")
    return tasks().get_owned(task_id.strip(), principal.user_id)
