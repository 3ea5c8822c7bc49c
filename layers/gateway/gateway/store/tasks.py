"""The tasks table: one item per asynchronous task, keyed by the gateway's public task id.

Every change after the first write is conditioned on the item's `version`, so two pollers
(a duplicated SQS message, the sweeper racing the poller) can never both move a task: the one
that loses the race reads the task again and finds it already moved.

An unfinished task carries `open_shard` (one of `OPEN_SHARDS` values), which puts it in the
sparse `open_tasks` index ordered by `next_poll_at`; the sweeper reads only that index, and a
finished task drops the attribute and leaves it.
"""

from __future__ import annotations

import zlib
from typing import Any, Iterator

from gateway.errors import NotFound
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values

OPEN_INDEX = "open_tasks"
OWNER_INDEX = "by_owner"
# Spreads open tasks over a few index partitions; the sweeper reads each one.
OPEN_SHARDS = 4


def open_shard(task_id: str) -> str:
    return f"open#{zlib.crc32(task_id.encode()) % OPEN_SHARDS}"


class TasksRepository:
    def __init__(self, table: str | None = None):
        self._table = table

    @property
    def table(self) -> str:
        return self._table or get_settings().tasks_table

    def put(self, task: dict[str, Any]) -> None:
        """Stores a new task (version 1); a task id is never reused."""
        item = {**task, "version": 1}
        client("dynamodb").put_item(TableName=self.table, Item=to_item(item),
                                    ConditionExpression="attribute_not_exists(task_id)")

    def get(self, task_id: str) -> dict[str, Any] | None:
        return from_item(client("dynamodb").get_item(
            TableName=self.table, Key=to_item({"task_id": task_id}), ConsistentRead=True).get("Item"))

    def get_owned(self, task_id: str, owner_id: int | str) -> dict[str, Any]:
        """The task if `owner_id` owns it; anybody else's task is answered as if it did not exist."""
        task = self.get(task_id) if task_id else None
        if task is None or str(task.get("owner_id")) != str(owner_id):
            raise NotFound(f"task '{task_id}' does not exist", param="task_id", code="task_not_found")
        return task

    def update(self, task: dict[str, Any], changes: dict[str, Any], remove: tuple[str, ...] = ()) -> dict[str, Any] | None:
        """Applies `changes` if the stored task is still at `task["version"]`; the new task, or None
        when somebody else changed it first."""
        version = int(task["version"])
        values = {**changes, "version": version + 1}
        names = {f"#f{i}": name for i, name in enumerate(values)}
        sets = [f"#f{i} = :v{i}" for i in range(len(values))]
        expression = "SET " + ", ".join(sets)
        removed = {f"#r{i}": name for i, name in enumerate(remove)}
        if removed:
            expression += " REMOVE " + ", ".join(removed)
        try:
            client("dynamodb").update_item(
                TableName=self.table, Key=to_item({"task_id": task["task_id"]}), UpdateExpression=expression,
                ConditionExpression="#version = :expected",
                ExpressionAttributeNames={**names, **removed, "#version": "version"},
                ExpressionAttributeValues=to_values({**{f":v{i}": v for i, v in enumerate(values.values())},
                                                    ":expected": version}))
        except Exception as exc:
            if is_condition_failure(exc):
                return None
            raise
        updated = {**task, **values}
        for name in remove:
            updated.pop(name, None)
        return updated

    def overdue(self, before: float, limit: int = 100) -> Iterator[dict[str, Any]]:
        """Open tasks whose next poll was due before `before`, oldest due first, per shard."""
        for shard in range(OPEN_SHARDS):
            answer = client("dynamodb").query(
                TableName=self.table, IndexName=OPEN_INDEX,
                KeyConditionExpression="open_shard = :shard AND next_poll_at <= :before",
                ExpressionAttributeValues=to_values({":shard": f"open#{shard}", ":before": int(before)}),
                Limit=limit)
            for item in answer.get("Items", []):
                yield from_item(item)

    def by_owner(self, owner_id: int | str, *, family: str | None = None, at_most: int | None = None,
                 newest_first: bool = True) -> Iterator[dict[str, Any]]:
        """The owner's tasks by creation second (`created_at`), page by page; `at_most`
        (seconds) starts the newest-first walk there, or the oldest-first one there when
        `newest_first` is false; `family` keeps only that family's tasks."""
        condition, values = "owner_id = :owner", {":owner": str(owner_id)}
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
                yield from_item(item)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return
