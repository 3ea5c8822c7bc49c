"""Usage reads from day totals kept by settlement: exact to the unit, costing the days they span."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from gateway import admin
from gateway.admission import balances, billing
from gateway.auth import authenticate
from gateway.store.usage import UsageRepository, UsageTotal

DAY0 = datetime(2026, 11, 10, tzinfo=UTC)
HOURS = (0, 7, 13, 23)  # entries at these hours of each of five days (and one at 23:59:59.999999)


class _Clock(datetime):
    at = DAY0

    @classmethod
    def now(cls, tz=None):
        return cls.at


class _CountingRepository(UsageRepository):
    """Counts the items every Query of the usage read hands back (its cost on DynamoDB)."""

    read = 0

    @property
    def _db(self):
        db, repository = super()._db, self

        class Counting:
            def query(self, **params):
                answer = db.query(**params)
                repository.read += len(answer.get("Items", []))
                return answer

            def __getattr__(self, name):
                return getattr(db, name)

        return Counting()


@pytest.fixture
def ledger(accounts, monkeypatch):
    """User 5 with two keys; five days of settled and refunded requests on two models."""
    accounts.users.create_user(username="eve", quota=10**9, user_id=5)
    keys = [authenticate({"x-api-key": accounts.keys.create_key(5, name=f"k{i}")[0]}) for i in range(2)]
    monkeypatch.setattr(billing, "datetime", _Clock)
    serial = itertools.count()
    for day in range(5):
        moments = [DAY0 + timedelta(days=day, hours=h) for h in HOURS]
        moments.append(DAY0 + timedelta(days=day + 1) - timedelta(microseconds=1))
        for moment in moments:
            n = next(serial)
            _Clock.at = moment
            principal, model = keys[n % 2], ("m-small", "m-large")[n % 3 == 0]
            reservation = billing.reserve(principal, 1000 + n, model=model, route="test", reservation_id=f"r{n}")
            if n % 4 == 3:
                billing.refund(reservation, reason="test")
            else:
                billing.settle(reservation, 100 + 7 * n)
    return {"keys": keys}


def _expected(accounts, start, end, key_id=None, model=None) -> UsageTotal:
    entries = [e for e in accounts.usage.ledger(5, start=start, end=end, key_id=key_id)
               if model is None or e["model"] == model]
    return UsageTotal(sum(e["units"] for e in entries), len(entries))


BOUNDS = [None, DAY0, DAY0 + timedelta(hours=7), DAY0 + timedelta(days=1, hours=12, milliseconds=5),
          DAY0 + timedelta(days=2) - timedelta(microseconds=1), DAY0 + timedelta(days=2),
          DAY0 + timedelta(days=3, hours=23), DAY0 + timedelta(days=4, hours=23, minutes=59, seconds=59,
                                                                 microseconds=999999),
          DAY0 + timedelta(days=9)]


def test_every_range_adds_up_to_exactly_what_its_ledger_entries_do(ledger, accounts):
    # Given five days of entries; When every range between the bounds is read, for every scope
    scopes = [{}, {"key_id": ledger["keys"][0].key_id}, {"key_id": ledger["keys"][1].key_id},
              {"model": "m-large"}, {"model": "m-small"}]
    for start, end in itertools.product(BOUNDS, BOUNDS):
        if start and end and start > end:
            continue
        for scope in scopes:
            # Then the totals match the raw entries to the unit and to the entry
            assert balances.usage(5, start=start, end=end, **scope) == _expected(accounts, start, end, **scope), \
                (start, end, scope)


def test_a_range_reads_the_days_it_spans_and_the_entries_of_its_partial_ends(ledger):
    repository = _CountingRepository()
    # When a range from the middle of the first day to the middle of the last is read
    repository.usage(5, repository.day_sums, start=DAY0 + timedelta(hours=12), end=DAY0 + timedelta(days=4, hours=12))
    # Then it read three day totals and the entries in range on the two end days (3 after noon of
    # the first, 2 before noon of the last), never the 15 entries of the whole days between
    assert repository.read == 3 + 3 + 2
    repository.read = 0
    # When no dates are given, Then only the five day totals are read
    assert repository.usage(5, repository.day_sums).units == balances.usage(5).units
    assert repository.read == 5


def test_the_admin_usage_command_reads_the_same_totals(ledger, accounts):
    key_id = ledger["keys"][1].key_id
    answer = admin.run(["usage", "--user", "5", "--start", "2026-11-11", "--end", "2026-11-12", "--key", key_id])
    # (both dates inclusive: the whole of 11-12 is in)
    expected = _expected(accounts, DAY0 + timedelta(days=1), DAY0 + timedelta(days=3, microseconds=-1), key_id=key_id)
    assert (answer["units"], answer["requests"]) == (expected.units, expected.requests) and expected.requests > 0
    by_model = admin.run(["usage", "--user", "5", "--model", "m-large"])
    assert by_model["units"] == _expected(accounts, None, None, model="m-large").units > 0


def test_a_ranges_day_totals_count_what_an_open_lease_settled_on_its_first_and_last_day(accounts):
    from gateway.store import holds

    # Given a request settled today on a quota lease that is still open (not yet folded into the days)
    accounts.users.create_user(username="lea", quota=10**6, user_id=6)
    principal = authenticate({"x-api-key": accounts.keys.create_key(6, name="k")[0]})
    first = datetime.now(UTC).date()
    held = billing.reserve_request(principal, 100, model="m-small", route="test", request_id="on-a-lease")
    assert held.lease_id and billing.settle(held, 40) is True
    assert holds.open_leases(6)
    last = datetime.now(UTC).date()  # the same day unless the test ran across midnight
    # When a range that starts and ends on that day is read, Then the lease's counts are in it
    (day,) = balances.day_totals(6, first, last)
    assert (int(day["units"]), int(day["requests"])) == (40, 1)
    # and in a range that starts days before it
    (day,) = balances.day_totals(6, first - timedelta(days=2), last)
    assert (day["sk"], int(day["units"]), int(day["requests"])) == (last.isoformat(), 40, 1)
    # and not in a range that ends the day before
    assert balances.day_totals(6, first - timedelta(days=3), first - timedelta(days=1)) == []
    # and the usage of whole days that end on it counts them too
    midnight = datetime(first.year, first.month, first.day, tzinfo=UTC)
    assert balances.usage(6, start=midnight - timedelta(days=1), end=midnight + timedelta(days=2, microseconds=-1)) \
        == UsageTotal(40, 1)
    # and not the usage of whole days that end the day before; a range with no end counts them
    assert balances.usage(6, start=midnight - timedelta(days=3), end=midnight - timedelta(microseconds=1)) \
        == UsageTotal()
    assert balances.usage(6, start=midnight - timedelta(days=1)) == UsageTotal(40, 1)
    # and a model the lease never served counts nothing on it: neither units nor requests
    assert balances.usage(6, start=midnight - timedelta(days=1), end=midnight + timedelta(days=2, microseconds=-1),
                          model="m-large") == UsageTotal(0, 0)


def test_a_day_a_model_did_not_spend_on_counts_nothing_for_it(accounts, monkeypatch):
    """A day's totals item holds the counters of whatever spent that day: a model that did not
    spend then has no counter there, which reads as nothing (0 units, 0 requests)."""
    accounts.users.create_user(username="fay", quota=10**9, user_id=6)
    key = authenticate({"x-api-key": accounts.keys.create_key(6, name="k")[0]})
    monkeypatch.setattr(billing, "datetime", _Clock)
    for day, model in ((0, "m-small"), (1, "m-large")):
        _Clock.at = DAY0 + timedelta(days=day, hours=12)
        billing.settle(billing.reserve(key, 1000, model=model, route="test", reservation_id=f"fay{day}"), 300 + day)
    start, end = DAY0, DAY0 + timedelta(days=2) - timedelta(microseconds=1)  # two whole days: their totals
    for model, units in (("m-small", 300), ("m-large", 301)):
        assert balances.usage(6, start=start, end=end, model=model) == UsageTotal(units, 1)


def test_a_days_totals_outlive_it_by_the_ledgers_retention(accounts, monkeypatch):
    from gateway.store.usage import days_pk
    from tests.conftest import use_environment

    accounts.users.create_user(username="gus", quota=10**9, user_id=7)
    key = authenticate({"x-api-key": accounts.keys.create_key(7, name="k")[0]})
    monkeypatch.setattr(billing, "datetime", _Clock)
    _Clock.at = DAY0 + timedelta(hours=12)
    saved = use_environment(GATEWAY_LEDGER_RETENTION_DAYS="30")
    try:
        billing.settle(billing.reserve(key, 1000, model="m-small", route="test", reservation_id="gus0"), 300)
    finally:
        use_environment(**saved)
    day = accounts.usage._get(days_pk(7), DAY0.date().isoformat(), consistent=True)
    assert day is not None and day["expires_ttl"] == int((DAY0 + timedelta(days=1 + 30)).timestamp())
