"""The asynchronous task engine every task family uses: submit, poll, finish, sweep.

- `submit`: the key may use the model, a channel serves it, the price is reserved (reservation
  id = task id), the upstream accepts the task (a refusal refunds at once and answers the
  error), the task is stored and its first poll is enqueued with a delay.
- `poll_many` (the poller, per batch of SQS messages) and `poll_once`: asks the upstream (once
  per task, or once per channel for a family that polls in batches), maps its status through
  the adapter's table, writes the task conditioned on its version, and re-enqueues the next
  poll with backoff while it runs (with a callback on each change, for a family that wants it).
- `finish`: a terminal task is first written (its outcome decided once, by whoever wins the
  versioned write), then settled or refunded (idempotent per reservation), then its callback
  enqueued, then closed (it leaves the open-task index). A crash anywhere in between leaves the
  task terminal but open, and the next poll message or the sweeper finishes it: exactly one
  settlement or refund, however many messages or crashes.
- `sweep` (the schedule): re-enqueues open tasks whose poll is overdue (a lost message must not
  lose a task), fails and refunds tasks older than the maximum age (unless their family collects
  what was done: `TaskFamily.timed_out`), finishes half-finished ones.

Queries read the task store only; nothing on a client's path calls the upstream but submit.
Everything a family decides (its prices, its upstream, its statuses, its answers) comes from its
`TaskFamily` (`gateway.tasks.families`), looked up by the task's `family`: no family is named here.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway import observability
from gateway.admission import billing
from gateway.auth import Principal
from gateway.errors import Conflict, InvalidRequest, NotFound, Unavailable
from gateway.observability import logger
from gateway.prices import Price
from gateway.routing import health
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.routing.failover import counts_against_channel, first_success, report_failure, report_success
from gateway.routing.outbound import sync_client
from gateway.settings import get_settings
from gateway.store.tasks import Task, TasksRepository, open_shard
from gateway.tasks import queue
from gateway.tasks.adapter import TERMINAL, UPSTREAM_TIMEOUT, TaskSnapshot
from gateway.tasks.callbacks import UnsafeCallback, check_url
from gateway.tasks.families import family_of
from gateway.upstreams.errors import UpstreamError, is_account

SUBMITTED = "submitted"
# What one poll may take: the upstream call's timeouts (`adapter.UPSTREAM_TIMEOUT`) and a few AWS calls.
POLL_SECONDS_NEEDED = 15.0


def tasks() -> TasksRepository:
    return TasksRepository()


@dataclass
class NewTask:
    """A validated request of some family, in the terms the engine needs."""

    family: str  # a name of the registry (`gateway.tasks.families`)
    model: str
    upstream_request: dict[str, Any]  # what the family's adapter relays
    route: str  # for the ledger
    #: What the price multiplies (`families.base.Quantities` as a dict).
    quantities: dict[str, Any] = field(default_factory=dict)
    callback_url: str | None = None
    callback_field: str = "callback_url"  # how the family's request names it, for a 400
    duration: str | None = None  # seconds of one video, as a string
    public: dict[str, Any] = field(default_factory=dict)  # family fields the answers repeat (size, seconds)
    parent_id: str | None = None  # the caller's task this one acts on
    #: The one channel it may go to (a follow-up acts on an upstream task that lives there).
    channel: str | None = None
    #: The task's id, set by `submit` before the upstream is asked (an upstream's idempotency token).
    task_id: str | None = None


#: A submit's upstream walk ends within this many seconds of its start (API Gateway's limit is 29 s,
#: init and the store writes need the rest); one attempt takes at most its connect and read timeouts.
SUBMIT_BUDGET_SECONDS = 22.0
SUBMIT_ATTEMPT_SECONDS = UPSTREAM_TIMEOUT.connect + UPSTREAM_TIMEOUT.read  # type: ignore[operator]


def submit(principal: Principal, new: NewTask, *, parked: Task | None = None) -> Task:
    """Reserve, submit upstream, store, enqueue the first poll; the stored task.

    `parked`: a task of `park` that waits for this request; it is claimed first (a second
    completion finds it claimed: 409). Nothing was held for it before. If the hold is refused it
    waits again (the client may top up and retry); if the upstream refuses, it ends failed,
    refunded, since its reservation id (the task id) is spent.
    """
    family = family_of(new.family)
    if new.callback_url is not None:
        try:
            check_url(new.callback_url, resolve=False)
        except UnsafeCallback as exc:
            raise InvalidRequest(f"{new.callback_field}: {exc}", param=new.callback_field) from None
    principal.require_model(new.model)
    price, channels = get_catalog().serving(new.model, family.protocols, group=principal.group)
    observability.set_model(new.model)  # a metric dimension only once the catalog knows the model
    channels = family.usable_channels(_pinned(channels, new), new)  # a 4xx here holds nothing
    claimed = _claim(parked) if parked is not None else None
    task_id = claimed.task_id if claimed is not None else family.new_task_id()
    try:
        reservation = billing.reserve(principal, family.units_to_hold(new, price), model=new.model,
                                      route=new.route, reservation_id=task_id,
                                      hold_seconds=billing.task_hold_seconds(family.max_age_seconds))
    except BaseException:
        _unclaim(claimed, parked)
        raise
    # API Gateway answers 504 at 29 s while the function goes on (and bills): a channel is tried
    # only while a whole attempt (connect + read timeout) still ends inside the submit's budget.
    deadline = time.monotonic() + SUBMIT_BUDGET_SECONDS
    new = dataclasses.replace(new, task_id=task_id)
    try:
        accepted, channel = first_success(
            channels, lambda channel: family.submit_upstream(sync_client, channel, channel.upstream_model(new.model),
                                                             new),
            can_try=lambda: deadline - time.monotonic() >= SUBMIT_ATTEMPT_SECONDS,
            no_attempt="no time was left to reach another upstream within the 29 s limit")
        now = time.time()
        fields: dict[str, Any] = dict(
            channel=channel.name, upstream_task_id=accepted.upstream_task_id, poll_url=accepted.poll_url,
            details={**(claimed.details if claimed else {}), **accepted.details},
            reservation=dataclasses.asdict(reservation), quantities=dict(new.quantities), price=price.fields(),
            duration=new.duration,
            callback_url=new.callback_url, public={**(claimed.public if claimed else {}), **new.public},
            updated_at=int(now), open_shard=open_shard(task_id),
            next_poll_at=int(now + get_settings().task_poll_seconds))
        task: Task | None
        if claimed is None:
            task = tasks().put(Task(task_id=task_id, owner_id=str(principal.user_id), family=new.family,
                                    model=new.model, parent_id=new.parent_id, created_at=int(now), **fields))
        else:
            task = tasks().update(claimed, {**fields, "model": new.model})
            if task is None:  # only this request holds the claim, so nothing else may move it
                raise Conflict(f"task '{task_id}' changed while it was being submitted", param="taskId")
    except BaseException as exc:
        reason = getattr(exc, "message", type(exc).__name__)[:200]
        billing.refund(reservation, reason=reason)
        if claimed is not None:
            # Its reservation id (the task id) is spent: the task ends failed rather than waiting again.
            _close_refused(claimed, reason)
        raise
    try:
        queue.send_poll(task_id, get_settings().task_poll_seconds)
    except Exception:
        # The task is stored with its next poll time: the sweeper enqueues it.
        logger.exception("first poll not enqueued; the sweeper will pick the task up", extra={"task_id": task_id})
    logger.info("task submitted", extra={"task_id": task_id, "family": new.family, "model": new.model,
                                         "channel": channel.name, "units": reservation.units})
    return task


def park(principal: Principal, new: NewTask, waiting_for: str) -> Task:
    """Stores a task that waits for more from its client (`waiting_for`, e.g. a modal's input):
    nothing is held or sent upstream, and nothing polls it. `submit(..., parked=task)` later
    holds, submits and opens it under the same id. The model must be usable already."""
    family = family_of(new.family)
    principal.require_model(new.model)
    get_catalog().serving(new.model, family.protocols, group=principal.group)
    now = int(time.time())
    return tasks().put(Task(
        task_id=family.new_task_id(), owner_id=str(principal.user_id), family=new.family, model=new.model,
        channel=new.channel or "", upstream_task_id="", reservation={}, quantities=dict(new.quantities),
        callback_url=new.callback_url, public=dict(new.public), parent_id=new.parent_id, created_at=now,
        updated_at=now, waiting_for=waiting_for))


def _claim(parked: Task) -> Task:
    if parked.waiting_for is None:
        raise Conflict(f"task '{parked.task_id}' was already submitted", param="taskId", code="task_submitted")
    claimed = tasks().update(parked, {}, remove=("waiting_for",))
    if claimed is None:
        raise Conflict(f"task '{parked.task_id}' is being submitted by another request", param="taskId",
                       code="task_submitted")
    return claimed


def _unclaim(claimed: Task | None, parked: Task | None) -> None:
    """Gives a claimed task back its waiting state (the claim's own version: nobody else moved it)."""
    if claimed is not None and parked is not None:
        try:
            tasks().update(claimed, {"waiting_for": parked.waiting_for})
        except Exception:
            logger.exception("a parked task could not be given back its waiting state",
                             extra={"task_id": claimed.task_id})


def _close_refused(claimed: Task, reason: str) -> None:
    now = int(time.time())
    try:
        tasks().update(claimed, {"status": "failed", "upstream_status": "refused", "error": reason,
                                 "updated_at": now, "completed_at": now, "billing": billing.REFUNDED,
                                 "closed_at": now})
    except Exception:
        logger.exception("a refused parked task could not be closed", extra={"task_id": claimed.task_id})


def _pinned(channels: list[Channel], new: NewTask) -> list[Channel]:
    """The channels a task may go to: only its pinned one, when it has one (cooling or not: the
    task this one acts on lives nowhere else; disabled by the operator, not at all)."""
    if new.channel is None:
        return channels
    pinned = get_catalog().named(new.channel)
    if pinned is None or not pinned.serves(new.model) or pinned.protocol not in family_of(new.family).protocols:
        raise Unavailable(f"channel {new.channel!r}, where the task this one acts on lives, does not serve "
                          f"{new.model!r} any more", code="channel_unavailable")
    if health.book().of(pinned.name).state == health.DISABLED:
        raise Unavailable(f"channel {new.channel!r}, where the task this one acts on lives, is disabled by the "
                          "operator", code="channel_unavailable")
    return [pinned]


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
    outcome = poll_many([task_id], now=now)[task_id]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def poll_many(task_ids: Sequence[str], *, now: float | None = None,
              time_left: Callable[[], float] | None = None) -> dict[str, str | BaseException]:
    """Polls several tasks (a batch of poll messages); each id's outcome, as `poll_once` says
    it, or the exception that must bring its message back.

    A family that `polls_in_batches` is asked once per channel for all its tasks of the batch;
    any other, once per task. `time_left` (seconds) is checked before each upstream call: a call
    there is no time left for fails its tasks with `TimeoutError`, and their messages come back.
    """
    def out_of_time() -> bool:
        return time_left is not None and time_left() < POLL_SECONDS_NEEDED

    if out_of_time():
        return {task_id: TimeoutError("no time left for this poll; the message comes back") for task_id in task_ids}
    outcomes: dict[str, str | BaseException] = {}
    groups: dict[tuple[str, ...], list[Task]] = {}
    for task_id in dict.fromkeys(task_ids):  # a message delivered twice in one batch is polled once
        try:
            task = tasks().get(task_id)
            if task is None:
                logger.warning("poll for an unknown task", extra={"task_id": task_id})
                outcomes[task_id] = "missing"
            elif task.status in TERMINAL:
                outcomes[task_id] = "done"
                if task.open_shard is not None:  # written terminal, then interrupted before it was closed
                    finish(task, now=now)
                    outcomes[task_id] = "finished"
            else:
                batched = family_of(task.family).polls_in_batches
                groups.setdefault((task.family, task.channel) if batched else (task_id,), []).append(task)
        except Exception as exc:
            outcomes[task_id] = exc
    for group in groups.values():
        if out_of_time():
            outcomes.update({task.task_id: TimeoutError("no time left for this poll; the message comes back")
                             for task in group})
            continue
        outcomes.update(_poll_group(group, now=now))
    return outcomes


def _poll_group(group: list[Task], *, now: float | None) -> dict[str, str | BaseException]:
    """Asks the upstream about tasks of one family and channel at once, and records each answer."""
    outcomes: dict[str, str | BaseException] = {}
    snapshots: list[TaskSnapshot | UpstreamError]
    try:
        channel = channel_named(group[0].channel)
        snapshots = list(family_of(group[0].family).poll_upstream(sync_client, channel, group))
        if len(snapshots) != len(group):
            raise UpstreamError(502, f"the family answered {len(snapshots)} snapshots for {len(group)} tasks",
                                retryable=True)
    except UpstreamError as exc:
        snapshots = [exc] * len(group)
    except Exception as exc:
        return {task.task_id: exc for task in group}
    _note_health(group[0].channel, snapshots)
    for task, snapshot in zip(group, snapshots, strict=True):
        try:
            if isinstance(snapshot, UpstreamError):
                # Refused credentials say nothing about the task: it waits for the channel's key to be fixed.
                if snapshot.retryable or is_account(snapshot):
                    logger.warning("upstream poll failed; retrying later",
                                   extra={"task_id": task.task_id, "error": snapshot.message})
                    outcomes[task.task_id] = _reschedule(task, now=now)
                    continue
                snapshot = _failed(f"the upstream no longer answers for this task: {snapshot.message}",
                                   str(snapshot.status))
            outcomes[task.task_id] = record(task, snapshot, now=now)
        except Exception as exc:
            outcomes[task.task_id] = exc
    return outcomes


def _note_health(name: str, snapshots: Sequence[TaskSnapshot | UpstreamError]) -> None:
    """One poll of a channel, for its health: its first failure that counts against it, or a success."""
    channel = get_catalog().named(name)
    if channel is None:
        return
    failure = next((s for s in snapshots if isinstance(s, UpstreamError) and counts_against_channel(s)), None)
    if failure is not None:
        report_failure(channel, failure)
    elif any(not isinstance(s, UpstreamError) for s in snapshots):
        report_success(channel)


def channel_named(name: str) -> Channel:
    channel = get_catalog().named(name)
    if channel is not None:
        return channel
    # Removed from the document while the task ran: retried, then failed by the sweeper's age limit.
    raise UpstreamError(503, f"channel {name!r} is no longer configured", retryable=True)


def _failed(message: str, word: str = "failed") -> TaskSnapshot:
    return TaskSnapshot(status="failed", upstream_status=word, progress=None, result_urls=[], error=message,
                        duration=None, raw={})


def _reschedule(task: Task, changes: dict[str, Any] | None = None, *, now: float | None = None) -> str:
    """Writes `changes` with the next poll time, then enqueues that poll."""
    now = time.time() if now is None else now
    delay = poll_delay(task.polls)
    updated = tasks().update(task, {**(changes or {}), "next_poll_at": int(now + delay), "polls": task.polls + 1})
    if updated is None:
        return "stale"  # another poller moved it first and enqueued its next poll
    queue.send_poll(task.task_id, delay)
    if updated.callback_url and family_of(task.family).callback_on_change and \
            (updated.status, updated.progress) != (task.status, task.progress):
        queue.send_callback(task.task_id)
    return "running"


def record(task: Task, snapshot: TaskSnapshot, *, now: float | None = None) -> str:
    """Writes what the upstream said; a terminal answer goes on to `finish`."""
    now = time.time() if now is None else now
    if snapshot.status == "succeeded" and not snapshot.result_urls and family_of(task.family).result_links:
        # Inline bytes (an upstream that answers with the video itself) are kept by the family in
        # the results bucket (delta: `tasks/kept`); without one they cannot be served. A family
        # without links by design relays its bytes itself.
        snapshot = _failed("the upstream returned the video inline, and no results bucket keeps it"
                           if snapshot.inline_results else "the upstream finished without a video",
                           snapshot.upstream_status)
    changes: dict[str, Any] = {"status": snapshot.status, "upstream_status": snapshot.upstream_status,
                               "updated_at": int(now)}
    if snapshot.progress is not None:
        changes["progress"] = snapshot.progress
    if snapshot.duration:
        changes["duration"] = snapshot.duration
    if snapshot.details:
        changes["details"] = {**task.details, **snapshot.details}
    if not snapshot.terminal:
        return _reschedule(task, changes, now=now)
    changes.update(result_urls=snapshot.result_urls, error=snapshot.error, completed_at=int(now),
                   next_poll_at=int(now))
    updated = tasks().update(task, changes)
    if updated is None:
        return "stale"
    finish(updated, now=now)
    return "finished"


def finish(task: Task, *, now: float | None = None) -> None:
    """Settles or refunds a terminal task's reservation, enqueues its callback, closes it."""
    now = time.time() if now is None else now
    reservation = billing.Reservation(**task.reservation)
    family = family_of(task.family)
    if family.settles(task):
        detail = {"task_id": task.task_id, **family.settlement_detail(task), "channel": task.channel}
        billing.settle(reservation, settled_units(task), detail=detail)
        outcome = billing.SETTLED
    else:
        billing.refund(reservation, reason=(task.error or task.status)[:200], error=task.status == "failed")
        outcome = billing.REFUNDED
    if task.callback_url:
        queue.send_callback(task.task_id)
    # Kept for its owner's queries for a while, then deleted by DynamoDB's TTL.
    tasks().update(task, {"billing": outcome, "closed_at": int(now),
                          "expires_ttl": int(now) + billing.CLOSED_KEPT_SECONDS}, remove=("open_shard",))
    logger.info("task finished", extra={"task_id": task.task_id, "status": task.status, "billing": outcome})


def settled_units(task: Task) -> int:
    """The price of what was delivered, by the task's family, at the price the task was held at
    (kept with the task: an operator's change meanwhile never reaches it). A task stored before
    its price was kept was held before the operator's prices existed: the document's or the
    shipped price, and the hold when the model is no longer priced."""
    if task.price is not None:
        return family_of(task.family).units_to_settle(task, Price.of(task.price))
    prices = get_catalog(operator_prices=False).prices
    return family_of(task.family).units_to_settle(task, prices.get(task.model) if task.model in prices else None)


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
            if task.status in TERMINAL:
                finish(task, now=now)
                counts["finished"] += 1
            elif now - task.created_at > (max_age := family_of(task.family).max_age_seconds
                                          or settings.task_max_age_seconds):
                snapshot = _timed_out(task) or _failed(f"the task did not finish within {int(max_age)} seconds",
                                                       "timed_out")
                outcome = record(task, snapshot, now=now)
                counts["timed_out" if outcome == "finished" else "stale"] += 1
            elif tasks().update(task, {"next_poll_at": int(now + settings.task_sweep_grace_seconds)}) is None:
                counts["stale"] += 1  # the index copy was behind: the task moved meanwhile
            else:
                queue.send_poll(task.task_id, 0)
                counts["requeued"] += 1
        except Exception:
            logger.exception("sweeping a task failed", extra={"task_id": task.task_id})
    if any(counts.values()):
        logger.info("sweep", extra=counts)
    return counts


def _timed_out(task: Task) -> TaskSnapshot | None:
    """The family's own ending of a task past its age (a terminal snapshot), or None."""
    try:
        snapshot = family_of(task.family).timed_out(task)
    except Exception:
        logger.exception("a timed-out task's family could not end it; it is failed", extra={"task_id": task.task_id})
        return None
    return snapshot if snapshot is not None and snapshot.terminal else None


def owned_task(principal: Principal, task_id: str) -> Task:
    """A task of the caller's own account (another user's answers 404, as a missing one does)."""
    if not isinstance(task_id, str) or not task_id.strip():
        raise NotFound("task id is required", param="task_id", code="task_not_found")
    return tasks().get_owned(task_id.strip(), principal.user_id)
