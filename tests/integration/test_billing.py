"""The metering core against the emulator: reserve, settle and refund, under concurrency and retries."""

import time
from concurrent.futures import ThreadPoolExecutor
from unittest.mock import create_autospec

import pytest

from gateway.admission import balances, billing
from gateway.auth import authenticate
from gateway.errors import AuthenticationFailed, Conflict, InsufficientQuota
from tests.integration.money_support import closed_as, open_reservations, reservation_record


@pytest.fixture
def limited(accounts):
    """User 7 with 1000 units and a key limited to 600 of them."""
    accounts.users.create_user(username="ana", quota=1000, user_id=7)
    key, _ = accounts.keys.create_key(7, name="limited", quota=600)
    return authenticate({"Authorization": f"Bearer {key}"})


def user_with_key(accounts, user_id: int, quota: int, key_quota: int | None = None):
    """A user of `quota` units and the principal of a key of its (unlimited, or `key_quota`)."""
    accounts.users.create_user(username=f"user{user_id}", quota=quota, user_id=user_id)
    return authenticate({"x-api-key": accounts.keys.create_key(user_id, name="k", quota=key_quota)[0]})


def test_concurrent_reservations_never_overspend_the_key(limited, accounts):
    # Given a key limited to 600 units, When 20 requests of 50 units reserve at once
    def attempt(i):
        try:
            billing.reserve(limited, 50, model="m-small", route="test", reservation_id=f"r{i}")
            return True
        except InsufficientQuota:
            return False

    with ThreadPoolExecutor(max_workers=10) as pool:
        granted = sum(pool.map(attempt, range(20)))
    # Then exactly 12 get through and nothing goes below zero
    assert granted == 12
    key = balances.get_key(limited.key_hash)
    assert key["remain_quota"] == 0
    assert balances.get_user(7)["quota"] == 400


def test_concurrent_reservations_never_overspend_the_user(accounts):
    accounts.users.create_user(username="bo", quota=500, user_id=8)
    principals = [authenticate({"x-api-key": accounts.keys.create_key(8, name=f"k{i}")[0]}) for i in range(3)]

    def attempt(i):
        try:
            billing.reserve(principals[i % 3], 100, model="m-small", route="test", reservation_id=f"u{i}")
            return True
        except InsufficientQuota:
            return False

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sum(pool.map(attempt, range(12))) == 5
    assert balances.get_user(8)["quota"] == 0


def test_settle_charges_the_real_price_exactly_once(limited, accounts):
    reservation = billing.reserve(limited, 300, model="m-small", route="test", reservation_id="req-1")
    # When settlement is attempted three times, from several threads
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda _: billing.settle(reservation, 120), range(3)))
    # Then one of them did it, and the ledger and quotas moved once
    assert sorted(outcomes) == [False, False, True]
    assert billing.refund(reservation) is False
    user = balances.get_user(7)
    assert (user["quota"], user["used_quota"], user["request_count"]) == (880, 120, 1)
    key = balances.get_key(limited.key_hash)
    assert (key["remain_quota"], key["used_quota"]) == (480, 120)
    entries = accounts.usage.ledger(7)
    assert [(e["request_id"], e["units"], e["outcome"]) for e in entries] == [("req-1", 120, "settled")]


def test_refund_returns_the_whole_hold_exactly_once(limited, accounts):
    reservation = billing.reserve(limited, 250, model="m-small", route="test", reservation_id="req-2")
    assert balances.get_user(7)["quota"] == 750
    assert billing.refund(reservation, reason="upstream 500") is True
    assert billing.refund(reservation) is False
    assert billing.settle(reservation, 250) is False
    assert balances.get_user(7)["quota"] == 1000
    assert balances.get_key(limited.key_hash)["remain_quota"] == 600
    (entry,) = accounts.usage.ledger(7)
    assert (entry["units"], entry["outcome"]) == (0, "refunded")
    assert entry["log_type"] == billing.LOG_ERROR  # a refund is a failed request unless told otherwise
    assert "shortfall" not in entry  # nothing was priced, so nothing went uncharged
    assert (entry["group"], entry["base_units"]) == ("default", 0)  # nor anything before the group's ratio


