"""The money paths when DynamoDB throttles or loses the answer of a write it applied
(gateway_local/faults.py, planned one fault at a time): botocore sends the same request again,
and `admission.transactions.transact` asks a cancelled transaction again under a new client token, so a write
may meet its own effect. Each must be recognised as the writer's own: held once, granted once,
credited once, counted once, and a cancellation for throughput never read as "quota too low"."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from gateway import admin, auth
from gateway.admission import balances, billing, lease_closes, leases, limits
from gateway.auth import authenticate
from gateway.store import holds
from gateway.store.aws import client, from_item, to_item
from tests.integration.money_support import open_reservations

USD = 500_000


@pytest.fixture
def user(accounts):
    accounts.users.create_user(username="ann", user_id=7, quota=100 * USD)
    key, _ = accounts.keys.create_key(7, name="k")
    return authenticate({"Authorization": f"Bearer {key}"})


def quota(accounts) -> int:
    return int(accounts.users.raw_user(7, consistent=True)["quota"])


def test_a_task_hold_cancelled_for_throughput_is_asked_again_not_refused_for_quota(user, accounts, faults):
    faults.plan("TransactWriteItems", "throttle")  # TransactionCanceledException, reason ThrottlingError
    held = billing.reserve(user, 1000, model="m-small", route="test", reservation_id="task-1")
    assert held.units == 1000 and quota(accounts) == 100 * USD - 1000 and faults.counts.throttled == 1


def test_a_task_hold_applied_then_lost_then_cancelled_for_throughput_is_held_once(user, accounts, faults):
    # Given botocore's first attempt is applied but its answer lost, and its retry is cancelled
    # for throughput, so `transact` asks again under a new token and meets its own reservation
    faults.plan("TransactWriteItems", "lost_answer")
    faults.plan("TransactWriteItems", "throttle")
    held = billing.reserve(user, 1000, model="m-small", route="test", reservation_id="task-1")
    # Then the hold is this request's, taken once
    assert held.reservation_id == "task-1" and quota(accounts) == 100 * USD - 1000
    assert [r.reservation_id for r in open_reservations(7)] == ["task-1"]
    # and another request under the same id is still refused
    with pytest.raises(billing.Conflict):
        billing.reserve(user, 1000, model="m-small", route="test", reservation_id="task-1")


def test_a_lease_grant_applied_then_lost_then_cancelled_for_throughput_is_granted_once(user, accounts, faults):
    pool = leases.LeasePool()
    faults.plan("TransactWriteItems", "lost_answer")
    faults.plan("TransactWriteItems", "throttle")
    held = billing.reserve_request(user, 1000, model="m-small", route="test", request_id=uuid.uuid4().hex, pool=pool)
    assert held.lease_id and len(holds.open_leases(7)) == 1
    billing.settle(held, 600, pool=pool)
    pool.release_all()
    assert quota(accounts) == 100 * USD - 600 and holds.open_leases(7) == []


def test_an_image_request_id_claim_whose_answer_was_lost_is_served_not_refused(user, accounts, faults):
    faults.plan("PutItem", "lost_answer")
    pool = leases.LeasePool()
    held = billing.reserve_request(user, 1000, model="m-small", route="test", request_id="apigw-1", pool=pool,
                                   claim_id=True)
    assert held.reservation_id == "apigw-1" and faults.counts.lost_answers == 1
    billing.refund(held, pool=pool)
    with pytest.raises(billing.Conflict):  # the id is still served once
        billing.reserve_request(user, 1000, model="m-small", route="test", request_id="apigw-1", pool=pool,
                                claim_id=True)


def test_a_quota_top_up_whose_answer_was_lost_is_added_once(user, accounts, faults):
    faults.plan("TransactWriteItems", "lost_answer")
    assert balances.add_user_quota(7, 5000) == 100 * USD + 5000
    assert faults.counts.lost_answers == 1 and faults.counts.token_replays == 1


def test_a_budget_hold_and_its_give_back_whose_answers_were_lost_count_once(user, accounts, faults):
    admin.run(["set-limits", "--user", "7", "--budget-usd", "1", "--budget-period", "daily"])
    auth.clear_cache()
    limits.step().reset()
    principal = authenticate({"Authorization": f"Bearer {accounts.keys.create_key(7, name='k2')[0]}"})
    pool = leases.LeasePool()
    faults.plan("TransactWriteItems", "lost_answer")  # the budget's hold (the first write of the request)
    held = billing.reserve_request(principal, 30_000, model="m-small", route="test", request_id="r-1", pool=pool)
    faults.plan("TransactWriteItems", "lost_answer")  # the close's give-back
    billing.settle(held, 20_000, pool=pool)
    window = "BUDGET#" + limits.window_ids(limits.clock())["daily"]
    item = from_item(client("dynamodb").get_item(TableName="AccountsTable", ConsistentRead=True, Key=to_item(
        {"pk": "LIMIT#U#7", "sk": window})).get("Item"))
    assert int(item["spent"]) == 20_000 and faults.counts.token_replays == 2


def test_account_writes_cancelled_for_throughput_are_asked_again(user, accounts, faults):
    # Every transaction of the accounts store goes through `store.aws.transact`: a key, a top-up,
    # a password, each cancelled once for throughput (`ThrottlingError`), then applied once.
    faults.plan("TransactWriteItems", "throttle")
    key, record = accounts.keys.create_key(7, name="made-while-throttled")
    assert authenticate({"Authorization": f"Bearer {key}"}).key_id == record["key_id"]
    faults.plan("TransactWriteItems", "throttle")
    assert balances.add_user_quota(7, 5000) == 100 * USD + 5000
    faults.plan("TransactWriteItems", "throttle")
    accounts.sign_in.set_password(7, "a-password-hash")
    assert accounts.users.raw_user(7, consistent=True)["password_hash"] == "a-password-hash"
    assert faults.counts.throttled == 3


def test_a_transaction_cancelled_for_throughput_every_time_is_raised_after_six_attempts(accounts, faults,
                                                                                        monkeypatch):
    from gateway import aws_failures
    from gateway.store import aws

    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    accounts.users.create_user(username="bo", user_id=8, quota=0)  # its own transaction, before the faults
    for _ in range(aws.TRANSACT_ATTEMPTS):
        faults.plan("TransactWriteItems", "throttle")
    with pytest.raises(ClientError) as raised:
        balances.add_user_quota(8, 5000)
    assert aws_failures.cancellation_reasons(raised.value) == ["ThrottlingError"]
    assert aws_failures.passing_failure(raised.value)
    assert faults.counts.throttled == aws.TRANSACT_ATTEMPTS
    assert accounts.users.raw_user(8, consistent=True)["quota"] == 0


def _ledger(user_id: int) -> dict[str, int]:
    """The user's ledger entries, by request id: their units."""
    from gateway.store.usage import UsageRepository

    return {entry["request_id"]: int(entry["units"]) for entry in UsageRepository().ledger(user_id)}


