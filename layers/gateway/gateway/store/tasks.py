"""The tasks table: one item per asynchronous task, keyed by the gateway's public task id.

Every change after the first write is conditioned on the item's `version`, so two pollers
(a duplicated SQS message, the sweeper racing the poller) can never both move a task: the one
that loses the race reads the task again and finds it already moved.

An unfinished task carries `open_shard` (one of `OPEN_SHARDS` values), which puts it in the
sparse `open_tasks` index ordered by `next_poll_at`; the sweeper reads only that index, and a
finished task drops the attribute and leaves it.

A task is read and written as a `Task`; `Task.from_item` / `Task.item` are its one mapping to
and from the stored item.

Each write also sets `write_id`, a fresh id of that write: when DynamoDB applied a write but its
answer was lost, botocore sends it again and the retry meets its own effect (the condition fails);
the item's `write_id` then tells the write's own effect from another writer's.
"""

from __future__ import annotations

import dataclasses
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import NotFound
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values

OPEN_INDEX = "open_tasks"
OWNER_INDEX = "by_owner"
# Spreads open tasks over a few index partitions; the sweeper reads each one.
OPEN_SHARDS = 4


def open_shard(task_id: str) -> str:
    return f"open#{zlib.crc32(task_id.encode()) % OPEN_SHARDS}"


@dataclass(frozen=True)
class Task:
    """One asynchronous task, as stored. Statuses are the engine's unified words
    (`gateway.tasks.adapter.UNIFIED`); each family turns them into its own public words."""

    task_id: str  # the gateway's public id; also the id of its reservation
    owner_id: str  # the user id, as a string
    family: str  # a name of `gateway.tasks.families.FAMILIES`
    model: str  # the public model id
    channel: str  # the channel that accepted it
    upstream_task_id: str
    reservation: dict[str, Any]  # `billing.Reservation` as a dict
    created_at: int
    updated_at: int
    status: str = "submitted"
    upstream_status: str | None = None  # the upstream's own last word
    progress: int = 0  # 0..100
    result_urls: list[str] = field(default_factory=list)
    error: str | None = None
    duration: str | None = None  # seconds of one video, as a string, when the family has one
    #: What the price multiplies (`families.base.Quantities` as a dict): seconds, images, calls, ...
    quantities: dict[str, Any] = field(default_factory=dict)
    #: The model's price (`prices.Price.fields`) when it was held: the settlement prices the task
    #: at it, whatever the operator changed meanwhile. None: a task stored before it was kept.
    price: dict[str, str] | None = None
    callback_url: str | None = None
    #: Request fields the family's answers repeat (size, seconds, external ids, ...).
    public: dict[str, Any] = field(default_factory=dict)
    #: What the upstream reported that the family's answers show (`TaskSnapshot.details`).
    details: dict[str, Any] = field(default_factory=dict)
    poll_url: str | None = None  # where to poll, when the upstream named its own URL
    parent_id: str | None = None  # the task this one acts on, for a family with follow-up actions
    #: What a parked task waits for from its client before it is submitted (nothing is held,
    #: sent upstream or polled until then: `engine.park`); None once submitted.
    waiting_for: str | None = None
    polls: int = 0
    next_poll_at: int = 0
    open_shard: str | None = None  # set while open (the sparse index); removed once finished
    completed_at: int | None = None
    billing: str | None = None  # settled or refunded, once finished
    closed_at: int | None = None
    expires_ttl: int | None = None  # set once finished: DynamoDB's TTL deletes the task then
    version: int = 0  # bumped by every write; each write is conditioned on it

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Task:
        """A task from its stored attributes (an attribute of another version of the code is ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in item.items() if k in known}
        for name in ("created_at", "updated_at", "progress", "polls", "next_poll_at", "version"):
            if values.get(name) is not None:
                values[name] = int(values[name])
        for name in ("result_urls",):
            values[name] = list(values.get(name) or [])
        for name in ("quantities", "public", "details"):
            values[name] = dict(values.get(name) or {})
        return cls(**values)

    def item(self) -> dict[str, Any]:
        """The stored attributes: every field that has a value (None is left out)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def replace(self, **changes: Any) -> Task:
        return dataclasses.replace(self, **changes)


#: A sent callback's mark: a claim that never passes.
CALLBACK_SENT = 2**62