def test_an_account_too_low_behind_a_key_with_room_is_told_as_the_accounts_quota(accounts):
    # Given a user with 100 units and a key limited to 600: the account, not the key, runs short
    accounts.users.create_user(username="eve", quota=100, user_id=12)
    principal = authenticate({"x-api-key": accounts.keys.create_key(12, name="k", quota=600)[0]})
    with pytest.raises(InsufficientQuota) as refused:
        billing.reserve(principal, 300, model="m-small", route="test", reservation_id="short-account")
    assert "account's remaining quota is too low" in refused.value.message


def test_a_reservation_recorded_before_holds_had_times_reads_as_time_zero():
    record = {"reservation_id": "old", "user_id": 1, "key_hash": "h", "key_id": "k", "limited_key": False,
              "units": 5, "model": "m", "route": "r", "status": billing.RESERVED}
    old = billing.Reservation.from_record(record)
    assert (old.created_at, old.hold_until) == (0, 0)


def test_a_revoked_key_cannot_reserve_even_while_its_lookup_is_cached(limited, accounts):
    accounts.keys.revoke_key(limited.key_id)
    with pytest.raises(AuthenticationFailed):
        billing.reserve(limited, 10, model="m-small", route="test", reservation_id="after-revoke")
    assert balances.get_user(7)["quota"] == 1000


def test_reserving_an_id_already_in_flight_is_a_conflict_and_holds_nothing_more(limited, accounts):
    # Given a request in flight under id "same"
    billing.reserve(limited, 100, model="m-small", route="test", reservation_id="same")
    # When another request (a replay, or a forged id) reserves under the same id
    with pytest.raises(Conflict) as refused:
        billing.reserve(limited, 100, model="m-small", route="test", reservation_id="same")
    # Then it is a 409 and the quota moved once only
    assert refused.value.status == 409
    assert balances.get_user(7)["quota"] == 900


def test_reserving_a_closed_id_again_is_a_conflict_never_a_free_serving(limited, accounts):
    reservation = billing.reserve(limited, 100, model="m-small", route="test", reservation_id="done")
    billing.settle(reservation, 40)
    with pytest.raises(Conflict):
        billing.reserve(limited, 100, model="m-small", route="test", reservation_id="done")
    assert balances.get_user(7)["quota"] == 960


def test_another_users_request_under_an_in_flight_id_is_refused_and_billed_to_nobody(limited, accounts):
    # Given user A's request in flight, When user B's request comes with A's id
    billing.reserve(limited, 100, model="m-small", route="test", reservation_id="a-in-flight")
    accounts.users.create_user(username="bea", quota=1000, user_id=9)
    other = authenticate({"x-api-key": accounts.keys.create_key(9, name="b")[0]})
    with pytest.raises(Conflict):
        billing.reserve(other, 100, model="m-small", route="test", reservation_id="a-in-flight")
    # Then neither account moved for B's request
    assert balances.get_user(7)["quota"] == 900
    assert balances.get_user(9)["quota"] == 1000


def test_a_settlement_above_the_hold_takes_at_most_what_the_user_has_left(accounts):
    # Given a user with 1000 units and an unlimited key, and a request that held 300
    accounts.users.create_user(username="cy", quota=1000, user_id=10)
    principal = authenticate({"x-api-key": accounts.keys.create_key(10, name="k")[0]})
    reservation = billing.reserve(principal, 300, model="m-small", route="test", reservation_id="over-user")
    # When the real price comes to 5000 units
    assert billing.settle(reservation, 5000) is True
    # Then the quota is at zero, never below, and the entry records what could not be charged
    user = balances.get_user(10)
    assert (user["quota"], user["used_quota"]) == (0, 1000)
    (entry,) = accounts.usage.ledger(10)
    assert (entry["units"], entry["shortfall"], entry["outcome"]) == (1000, 4000, "settled")


def test_a_settlement_above_the_hold_takes_at_most_what_a_limited_key_has_left(limited, accounts):
    # Given a key limited to 600 of the user's 1000, and a request that held 100
    reservation = billing.reserve(limited, 100, model="m-small", route="test", reservation_id="over-key")
    assert billing.settle(reservation, 2000) is True
    # Then the key is at zero, the user paid what the key could, and the shortfall is recorded
    key = balances.get_key(limited.key_hash)
    assert (key["remain_quota"], key["used_quota"]) == (0, 600)
    assert balances.get_user(7)["quota"] == 400
    (entry,) = accounts.usage.ledger(7)
    assert (entry["units"], entry["shortfall"]) == (600, 1400)
    assert billing.settle(reservation, 2000) is False  # and only once


