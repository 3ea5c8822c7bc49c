"""The metering core against the emulator: reserve, settle and refund, under concurrency and retries."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway import billing
from gateway.auth import authenticate
from gateway.errors import AuthenticationFailed, InsufficientQuota


@pytest.fixture
def limited(accounts):
    """User 7 with 1000 units and a key limited to 600 of them."""
    accounts.create_user(username="ana", quota=1000, user_id=7)
    key, _ = accounts.create_key(7, name="limited", quota=600)
    return authenticate({"Authorization": f"Bearer {key}"})


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
    key = accounts.get_key(limited.key_hash)
    assert key["remain_quota"] == 0
    assert accounts.get_user(7, consistent=True)["quota"] == 400


def test_concurrent_reservations_never_overspend_the_user(accounts):
    accounts.create_user(username="bo", quota=500, user_id=8)
    principals = [authenticate({"x-api-key": accounts.create_key(8, name=f"k{i}")[0]}) for i in range(3)]

    def attempt(i):
        try:
            billing.reserve(principals[i % 3], 100, model="m-small", route="test", reservation_id=f"u{i}")
            return True
        except InsufficientQuota:
            return False

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sum(pool.map(attempt, range(12))) == 5
    assert accounts.get_user(8, consistent=True)["quota"] == 0


def test_settle_charges_the_real_price_exactly_once(limited, accounts):
    reservation = billing.reserve(limited, 300, model="m-small", route="test", reservation_id="req-1")
    # When settlement is attempted three times, from several threads
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda _: billing.settle(reservation, 120), range(3)))
    # Then one of them did it, and the ledger and quotas moved once
    assert sorted(outcomes) == [False, False, True]
    assert billing.refund(reservation) is False
    user = accounts.get_user(7, consistent=True)
    assert (user["quota"], user["used_quota"], user["request_count"]) == (880, 120, 1)
    key = accounts.get_key(limited.key_hash)
    assert (key["remain_quota"], key["used_quota"]) == (480, 120)
    entries = accounts.ledger(7)
    assert [(e["request_id"], e["units"], e["outcome"]) for e in entries] == [("req-1", 120, "settled")]


def test_refund_returns_the_whole_hold_exactly_once(limited, accounts):
    reservation = billing.reserve(limited, 250, model="m-small", route="test", reservation_id="req-2")
    assert accounts.get_user(7, consistent=True)["quota"] == 750
    assert billing.refund(reservation, reason="upstream 500") is True
    assert billing.refund(reservation) is False
    assert billing.settle(reservation, 250) is False
    assert accounts.get_user(7, consistent=True)["quota"] == 1000
    assert accounts.get_key(limited.key_hash)["remain_quota"] == 600
    (entry,) = accounts.ledger(7)
    assert (entry["units"], entry["outcome"]) == (0, "refunded")


def test_reserving_the_same_id_twice_holds_once(limited, accounts):
    first = billing.reserve(limited, 100, model="m-small", route="test", reservation_id="same")
    second = billing.reserve(limited, 100, model="m-small", route="test", reservation_id="same")
    assert first == second
    assert accounts.get_user(7, consistent=True)["quota"] == 900


def test_a_revoked_key_cannot_reserve_even_while_its_lookup_is_cached(limited, accounts):
    accounts.revoke_key(limited.key_id)
    with pytest.raises(AuthenticationFailed):
        billing.reserve(limited, 10, model="m-small", route="test", reservation_id="after-revoke")
    assert accounts.get_user(7, consistent=True)["quota"] == 1000