class TasksRepository:
    def __init__(self, table: str | None = None):
        self._table = table

    @property
    def table(self) -> str:
        return self._table or get_settings().tasks_table

    def put(self, task: Task) -> Task:
        """Stores a new task (version 1); a task id is never reused."""
        task = task.replace(version=1)
        write_id = uuid.uuid4().hex
        try:
            client("dynamodb").put_item(TableName=self.table, Item=to_item({**task.item(), "write_id": write_id}),
                                        ConditionExpression="attribute_not_exists(task_id)")
        except Exception as exc:
            if not (is_condition_failure(exc) and self._written_by(task.task_id, write_id)):
                raise
        return task

    def _written_by(self, task_id: str, write_id: str) -> bool:
        """Whether the stored task's last write is `write_id` (a retried write met its own effect)."""
        found = client("dynamodb").get_item(TableName=self.table, Key=to_item({"task_id": task_id}),
                                            ConsistentRead=True, ProjectionExpression="write_id").get("Item")
        return (found or {}).get("write_id", {}).get("S") == write_id

    def get(self, task_id: str) -> Task | None:
        item = from_item(client("dynamodb").get_item(
            TableName=self.table, Key=to_item({"task_id": task_id}), ConsistentRead=True).get("Item"))
        return None if item is None else Task.from_item(item)

    def get_many(self, task_ids: list[str]) -> dict[str, Task]:
        """The stored tasks among `task_ids` (at most 100), by id, in one consistent batch read
        (what DynamoDB leaves unprocessed is asked again)."""
        if len(task_ids) > 100:
            raise ValueError("at most 100 task ids per batch read")
        found: dict[str, Task] = {}
        keys = [to_item({"task_id": task_id}) for task_id in dict.fromkeys(task_ids)]
        request = {self.table: {"Keys": keys, "ConsistentRead": True}} if keys else {}
        while request:
            answer = client("dynamodb").batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(self.table, []):
                task = Task.from_item(from_item(item))
                found[task.task_id] = task
            request = answer.get("UnprocessedKeys") or {}
        return found

    def get_owned(self, task_id: str, owner_id: int | str) -> Task:
        """The task if `owner_id` owns it; anybody else's task is answered as if it did not exist."""
        task = self.get(task_id) if task_id else None
        if task is None or task.owner_id != str(owner_id):
            raise NotFound(f"task '{task_id}' does not exist", param="task_id", code="task_not_found")
        return task

    def update(self, task: Task, changes: dict[str, Any], remove: tuple[str, ...] = ()) -> Task | None:
        """Applies `changes` (field names to values) and removes the `remove` fields if the stored
        task is still at `task.version`; the new task, or None when somebody else changed it first."""
        version = task.version
        write_id = uuid.uuid4().hex
        values = {**changes, "version": version + 1, "write_id": write_id}
        names = {f"#f{i}": name for i, name in enumerate(values)}
        sets = [f"#f{i} = :v{i}" for i in range(len(values))]
        expression = "SET " + ", ".join(sets)
        removed = {f"#r{i}": name for i, name in enumerate(remove)}
        if removed:
            expression += " REMOVE " + ", ".join(removed)
        try:
            client("dynamodb").update_item(
                TableName=self.table, Key=to_item({"task_id": task.task_id}), UpdateExpression=expression,
                ConditionExpression="#version = :expected",
                ExpressionAttributeNames={**names, **removed, "#version": "version"},
                ExpressionAttributeValues=to_values({**{f":v{i}": v for i, v in enumerate(values.values())},
                                                    ":expected": version}))
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            if not self._written_by(task.task_id, write_id):
                return None
        del values["write_id"]
        return task.replace(**values, **{name: None for name in remove})

    # A callback is sent once per task and status (`callback_sender`): a claim on the task item,
    # `callback#<status>` = until when the sender holds it; once sent, `CALLBACK_SENT` (never passes).

    def claim_callback(self, task_id: str, status: str, *, until: int, now: int) -> bool:
        """True when this sender may send the task's callback for `status`: none sent, and no other
        sender's claim still running (a crashed sender's claim passes at its `until`)."""
        try:
            client("dynamodb").update_item(
                TableName=self.table, Key=to_item({"task_id": task_id}), UpdateExpression="SET #c = :until",
                ConditionExpression="attribute_exists(task_id) AND (attribute_not_exists(#c) OR #c < :now)",
                ExpressionAttributeNames={"#c": f"callback#{status}"},
                ExpressionAttributeValues=to_values({":until": int(until), ":now": int(now)}))
            return True
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            return False

    def end_callback_claim(self, task_id: str, status: str, *, until: int, sent: bool) -> None:
        """The claim made `until`: marked sent for good, or given up (a failed send is tried again)."""
        names = {"#c": f"callback#{status}"}
        values: dict[str, Any] = {":until": int(until)}
        if sent:
            expression, values[":sent"] = "SET #c = :sent", CALLBACK_SENT
        else:
            expression = "REMOVE #c"
        try:
            client("dynamodb").update_item(
                TableName=self.table, Key=to_item({"task_id": task_id}), UpdateExpression=expression,
                ConditionExpression="#c = :until", ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_values(values))
        except Exception as exc:
            if not is_condition_failure(exc):
                raise

    def overdue(self, before: float, limit: int = 100) -> Iterator[Task]:
        """Open tasks whose next poll was due before `before`, oldest due first, per shard."""
        for shard in range(OPEN_SHARDS):
            answer = client("dynamodb").query(
                TableName=self.table, IndexName=OPEN_INDEX,
                KeyConditionExpression="open_shard = :shard AND next_poll_at <= :before",
                ExpressionAttributeValues=to_values({":shard": f"open#{shard}", ":before": int(before)}),
                Limit=limit)
            for item in answer.get("Items", []):
                yield Task.from_item(from_item(item))

    def by_owner(self, owner_id: int | str, *, family: str | None = None, at_most: int | None = None,
                 newest_first: bool = True) -> Iterator[Task]:
        """The owner's tasks by creation second (`created_at`), page by page; `at_most`
        (seconds) starts the newest-first walk there, or the oldest-first one there when
        `newest_first` is false; `family` keeps only that family's tasks."""
        condition, values = "owner_id = :owner", dict[str, Any]({":owner": str(owner_id)})
        if at_most is not None:
            condition += " AND created_at " + ("<= :edge" if newest_first else ">= :edge")
            values[":edge"] = int(at_most)
        extra: dict[str, Any] = {}
        if family is not None:
            extra = {"FilterExpression": "#family = :family", "ExpressionAttributeNames": {"#family": "family"}}
            values[":family"] = family
        start: dict[str, Any] | None = None
        while True:
            answer = client("dynamodb").query(
                TableName=self.table, IndexName=OWNER_INDEX, KeyConditionExpression=condition,
                ExpressionAttributeValues=to_values(values), ScanIndexForward=not newest_first,
                **extra, **({"ExclusiveStartKey": start} if start else {}))
            for item in answer.get("Items", []):
                yield Task.from_item(from_item(item))
            start = answer.get("LastEvaluatedKey")
            if not start:
                return