def test_a_settlement_within_the_hold_records_no_shortfall(limited, accounts):
    reservation = billing.reserve(limited, 300, model="m-small", route="test", reservation_id="within")
    billing.settle(reservation, 300)
    (entry,) = accounts.usage.ledger(7)
    assert entry["units"] == 300 and "shortfall" not in entry


def test_the_sweeper_refunds_a_reservation_past_its_hold_exactly_once_saying_why(limited, accounts):
    # Given one request whose hold ran out (it crashed) and one still within its time (durable
    # reservations: a crashed request's lease is swept in tests/integration/test_money_model.py)
    stale = billing.reserve(limited, 200, model="m-small", route="test", reservation_id="crashed",
                            hold_seconds=billing.REQUEST_HOLD_SECONDS)
    billing.reserve(limited, 100, model="m-small", route="test", reservation_id="running", hold_seconds=10_000)
    closed = billing.reserve_request(limited, 50, model="m-small", route="test", request_id="closed")
    billing.settle(closed, 50)
    assert balances.get_user(7)["quota"] == 650
    # When the sweeper runs after the first hold's deadline, twice
    later = stale.hold_until + 1
    first = billing.sweep_stale(now=later)
    second = billing.sweep_stale(now=later)
    # Then the stale one alone is refunded, once, with a ledger entry saying why
    assert first["refunded"] == 1 and second["refunded"] == 0
    assert billing.get_reservation("crashed").status == billing.REFUNDED
    assert billing.get_reservation("running").status == billing.RESERVED
    assert balances.get_user(7)["quota"] == 850
    (entry,) = [e for e in accounts.usage.ledger(7) if e["request_id"] == "crashed"]
    assert entry["outcome"] == "refunded" and "could no longer be running" in entry["detail"]["reason"]


def test_a_request_hold_outlasts_the_longest_request_and_a_task_hold_the_task_max_age(limited):
    from gateway.settings import get_settings

    request = billing.reserve_request(limited, 10, model="m-small", route="test", request_id="r-hold")
    task = billing.reserve(limited, 10, model="m-small", route="test", reservation_id="t-hold",
                           hold_seconds=billing.task_hold_seconds())
    assert request.hold_until - request.created_at > 900  # the text function's timeout
    # the sweeper steps in one hour after the engine would have failed the task for its age
    assert task.hold_until - task.created_at == get_settings().task_max_age_seconds + 3600


def test_a_settlement_above_the_hold_whose_quota_keeps_shrinking_still_charges_the_hold(accounts, monkeypatch):
    # Given a request that held 300 of 1000 units and came to 5000, and other requests of the
    # same user that take a unit each time this settlement reads what is left (contention)
    principal = user_with_key(accounts, 11, 1000)
    reservation = billing.reserve(principal, 300, model="m-small", route="test", reservation_id="shrinking")
    real_left = billing._left

    def left_then_spent(reservation):
        left = real_left(reservation)
        balances.add_user_quota(11, -1)  # another request of the user's spends after the read
        return left

    monkeypatch.setattr(billing, "_left", create_autospec(billing._left, side_effect=left_then_spent))
    # When it settles
    assert billing.settle(reservation, 5000) is True
    # Then every attempt above the hold was refused, and the last one charged the hold itself:
    # settled (never left open for the sweeper to refund: served free), the quota never below 0
    closed_as("shrinking", billing.SETTLED, 300)
    assert open_reservations(11) == []
    (entry,) = accounts.usage.ledger(11)
    assert (entry["units"], entry["shortfall"]) == (300, 4700)
    assert balances.get_user(11)["quota"] == 1000 - 300 - (billing._SETTLE_ATTEMPTS - 1)


def test_a_ledger_entry_and_a_reservation_carry_their_times(limited, accounts, monkeypatch):
    # Given entries kept for 30 days
    monkeypatch.setenv("GATEWAY_LEDGER_RETENTION_DAYS", "30")
    from gateway.settings import reload_settings

    reload_settings()
    try:
        before = time.time()
        reservation = billing.reserve(limited, 100, model="m-small", route="test", reservation_id="timed")
        billing.settle(reservation, 60)
        after = time.time()
    finally:
        monkeypatch.delenv("GATEWAY_LEDGER_RETENTION_DAYS")
        reload_settings()
    # Then the reservation knows when it was made, the entry when it was written (in ms), and
    # the entry expires exactly 30 days after it was written
    assert int(before) <= billing.get_reservation("timed").created_at <= after
    (entry,) = accounts.usage.ledger(7)
    assert before * 1000 - 1000 <= entry["at"] <= after * 1000
    assert entry["expires_ttl"] == entry["at"] // 1000 + 30 * 86400


