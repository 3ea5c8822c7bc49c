"""The sign-in room of the accounts table (`gateway.store.signin`) on DynamoDB's rules: each
password change moves the user's session generation on by one (two changes racing each move it
once), the session that made a change kept under the new one (a session gone meanwhile left
alone), the decoy an unknown name reads shaped like a profile however nested, and the sign-in
counters refused as one transaction, naming the counter that refused."""

from __future__ import annotations

import pytest

from gateway.store import signin as signin_store
from gateway.store.aws import client, to_item
from gateway.store.signin import SignInCounter, sign_in_decoy
from gateway.store.table import PROFILE


def generation_of(accounts, user_id: int) -> int:
    return int(accounts.users.raw_user(user_id, consistent=True)["session_generation"])


def test_each_password_change_moves_the_session_generation_on_by_one(accounts):
    uid = int(accounts.users.create_user(username="changer")["id"])
    for expected in (1, 2, 3):
        assert accounts.sign_in.set_password(uid, f"hash-{expected}") == expected
        assert generation_of(accounts, uid) == expected
    assert accounts.users.raw_user(uid, consistent=True)["password_hash"] == "hash-3"


def test_a_change_racing_another_reads_the_generation_again_and_moves_it_once_more(accounts, monkeypatch):
    uid = int(accounts.users.create_user(username="racer")["id"])
    accounts.sign_in.set_password(uid, "first")
    real = signin_store.transact
    raced: list[int] = []
    calls: list[int] = []

    def another_change_first(db, writes, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the other change lands between this one's read and its transaction
            raced.append(accounts.sign_in.set_password(uid, "the other"))
        return real(db, writes, **kwargs)

    monkeypatch.setattr(signin_store, "transact", another_change_first)
    assert accounts.sign_in.set_password(uid, "mine") == 3
    assert raced == [2] and generation_of(accounts, uid) == 3
    assert len(calls) == 3  # this change, the other, then this one again
    assert accounts.users.raw_user(uid, consistent=True)["password_hash"] == "mine"


def test_a_password_change_stands_when_the_decoy_cannot_be_written(accounts, monkeypatch):
    uid = int(accounts.users.create_user(username="decoyless")["id"])
    repository = accounts.sign_in

    class Throttled(Exception):
        pass

    def put_item(**kwargs):
        raise Throttled("ProvisionedThroughputExceededException")

    monkeypatch.setattr(repository._db, "put_item", put_item)
    assert repository.set_password(uid, "kept") == 1
    assert accounts.users.raw_user(uid, consistent=True)["password_hash"] == "kept"


def test_the_session_that_changed_the_password_is_kept_and_one_gone_meanwhile_left_alone(accounts):
    uid = int(accounts.users.create_user(username="keeper")["id"])
    accounts.sign_in.put_session("kept", uid, expires_at=2_000_000_000, generation=0)
    accounts.sign_in.keep_session("kept", 1)
    assert int(accounts.sign_in.get_session("kept")["generation"]) == 1
    accounts.sign_in.keep_session("gone", 1)  # signed out meanwhile: nothing made, nothing raised
    assert accounts.sign_in.get_session("gone") is None


def test_the_decoy_blanks_every_value_however_nested_and_keeps_the_shape():
    profile = {"pk": "USER#1", "sk": PROFILE, "expires_ttl": 5, "username": "abc", "quota": 12, "ok": True,
               "setting": {"notify": "email", "limits": {"rpm": 60}, "tags": ["vip", 7]},
               "history": ["ab", 3, {"k": "v"}]}
    assert sign_in_decoy(profile) == {
        "pk": "SIGNIN-DECOY", "sk": "DECOY", "username": "xxx", "quota": 0, "ok": True,
        "setting": {"notify": "xxxxx", "limits": {"rpm": 0}, "tags": ["xxx", 0]}, "history": ["xx", 0, {"k": "x"}]}


@pytest.mark.parametrize("refusing", [0, 1, 2])
def test_counters_are_raised_together_or_not_at_all_naming_the_first_that_refused(accounts, refusing):
    counters = [SignInCounter(f"subject{i}", window=100, limit=3, expires=10_000) for i in range(3)]
    table = accounts.sign_in.table
    client("dynamodb").put_item(TableName=table, Item=to_item(
        {"pk": f"SIGNIN#subject{refusing}", "sk": "100", "attempts": 3}))  # at its limit
    assert accounts.sign_in.admit_sign_in(counters, now=1_000) == refusing
    attempts = [accounts.sign_in.sign_in_counter(f"subject{i}", 100).get("attempts") for i in range(3)]
    assert attempts == [3 if i == refusing else None for i in range(3)]  # none raised
    fresh = [SignInCounter(f"other{i}", window=100, limit=3, expires=10_000) for i in range(3)]
    assert accounts.sign_in.admit_sign_in(fresh, now=1_000) is None
    assert [accounts.sign_in.sign_in_counter(f"other{i}", 100)["attempts"] for i in range(3)] == [1, 1, 1]


def test_the_decoy_is_shaped_like_the_profile_just_written_never_a_replicas_view(accounts, stale_replica):
    uid = int(accounts.users.create_user(username="shaped", display_name="Shaped One")["id"])
    stale_replica(PROFILE)  # a replica that has not caught up: the decoy's read of the profile is consistent
    accounts.sign_in.set_password(uid, "a" * 64)
    decoy = client("dynamodb").get_item(TableName=accounts.sign_in.table, ConsistentRead=True,
                                        Key=to_item(signin_store.SIGN_IN_DECOY_KEY))["Item"]
    assert decoy["display_name"] == {"S": "x" * len("Shaped One")} and decoy["password_hash"] == {"S": "x" * 64}


def test_a_successful_sign_in_gives_its_own_attempt_back_down_to_zero_and_never_below(accounts):
    counter = SignInCounter("pair:ann/192.0.2.1", window=100, limit=3, expires=10_000)
    assert accounts.sign_in.admit_sign_in([counter], now=1_000) is None
    accounts.sign_in.forget_sign_in_attempt(counter.subject, 100, reset=False)
    assert accounts.sign_in.sign_in_counter(counter.subject, 100)["attempts"] == 0
    accounts.sign_in.forget_sign_in_attempt(counter.subject, 100, reset=False)  # nothing left to give back
    assert accounts.sign_in.sign_in_counter(counter.subject, 100)["attempts"] == 0
    accounts.sign_in.forget_sign_in_attempt("pair:ann/192.0.2.1", 200, reset=False)  # the window turned
    assert accounts.sign_in.sign_in_counter(counter.subject, 200) == {}
