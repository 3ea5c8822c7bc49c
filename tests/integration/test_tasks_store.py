"""The tasks table's repository (store/tasks.py) against the emulator: a task id is stored once,
every change is conditioned on the version it read, and a write whose answer DynamoDB lost is
still known as the writer's own (gateway_local/faults.py)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from gateway.errors import NotFound
from gateway.store.tasks import OPEN_SHARDS, Task, TasksRepository, open_shard


@pytest.fixture
def tasks(store):
    return TasksRepository()


def new(task_id: str = "t-1", owner: str = "1", **fields) -> Task:
    base = dict(family="delta", model="m", channel="c", upstream_task_id="u", created_at=100, updated_at=100)
    return Task(task_id=task_id, owner_id=owner, reservation={"reservation_id": task_id}, **{**base, **fields})


def test_a_task_is_stored_at_version_1_once_and_its_id_never_reused(tasks):
    stored = tasks.put(new())
    assert stored.version == 1 and tasks.get("t-1") == stored
    with pytest.raises(ClientError):
        tasks.put(new(upstream_task_id="other"))
    assert tasks.get("t-1").upstream_task_id == "u"


def test_a_put_whose_answer_dynamodb_lost_is_the_writers_own(tasks, faults):
    # Given DynamoDB stores the task but the answer is lost (botocore's retry meets the task itself)
    faults.plan("PutItem", "lost_answer")
    # When it is put, Then it is stored once and the put answers the task
    assert tasks.put(new()).version == 1
    assert faults.counts.lost_answers == 1 and tasks.get("t-1").version == 1


def test_an_update_moves_the_version_it_read_and_a_stale_one_changes_nothing(tasks):
    first = tasks.put(new())
    moved = tasks.update(first, {"status": "running", "progress": 40})
    assert moved is not None and (moved.version, moved.status, moved.progress) == (2, "running", 40)
    assert tasks.get("t-1") == moved
    assert tasks.update(first, {"status": "failed"}) is None  # read at version 1: somebody moved it
    assert tasks.get("t-1").status == "running"


def test_an_update_whose_answer_dynamodb_lost_is_the_writers_own_and_another_writers_is_not(tasks, faults):
    first = tasks.put(new())
    faults.plan("UpdateItem", "lost_answer")
    moved = tasks.update(first, {"status": "succeeded"})
    assert moved is not None and moved.version == 2 and tasks.get("t-1").status == "succeeded"
    assert tasks.update(first, {"status": "failed"}) is None  # a stale reader is still refused


def test_an_update_removes_the_fields_it_is_told_to(tasks):
    first = tasks.put(new(open_shard=open_shard("t-1"), next_poll_at=50))
    closed = tasks.update(first, {"billing": "settled"}, remove=("open_shard",))
    assert closed.open_shard is None and tasks.get("t-1").open_shard is None and tasks.get("t-1").billing == "settled"


def test_overdue_lists_open_tasks_due_before_the_time_across_every_shard(tasks):
    ids = [f"t-{n}" for n in range(12)]
    for n, task_id in enumerate(ids):
        tasks.put(new(task_id, open_shard=open_shard(task_id), next_poll_at=100 + n))
    tasks.put(new("closed", next_poll_at=0))  # no open_shard: not in the index
    assert {open_shard(t) for t in ids} == {f"open#{s}" for s in range(OPEN_SHARDS)}
    due = [t.task_id for t in tasks.overdue(105)]
    assert sorted(due) == sorted(ids[:6])
    assert len(list(tasks.overdue(200, limit=1))) == OPEN_SHARDS  # one page of one per shard


def test_get_many_reads_up_to_100_ids_once_each(tasks):
    tasks.put(new("a"))
    tasks.put(new("b"))
    assert set(tasks.get_many(["a", "b", "a", "missing"])) == {"a", "b"}
    assert tasks.get_many([]) == {}
    with pytest.raises(ValueError):
        tasks.get_many([str(n) for n in range(101)])
    assert len(tasks.get_many([str(n) for n in range(100)])) == 0


def test_another_owners_task_is_answered_as_missing(tasks):
    tasks.put(new(owner="1"))
    assert tasks.get_owned("t-1", 1).task_id == "t-1"
    for task_id, owner in (("t-1", 2), ("nope", 1), ("", 1)):
        with pytest.raises(NotFound):
            tasks.get_owned(task_id, owner)


def test_by_owner_walks_newest_or_oldest_first_from_an_edge_and_filters_a_family(tasks):
    for n in range(5):
        tasks.put(new(f"t-{n}", created_at=100 + n, family="delta" if n % 2 else "zeta"))
    tasks.put(new("other", owner="2", created_at=103))
    assert [t.task_id for t in tasks.by_owner(1)] == ["t-4", "t-3", "t-2", "t-1", "t-0"]
    assert [t.task_id for t in tasks.by_owner(1, at_most=102)] == ["t-2", "t-1", "t-0"]
    assert [t.task_id for t in tasks.by_owner(1, at_most=102, newest_first=False)] == ["t-2", "t-3", "t-4"]
    assert [t.task_id for t in tasks.by_owner(1, family="delta")] == ["t-3", "t-1"]


def test_a_new_task_starts_unpolled_and_an_item_written_without_counters_reads_with_defaults(tasks):
    assert (tasks.put(new()).polls, tasks.get("t-1").polls) == (0, 0)
    # an item from another version of the code: no progress or polls, an extra attribute
    item = {k: v for k, v in new("old").item().items() if k not in ("progress", "polls")}
    old = Task.from_item({**item, "retired_field": 1, "progress": 40.0})
    assert (old.polls, old.progress) == (0, 40) and isinstance(old.progress, int)


def test_every_read_the_repository_decides_on_is_strongly_consistent(tasks, faults):
    from gateway.store.aws import client

    reads: list[dict] = []
    client("dynamodb").meta.events.register("provide-client-params.dynamodb.GetItem",
                                            lambda params, **_: reads.append(dict(params)))
    faults.plan("PutItem", "lost_answer")  # the put then reads whose write it met
    first = tasks.put(new())
    tasks.get("t-1")
    faults.plan("UpdateItem", "lost_answer")
    tasks.update(first, {"status": "running"})
    assert len(reads) == 3 and all(read.get("ConsistentRead") is True for read in reads), reads