def test_a_closed_reservation_is_kept_thirty_days_to_guard_its_id_then_expires(limited):
    # Given a settled and a refunded reservation
    billing.settle(billing.reserve(limited, 100, model="m-small", route="test", reservation_id="kept-s"), 40)
    billing.refund(billing.reserve(limited, 100, model="m-small", route="test", reservation_id="kept-r"))
    # Then each record expires (DynamoDB TTL) 30 days after it was closed, never sooner
    for reservation_id in ("kept-s", "kept-r"):
        record = reservation_record(reservation_id)
        assert record["expires_ttl"] == record["closed_at"] + billing.CLOSED_KEPT_SECONDS == \
            record["closed_at"] + 30 * 86400
        assert record["closed_at"] >= int(time.time()) - 60


def test_the_sweeper_with_nothing_overdue_reports_nothing_done(limited):
    # Given one open reservation within its hold
    billing.reserve(limited, 100, model="m-small", route="test", reservation_id="fresh", hold_seconds=10_000)
    # When the sweeper runs now, Then it refunded nothing and met nothing already closed
    counts = billing.sweep_stale()
    assert (counts["refunded"], counts["already_closed"]) == (0, 0)
    assert billing.get_reservation("fresh").status == billing.RESERVED


def test_a_replayed_request_id_is_claimed_once_then_refused_as_a_duplicate(limited, accounts):
    # Given a request served under API Gateway's request id (claimed first)
    billing.reserve_request(limited, 50, model="m-small", route="test", request_id="apigw-1", claim_id=True)
    quota = balances.get_user(7)["quota"]
    # When the same event is replayed, Then it is a 409 duplicate_request that holds nothing more
    with pytest.raises(Conflict) as caught:
        billing.reserve_request(limited, 50, model="m-small", route="test", request_id="apigw-1", claim_id=True)
    assert caught.value.code == "duplicate_request"
    assert balances.get_user(7)["quota"] == quota
    # And the id's claim is no durable reservation: nothing a task or the sweeper would close
    assert billing.get_reservation("apigw-1") is None


def test_a_request_ids_claim_whose_answer_dynamodb_lost_is_its_own_and_holds_once(limited, accounts, faults):
    # Given DynamoDB applies the claim's put and loses its answer (botocore's retry meets the claim)
    faults.plan("PutItem", "lost_answer")
    quota = balances.get_user(7)["quota"]
    # When the request is reserved, Then it is served (its own claim, not a duplicate), held once
    held = billing.reserve_request(limited, 50, model="m-small", route="test", request_id="apigw-lost",
                                   claim_id=True)
    assert faults.counts.lost_answers == 1 and held.units == 50
    billing.settle(held, 50)
    assert balances.get_user(7)["quota"] == quota - 50
    # and the id stays used: a replay of the event is the duplicate
    with pytest.raises(Conflict):
        billing.reserve_request(limited, 50, model="m-small", route="test", request_id="apigw-lost", claim_id=True)


def test_a_user_disabled_after_its_key_was_read_is_refused_as_disabled_not_as_short_of_quota(limited, accounts):
    # Given a key authenticated while its user was enabled, then the user's profile disabled
    # (`disable-user` writes the profile first, its keys after: a request may come in between)
    from gateway.settings import get_settings
    from gateway.store.aws import client, to_item, to_values
    from gateway.store.table import PROFILE, user_pk

    client("dynamodb").update_item(
        TableName=get_settings().accounts_table, Key=to_item({"pk": user_pk(7), "sk": PROFILE}),
        UpdateExpression="SET #s = :disabled", ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=to_values({":disabled": 2}))
    assert balances.get_key(limited.key_hash)["status"] == "active"
    # When it reserves, Then it is refused for the disabled user, and nothing is held
    with pytest.raises(AuthenticationFailed) as caught:
        billing.reserve(limited, 10, model="m-small", route="test", reservation_id="disabled-user")
    assert "disabled" in str(caught.value)
    assert billing.get_reservation("disabled-user") is None
    assert balances.get_user(7)["quota"] == 1000


