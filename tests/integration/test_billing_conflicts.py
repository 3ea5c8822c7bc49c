"""DynamoDB cancels a transaction that meets another one on the same item (a user's profile is in
every reservation and settlement of that user). moto serialises transactions and never does, so
these tests make the client cancel the first attempts the way DynamoDB does."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from gateway.admission import balances, billing, transactions
from gateway.auth import authenticate
from gateway.errors import RateLimited
from gateway.store import aws


def _conflict() -> ClientError:
    return ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                        "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"},
                                                {"Code": "None"}]}, "TransactWriteItems")


class _Conflicting:
    """The real client, whose first `conflicts` transactions are cancelled for a conflict."""

    def __init__(self, real, conflicts: int):
        self.real, self.conflicts = real, conflicts

    def transact_write_items(self, **kwargs):
        if self.conflicts:
            self.conflicts -= 1
            raise _conflict()
        return self.real.transact_write_items(**kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.fixture
def principal(demo):
    return authenticate({"authorization": f"Bearer {demo['key']}"})


def test_a_settlement_cancelled_by_a_conflict_is_retried_and_charged_once(principal, accounts, monkeypatch):
    # Given a reservation of 1000 units
    before = balances.get_user(1)["quota"]
    reservation = billing.reserve(principal, 1000, model="m-small", route="/v1/chat/completions",
                                  reservation_id="conflict-settle")
    # When its settlement meets two conflicts with other transactions first
    conflicting = _Conflicting(transactions._db(), 2)
    monkeypatch.setattr(transactions, "_db", lambda: conflicting)
    settled = billing.settle(reservation, 400)
    # Then it is settled (not taken for "already closed"), exactly once
    assert settled is True
    assert balances.get_user(1)["quota"] == before - 400
    assert billing.get_reservation("conflict-settle").status == billing.SETTLED
    assert billing.settle(reservation, 400) is False


def test_a_reservation_cancelled_by_a_conflict_is_retried_not_refused_for_quota(principal, accounts, monkeypatch):
    before = balances.get_user(1)["quota"]
    conflicting = _Conflicting(transactions._db(), 1)
    monkeypatch.setattr(transactions, "_db", lambda: conflicting)
    reservation = billing.reserve(principal, 700, model="m-small", route="/v1/chat/completions",
                                  reservation_id="conflict-reserve")
    assert reservation.units == 700
    assert balances.get_user(1)["quota"] == before - 700


def test_a_conflict_that_never_clears_is_a_429_to_retry_and_moves_nothing(principal, accounts, monkeypatch):
    before = balances.get_user(1)["quota"]
    conflicting = _Conflicting(transactions._db(), 1000)
    monkeypatch.setattr(transactions, "_db", lambda: conflicting)
    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    with pytest.raises(RateLimited) as caught:
        billing.reserve(principal, 700, model="m-small", route="/v1/chat/completions",
                        reservation_id="conflict-forever")
    assert caught.value.headers == {"Retry-After": "1"}
    assert balances.get_user(1)["quota"] == before


def test_the_pause_before_each_new_attempt_doubles(principal, accounts, monkeypatch):
    # Given a reservation that meets three conflicts, with each pause's upper bound recorded
    conflicting = _Conflicting(transactions._db(), 3)
    monkeypatch.setattr(transactions, "_db", lambda: conflicting)
    bounds: list[float] = []
    monkeypatch.setattr(aws.random, "uniform", lambda low, high: bounds.append(high) or 0.0)
    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    billing.reserve(principal, 10, model="m-small", route="/v1/chat/completions", reservation_id="conflict-pauses")
    # Then the pauses grow 10 ms, 20 ms, 40 ms: contention eases instead of hammering the item
    assert bounds == [0.01, 0.02, 0.04]


def test_a_reservation_that_conflicts_on_all_but_its_last_attempt_still_goes_through(principal, accounts,
                                                                                      monkeypatch):
    # Given a reservation whose first five transactions (of six allowed) meet a conflict
    before = balances.get_user(1)["quota"]
    conflicting = _Conflicting(transactions._db(), aws.TRANSACT_ATTEMPTS - 1)
    monkeypatch.setattr(transactions, "_db", lambda: conflicting)
    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    # When it reserves
    reservation = billing.reserve(principal, 70, model="m-small", route="/v1/chat/completions",
                                  reservation_id="conflict-last-attempt")
    # Then the sixth attempt holds it: no 429 while an attempt is left
    assert reservation.units == 70
    assert balances.get_user(1)["quota"] == before - 70
    assert billing.get_reservation("conflict-last-attempt").status == billing.RESERVED


def test_a_conflict_that_never_clears_is_asked_six_times_in_all(principal, accounts, monkeypatch):
    conflicting = _Conflicting(transactions._db(), 1000)
    monkeypatch.setattr(transactions, "_db", lambda: conflicting)
    monkeypatch.setattr(aws.time, "sleep", lambda _: None)
    with pytest.raises(RateLimited):
        billing.reserve(principal, 700, model="m-small", route="/v1/chat/completions", reservation_id="six")
    assert conflicting.conflicts == 1000 - 6
