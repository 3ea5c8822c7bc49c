"""The keys' room of the accounts table (`gateway.store.keys`) on DynamoDB's rules: a key issued
once (a secret held by any other user, or by the same user before, is refused; the same call asked
again after a lost answer is its own success), the record a new key starts with, deleted keys'
remains, and the owner's read of one key (its own only, read strongly consistent)."""

from __future__ import annotations

import time

import pytest

from gateway import keys
from gateway.settings import get_settings
from gateway.store import keys as keys_store
from gateway.store.aws import client


def key_records(secret: str) -> list[dict]:
    """Every record stored under a secret's hash, read straight from the table."""
    answer = client("dynamodb").query(
        TableName=get_settings().accounts_table, KeyConditionExpression="pk = :pk", ConsistentRead=True,
        ExpressionAttributeValues={":pk": {"S": f"KEY#{keys.hash_secret(secret)}"}})
    return answer["Items"]


@pytest.mark.parametrize(("holder", "taker"), [(3, 4), (4, 3), (3, 3)])
def test_a_secret_already_issued_is_refused_whoever_asks_and_changes_nothing(accounts, holder, taker):
    """A secret of a higher user id, of a lower one, and the same user's own secret issued at an
    earlier moment: each is refused, and the key stays its first owner's."""
    for uid in (3, 4):
        accounts.users.create_user(username=f"user{uid}", user_id=uid)
    secret = "sk-" + "k" * 48
    _, first = accounts.keys.create_key(holder, name="first", key=secret)
    time.sleep(0.002)  # another millisecond: the same user's second issue is another moment
    with pytest.raises(Exception, match="ConditionalCheckFailed"):
        accounts.keys.create_key(taker, name="second", key=secret)
    (record,) = key_records(secret)
    assert (int(record["user_id"]["N"]), record["name"]["S"], int(record["created_ms"]["N"])) == (
        holder, "first", first["created_ms"])


def test_a_key_asked_for_again_after_a_lost_answer_is_its_own_success(accounts, monkeypatch):
    """The transaction was applied and its answer lost: asked again, it meets the key it wrote
    (the same user, the same moment) and the key is issued once."""
    accounts.users.create_user(username="retry", user_id=5)
    real = keys_store.transact

    def applied_then_asked_again(db, writes, **kwargs):
        real(db, writes, **kwargs)
        real(db, writes, **kwargs)

    monkeypatch.setattr(keys_store, "transact", applied_then_asked_again)
    secret, record = accounts.keys.create_key(5, name="once")
    assert [key["key_id"] for key in accounts.keys.raw_keys(5)] == [record["key_id"]]
    assert accounts.keys.user_key(5, record["key_id"])["name"] == "once" and len(key_records(secret)) == 1


def test_a_new_key_starts_at_its_issue_second_never_used_and_an_unlimited_one_at_zero_quota(accounts):
    accounts.users.create_user(username="fresh", user_id=6)
    before = int(time.time())
    _, unlimited = accounts.keys.create_key(6, name="unlimited")
    _, empty = accounts.keys.create_key(6, name="limited to nothing", quota=0)
    after = int(time.time())
    for record in (unlimited, empty):
        assert before <= record["created_at"] <= after and record["created_at"] == record["created_ms"] // 1000
        assert record["last_used_at"] == 0 and record["used_quota"] == 0
        assert record["gsi1sk"] == f"{record['created_at']:012d}#{record['key_id']}"  # oldest first
    assert (unlimited["unlimited"], unlimited["remain_quota"]) == (True, 0)
    assert (empty["unlimited"], empty["remain_quota"]) == (False, 0)


def test_a_deleted_keys_remains_are_listed_only_when_asked_for(accounts):
    accounts.users.create_user(username="deleter", user_id=7)
    _, kept = accounts.keys.create_key(7, name="kept")
    _, gone = accounts.keys.create_key(7, name="gone")
    accounts.keys.delete_key(gone["key_id"])
    assert [key["key_id"] for key in accounts.keys.raw_keys(7)] == [kept["key_id"]]
    remains = {key["key_id"]: key for key in accounts.keys.raw_keys(7, include_deleted=True)}
    assert remains[gone["key_id"]]["status"] == "deleted" and remains[gone["key_id"]]["name"] == "gone"
    assert remains[kept["key_id"]]["status"] == "active"


@pytest.mark.parametrize("user_id", [8, 1000])  # 1000: above the small integers CPython keeps one object of
def test_an_owner_reads_its_own_key_strongly_consistent_and_no_one_elses(accounts, stale_replica, user_id):
    accounts.users.create_user(username="owner", user_id=user_id)
    accounts.users.create_user(username="someone", user_id=user_id + 1)
    _, record = accounts.keys.create_key(user_id, name="mine")
    stale_replica("KEY", "KEYID")  # a replica that has not caught up with the issue
    found = accounts.keys.user_key(user_id, record["key_id"])
    assert found is not None and found["name"] == "mine"
    assert accounts.keys.user_key(user_id + 1, record["key_id"]) is None