def test_a_settlement_reports_the_units_billed_metric_and_a_refund_does_not(limited, capsys):
    import json

    from gateway import observability

    # Given an empty metrics buffer
    observability.flush()
    capsys.readouterr()
    # When one reservation is settled at 120 units and another refunded
    billing.settle(billing.reserve(limited, 300, model="m-small", route="test", reservation_id="metric-s"), 120)
    billing.refund(billing.reserve(limited, 300, model="m-small", route="test", reservation_id="metric-r"))
    observability.flush()
    # Then the EMF output carries UnitsBilled 120 once, for the settlement alone
    billed = [doc["UnitsBilled"] for doc in map(json.loads, filter(None, capsys.readouterr().out.splitlines()))
              if "UnitsBilled" in doc]
    assert billed == [[120.0]]


def _calls(operation: str) -> list[dict]:
    """Records the parameters of every `operation` call made from billing's own code from now on."""
    import sys

    seen: list[dict] = []

    from gateway.admission import transactions
    from gateway.store import aws

    layer = billing.__file__.rsplit("/admission/", 1)[0]
    shared = (aws.__file__, transactions.__file__)

    def note(params, **_):  # the innermost frame of the layer that made the call (through the
        frame = sys._getframe(1)  # shared `transact`s) is billing's
        while frame is not None and (not frame.f_code.co_filename.startswith(layer)
                                     or frame.f_code.co_filename in shared):
            frame = frame.f_back
        if frame is not None and frame.f_code.co_filename == billing.__file__:
            seen.append(dict(params))

    billing._db().meta.events.register(f"provide-client-params.dynamodb.{operation}", note)
    return seen


def test_a_task_that_took_the_last_units_of_user_and_key_settles_under_its_hold(accounts):
    # Given a user with 600 units behind a key limited to 600, and a task that held all of them
    principal = user_with_key(accounts, 11, 600, key_quota=600)
    reservation = billing.reserve(principal, 600, model="m-small", route="test", reservation_id="all-in")
    # When it settles at 500, under its hold (nothing above the hold is asked of empty quotas)
    assert billing.settle(reservation, 500) is True
    # Then it is settled and the rest of the hold is back on both
    assert balances.get_user(11)["quota"] == 100
    assert closed_as("all-in", billing.SETTLED, 500)


@pytest.mark.parametrize("outcome", ["settled", "refunded"])
def test_the_sweeper_writes_nothing_for_a_reservation_it_reads_as_closed(limited, accounts, outcome):
    # Given a settled (or refunded) reservation that the hold index still lists (an index copy
    # behind the table)
    reservation = billing.reserve(limited, 100, model="m-small", route="test", reservation_id="behind",
                                  hold_seconds=1)
    if outcome == "settled":
        billing.settle(reservation, 40)
    else:
        billing.refund(reservation)
    record = reservation_record("behind")
    billing._db().put_item(TableName=billing._table(), Item=billing.to_item(
        {**record, **billing.hold_index_keys("behind", int(record["hold_until"]))}))
    transactions = _calls("TransactWriteItems")
    # When the sweeper runs past its hold
    counts = billing.sweep_stale(now=time.time() + 60)
    # Then it is counted as closed without a refund's transaction, and nothing moved
    assert counts["already_closed"] == 1 and counts["refunded"] == 0 and transactions == []
    assert balances.get_user(7)["quota"] == (960 if outcome == "settled" else 1000)


def test_a_settlement_above_the_hold_of_a_closed_reservation_is_one_refused_write(accounts):
    # Given a closed reservation of a user with nothing left beyond it
    accounts.users.create_user(username="eve", quota=300, user_id=12)
    principal = authenticate({"x-api-key": accounts.keys.create_key(12, name="k")[0]})
    reservation = billing.reserve(principal, 300, model="m-small", route="test", reservation_id="closed-over")
    billing.refund(reservation)
    transactions = _calls("TransactWriteItems")
    # When a late settlement above its hold comes (its quota would refuse the excess too)
    assert billing.settle(reservation, 5000) is False
    # Then it is known closed from its one refused write: no smaller charge is tried after it
    assert len(transactions) == 1
    assert balances.get_user(12)["quota"] == 300