def _used(accounts) -> int:
    leases.pool().fold_idle(force=True)
    return int(accounts.users.raw_user(7, consistent=True)["used_quota"])


@pytest.mark.parametrize("first", ["lost_answer", "throttle"])
def test_a_close_whose_count_on_the_lease_still_fails_after_botocores_retries_is_billed_once(
        user, accounts, faults, monkeypatch, first):
    # Given a close whose lease write meets four faults in a row (botocore's every attempt): the
    # first applied but its answer lost, or all four throttled (nothing applied)
    from gateway.store import aws

    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    held = billing.reserve_request(user, 1000, model="m-small", route="test", request_id="close-1")
    for fault in (first, "throttle", "throttle", "throttle"):
        faults.plan("UpdateItem", fault)
    # When it settles
    assert billing.settle(held, 600)
    # Then the lease counted it once and its ledger entry is written: the bill follows the answer
    assert _ledger(7) == {"close-1": 600} and _used(accounts) == 600
    assert quota(accounts) == 100 * USD - 600


def test_entries_whose_write_failed_are_written_before_the_next_batch_replaces_them(user, accounts, faults):
    # Given a close whose lease counted it but whose ledger entry could not be written (BatchWriteItem
    # throttled at every attempt of botocore's)
    first = billing.reserve_request(user, 1000, model="m-small", route="test", request_id="entry-1")
    second = billing.reserve_request(user, 1000, model="m-small", route="test", request_id="entry-2")
    for _ in range(4):
        faults.plan("BatchWriteItem", "throttle")
    with pytest.raises(ClientError):
        billing.settle(first, 300)
    # When the lease's next close is written
    assert billing.settle(second, 200)
    # Then both entries are there, each once, and the account is billed exactly their sum
    assert _ledger(7) == {"entry-1": 300, "entry-2": 200} and _used(accounts) == 500


def test_a_close_whose_count_on_the_lease_never_goes_through_writes_no_entry(user, accounts, faults, monkeypatch):
    # Given a close whose lease write is throttled at every attempt of every round (six rounds of
    # botocore's four)
    from gateway.store import aws

    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    held = billing.reserve_request(user, 1000, model="m-small", route="test", request_id="never-1")
    for _ in range(lease_closes._BATCH_ATTEMPTS * 4):
        faults.plan("UpdateItem", "throttle")
    # Then the close fails, and nothing says the request was billed that the lease did not count
    with pytest.raises(ClientError):
        billing.settle(held, 600)
    assert "never-1" not in _ledger(7) and faults.counts.throttled == lease_closes._BATCH_ATTEMPTS * 4