def test_every_read_billing_decides_on_is_strongly_consistent(limited, accounts):
    # A bill is readable the moment its answer is, and a refusal names the state just written.
    reads = _calls("GetItem")
    reservation = billing.reserve(limited, 500, model="m-small", route="test", reservation_id="c-1")
    with pytest.raises(InsufficientQuota):  # the key's refusal reads the key
        billing.reserve(limited, 500, model="m-small", route="test", reservation_id="c-2")
    billing.settle(reservation, 800)  # above the hold: reads what is left
    billing.get_reservation("c-1")
    with pytest.raises(Conflict):  # an id used already: whether the hold found is this very one
        billing.reserve(limited, 10, model="m-small", route="test", reservation_id="c-1")
    accounts.users.create_user(username="gus", quota=10**6, user_id=14)
    rich = authenticate({"x-api-key": accounts.keys.create_key(14, name="k")[0]})
    billing.reserve_request(rich, 10, model="m-small", route="test", request_id="c-3", claim_id=True)
    with pytest.raises(Conflict):  # a claim that meets another reads it
        billing.reserve_request(rich, 10, model="m-small", route="test", request_id="c-3", claim_id=True)
    accounts.users.create_user(username="fay", quota=10, user_id=13)
    poor = authenticate({"x-api-key": accounts.keys.create_key(13, name="k")[0]})
    with pytest.raises(InsufficientQuota):  # the user's refusal reads the profile
        billing.reserve(poor, 500, model="m-small", route="test", reservation_id="c-4")
    assert len(reads) >= 5 and all(read.get("ConsistentRead") is True for read in reads), reads


def test_a_settlement_above_the_hold_never_takes_a_limited_key_below_zero_when_the_user_is_rich(accounts):
    # Given a rich user behind a key limited to 600, and a task that held 300 of them
    accounts.users.create_user(username="hal", quota=10**6, user_id=15)
    principal = authenticate({"x-api-key": accounts.keys.create_key(15, name="k", quota=600)[0]})
    reservation = billing.reserve(principal, 300, model="m-small", route="test", reservation_id="key-binds")
    # When its real price comes to 5000 units
    assert billing.settle(reservation, 5000) is True
    # Then the key gives what it had (600 in all), never more
    key = balances.list_keys(15)[0]
    assert key["remain_quota"] == 0 and balances.get_user(15)["quota"] == 10**6 - 600


@pytest.mark.parametrize("price", [0, -5])
def test_a_free_price_or_a_negative_one_settles_at_nothing(accounts, price):
    principal = user_with_key(accounts, 21, 1_000)
    reservation = billing.reserve(principal, 100, model="m-small", route="test", reservation_id=f"free{price}")
    assert billing.settle(reservation, price) is True
    assert balances.get_user(21)["quota"] == 1_000 and balances.get_user(21)["used_quota"] == 0
    assert closed_as(f"free{price}", billing.SETTLED, 0)


def test_a_credit_landing_after_a_settlement_was_refused_charges_the_price_never_more(accounts, monkeypatch):
    # Given a task held at 100 whose price comes to 150, with 10 units left beside the hold
    principal = user_with_key(accounts, 22, 110)
    reservation = billing.reserve(principal, 100, model="m-small", route="test", reservation_id="credited")
    real_left = billing._left

    def credited_meanwhile(held):
        balances.add_user_quota(22, 1_000)  # the operator's credit lands after the first refusal
        return real_left(held)

    monkeypatch.setattr(billing, "_left", credited_meanwhile)
    # When it settles, Then the second try charges the price, 150, not the hold plus all that is left
    assert billing.settle(reservation, 150) is True
    assert balances.get_user(22)["used_quota"] == 150 and balances.get_user(22)["quota"] == 110 + 1_000 - 150
    assert closed_as("credited", billing.SETTLED, 150)


def test_a_request_id_held_by_another_hold_is_a_duplicate_whatever_its_hold_id(limited, accounts, monkeypatch):
    billing.reserve(limited, 50, model="m-small", route="test", reservation_id="taken")
    quota = balances.get_user(7)["quota"]

    class Lowest:
        hex = "0" * 32  # sorts before every other hold's id

        def __str__(self) -> str:  # as botocore writes a ClientRequestToken
            return "00000000-0000-0000-0000-000000000000"

    monkeypatch.setattr(billing.uuid, "uuid4", lambda: Lowest())
    with pytest.raises(Conflict) as refused:
        billing.reserve(limited, 50, model="m-small", route="test", reservation_id="taken")
    assert refused.value.code == "duplicate_request" and balances.get_user(7)["quota"] == quota
