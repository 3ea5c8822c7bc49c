"""Quota leases are exact: a seeded random interleaving of holds, settlements above and below the
hold, refunds, crashes of an instance (between requests, and between the two writes of a close),
sweeps, operator top-ups and a key revocation, across many simulated instances of one account,
checking after every step that no unit is created or lost and no quota is ever negative.

Every instance is a `LeasePool` of its own, as a warm function instance is; a crashed one is
dropped with whatever it held. A fake clock drives the lease windows and the sweeper's deadline.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.admission import balances, billing, lease_closes, lease_folds, leases
from gateway.auth import USER_DISABLED, Principal, authenticate
from gateway.errors import AuthenticationFailed, InsufficientQuota
from gateway.settings import get_settings
from gateway.store import holds
from gateway.store.aws import client, from_item, to_item, to_values
from gateway.store.holds import lease_pks
from gateway.store.table import key_pk

USER = 30


class Clock:
    def __init__(self) -> None:
        self.wall, self.mono = 1_800_000_000.0, 1000.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def sleep(self, seconds: float) -> None:  # a pause before asking DynamoDB again passes at once
        self.advance(seconds)


@dataclass
class Ledger:
    """What the test knows was put into the account, and where its holds are."""

    user_added: int
    key_added: int
    holds: list[tuple[int, billing.Reservation]] = field(default_factory=list)  # (instance, hold)
    refused_quota: int = 0
    refused_revoked: int = 0
    settled: int = 0
    refunded: int = 0
    crashes: int = 0
    torn_closes: int = 0
    sweeps: int = 0
    folded_by_sweeper: int = 0


def _items(pk: str) -> list[dict[str, Any]]:
    answer = client("dynamodb").query(TableName=get_settings().accounts_table, KeyConditionExpression="pk = :p",
                                      ExpressionAttributeValues=to_values({":p": pk}), ConsistentRead=True)
    return [from_item(item) for item in answer.get("Items", [])]


def _raw(pk: str, sk: str) -> dict[str, Any]:
    return from_item(client("dynamodb").get_item(TableName=get_settings().accounts_table,
                                                 Key=to_item({"pk": pk, "sk": sk}), ConsistentRead=True)["Item"])


def check(accounts, book: Ledger, limited: Principal, pools: dict[int, leases.LeasePool]) -> None:
    """The invariants of DEVELOPING.md (Money), read from the table as it is."""
    profile = accounts.users.raw_user(USER, consistent=True)
    key = _raw(key_pk(limited.key_hash), "KEY")
    all_leases = [lease for pk in lease_pks(USER) for lease in _items(pk)]
    open_leases = [lease for lease in all_leases if lease["status"] == holds.OPEN]
    entries = accounts.usage.ledger(USER)
    written = {entry["request_id"] for entry in entries}
    # Nothing negative, no lease spent beyond its grant
    assert profile["quota"] >= 0 and key["remain_quota"] >= 0
    assert all(0 <= lease["spent"] <= lease["granted"] for lease in all_leases)
    # Conservation: every unit added is in the quota, on an open lease, or used
    assert profile["quota"] + sum(lease["granted"] for lease in open_leases) + profile["used_quota"] \
        == book.user_added
    mine = [lease for lease in open_leases if lease["key_hash"] == limited.key_hash]
    assert key["remain_quota"] + sum(lease["granted"] for lease in mine) + key["used_quota"] == book.key_added
    # What was used is what the ledger says was charged (the one entry a torn close may still owe
    # is on its lease, to be written by the fold)
    owed = [from_item(entry) for lease in open_leases for entry in lease_closes.carried_entries(lease)
            if from_item(entry)["request_id"] not in written]
    charged = sum(int(entry["units"]) for entry in entries) + sum(int(entry["units"]) for entry in owed)
    assert charged == profile["used_quota"] + sum(lease["spent"] for lease in open_leases)
    assert charged <= book.user_added  # never more than was ever put in: no overspend
    # Every live instance holds no more than its leases have free
    for pool in pools.values():
        for held in pool._leases.values():
            assert all(lease.free >= 0 for lease in held)


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    for module in (leases, lease_closes, lease_folds):  # the pool's windows, the closes' pauses, the folds' times
        monkeypatch.setattr(module, "time", fake)
    return fake


class World:
    """One account served by many instances, each action one thing that happens to it."""

    def __init__(self, accounts, clock: Clock, monkeypatch, seed: int):
        self.accounts, self.clock, self.monkeypatch, self.seed = accounts, clock, monkeypatch, seed
        self.rng = random.Random(seed)
        accounts.users.create_user(username=f"money{seed}", quota=2_000_000, user_id=USER)
        limited_secret, _ = accounts.keys.create_key(USER, name="limited", quota=600_000)
        open_secret, _ = accounts.keys.create_key(USER, name="unlimited")
        self.limited = authenticate({"x-api-key": limited_secret})  # kept as a key cache keeps it
        self.unlimited = authenticate({"x-api-key": open_secret})
        self.book = Ledger(user_added=2_000_000, key_added=600_000)
        self.pools = {n: leases.LeasePool(holder=f"i{n}") for n in range(6)}
        self.next_instance, self.revoked_at, self.step = 6, None, 0

    def act(self) -> None:
        action = self.rng.choices(["hold", "settle", "refund", "tick", "crash", "torn", "sweep", "topup", "revoke"],
                                  weights=[40, 25, 8, 10, 3, 2, 3, 4, 1 if self.revoked_at is None else 0])[0]
        if action in ("settle", "refund", "torn") and not self.book.holds:
            action = "hold"
        getattr(self, action)()
        self.step += 1

    def hold(self) -> None:
        rng, book = self.rng, self.book
        instance = rng.choice(list(self.pools))
        principal = rng.choice([self.limited, self.unlimited])
        try:
            reservation = billing.reserve_request(
                principal, rng.choice([1, 50, 400, 3000, 20_000, 90_000]), model=rng.choice(["m-small", "m-large"]),
                route="test", request_id=f"s{self.seed}-r{self.step}", pool=self.pools[instance])
        except InsufficientQuota:
            book.refused_quota += 1
        except AuthenticationFailed:
            assert principal is self.limited and self.revoked_at is not None
            book.refused_revoked += 1
        else:
            # A revoked key takes no new lease: only one granted before it may still hold, within its window
            if principal is self.limited and self.revoked_at is not None:
                assert self.clock.mono - self.revoked_at <= leases.WINDOW_SECONDS
            book.holds.append((instance, reservation))

    def _pick(self) -> tuple[int, billing.Reservation]:
        return self.book.holds.pop(self.rng.randrange(len(self.book.holds)))

    def settle(self) -> None:
        instance, reservation = self._pick()
        price = self.rng.choice([0, reservation.units // 3, reservation.units, reservation.units * 2 + 7])
        assert billing.settle(reservation, price, pool=self.pools[instance]) is True
        assert billing.settle(reservation, price, pool=self.pools[instance]) is False  # once
        self.book.settled += 1

    def refund(self) -> None:
        instance, reservation = self._pick()
        assert billing.refund(reservation, reason="random", pool=self.pools[instance]) is True
        self.book.refunded += 1

    def tick(self) -> None:
        self.clock.advance(self.rng.choice([0.5, 2.0, 6.0]))

    def _replace(self, victim: int) -> None:
        """The instance is gone with its requests; a new one takes its place."""
        self.book.holds = [(i, r) for i, r in self.book.holds if i != victim]
        del self.pools[victim]
        self.pools[self.next_instance] = leases.LeasePool(holder=f"i{self.next_instance}")
        self.next_instance += 1

    def crash(self) -> None:
        self._replace(self.rng.choice(list(self.pools)))
        self.book.crashes += 1

    def torn(self) -> None:
        """The instance dies between the two writes of a close: the lease counted it, the entry is not written."""
        instance, reservation = self._pick()

        def dies(items: list[dict[str, Any]]) -> None:
            raise SystemExit("the instance died")

        put_entries = lease_closes.put_entries
        self.monkeypatch.setattr(lease_closes, "put_entries", dies)
        with pytest.raises(SystemExit):
            billing.settle(reservation, reservation.units // 2, pool=self.pools[instance])
        self.monkeypatch.setattr(lease_closes, "put_entries", put_entries)
        self._replace(instance)
        self.book.torn_closes += 1

    def sweep(self) -> None:
        """Requests end within their function's timeout: the live instances' holds close and their
        leases fold; then the sweeper, past every deadline, folds the dead ones'."""
        self.finish_requests("timed out")
        self.clock.advance(leases.WINDOW_SECONDS + leases.DRAIN_SECONDS + 2)
        self.book.folded_by_sweeper += billing.sweep_stale(now=self.clock.wall)["leases_folded"]
        assert billing.sweep_stale(now=self.clock.wall)["leases_folded"] == 0  # exactly once
        self.book.sweeps += 1

    def finish_requests(self, reason: str) -> None:
        for instance, reservation in self.book.holds:
            billing.refund(reservation, reason=reason, pool=self.pools[instance])
        self.book.holds.clear()
        for pool in self.pools.values():
            pool.release_all()

    def topup(self) -> None:
        if self.rng.random() < 0.5:
            units = self.rng.choice([10_000, 500_000])
            balances.add_user_quota(USER, units)
            self.book.user_added += units
        else:
            units = self.rng.choice([5_000, 200_000])
            self.accounts.keys.add_key_quota(self.limited.key_id, units)
            self.book.key_added += units

    def revoke(self) -> None:
        self.accounts.keys.revoke_key(self.limited.key_id)
        self.revoked_at = self.clock.mono

    def check(self) -> None:
        for pool in self.pools.values():
            pool.wait_renewals()
        check(self.accounts, self.book, self.limited, self.pools)


@pytest.mark.parametrize("seed", [21, 2100, 421])
def test_random_interleavings_of_many_instances_create_and_lose_no_unit(store, accounts, clock, monkeypatch, seed):
    world = World(accounts, clock, monkeypatch, seed)
    for _ in range(260):
        world.act()
        world.check()
    # The end: every request closes, every instance goes idle, the sweeper passes; all is folded
    world.sweep()
    world.check()
    assert holds.open_leases(USER) == []
    profile = accounts.users.raw_user(USER, consistent=True)
    assert profile["quota"] + profile["used_quota"] == world.book.user_added
    assert sum(int(e["units"]) for e in accounts.usage.ledger(USER)) == profile["used_quota"]
    # The run did what it says (a seed that never settles or crashes proves little)
    book = world.book
    assert book.settled > 20 and book.crashes + book.torn_closes > 0 and book.sweeps > 1 and book.folded_by_sweeper > 0


def test_a_top_up_is_seen_by_the_next_request_and_a_revocation_within_the_window(store, accounts, clock):
    accounts.users.create_user(username="topup", quota=1000, user_id=USER)
    secret, _ = accounts.keys.create_key(USER, name="k", quota=None)
    principal = authenticate({"x-api-key": secret})
    pool = leases.LeasePool(holder="one")
    first = billing.reserve_request(principal, 900, model="m-small", route="test", request_id="a", pool=pool)
    with pytest.raises(InsufficientQuota):
        billing.reserve_request(principal, 900, model="m-small", route="test", request_id="b", pool=pool)
    balances.add_user_quota(USER, 5000)
    billing.reserve_request(principal, 900, model="m-small", route="test", request_id="c", pool=pool)
    billing.settle(first, 100, pool=pool)
    accounts.keys.revoke_key(principal.key_id)
    clock.advance(leases.WINDOW_SECONDS + 0.1)
    with pytest.raises(AuthenticationFailed):
        billing.reserve_request(principal, 10, model="m-small", route="test", request_id="d", pool=pool)


def test_what_users_read_includes_the_open_leases_the_moment_a_request_closes(store, accounts, clock):
    accounts.users.create_user(username="reader", quota=100_000, user_id=USER)
    secret, _ = accounts.keys.create_key(USER, name="k", quota=50_000)
    principal = authenticate({"x-api-key": secret})
    pool = leases.LeasePool(holder="one")
    held = billing.reserve_request(principal, 700, model="m-small", route="test", request_id="seen", pool=pool)
    assert accounts.users.raw_user(USER, consistent=True)["quota"] < 100_000 - 700  # the lease took a slice
    billing.settle(held, 300, pool=pool)
    user = balances.get_user(USER)
    assert (user["quota"], user["used_quota"], user["request_count"]) == (100_000 - 300, 300, 1)
    key = balances.get_key(principal.key_hash)
    assert (key["remain_quota"], key["used_quota"]) == (50_000 - 300, 300)
    assert balances.usage(USER).units == 300 and balances.usage(USER).requests == 1
    assert [e["request_id"] for e in accounts.usage.ledger(USER)] == ["seen"]
    # Folded, the same figures come from the items alone
    pool.release_all()
    assert holds.open_leases(USER) == []
    raw = accounts.users.raw_user(USER, consistent=True)
    assert (raw["quota"], raw["used_quota"], raw["request_count"]) == (100_000 - 300, 300, 1)
    assert balances.usage(USER).units == 300


def test_a_hold_makes_no_dynamodb_call_while_the_lease_has_the_units(store, accounts, clock):
    accounts.users.create_user(username="quiet", quota=10_000_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    calls: list[str] = []
    db = client("dynamodb")
    billing.reserve_request(principal, 100, model="m-small", route="test", request_id="warm", pool=pool)

    def count(**kwargs: Any) -> None:
        calls.append(kwargs["model"].name)

    db.meta.events.register("before-call.dynamodb", count)
    try:
        for n in range(3):
            billing.reserve_request(principal, 100, model="m-small", route="test", request_id=f"q{n}", pool=pool)
    finally:
        db.meta.events.unregister("before-call.dynamodb", count)
    assert calls == []


def test_a_limited_key_short_of_the_hold_is_refused_naming_the_keys_own_remaining_quota(store, accounts, clock):
    # Given an account with plenty of quota and a key limited to 500 units
    accounts.users.create_user(username="keyshort", quota=100_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k", quota=500)[0]})
    pool = leases.LeasePool(holder="one")
    # When a request needs 900 units
    with pytest.raises(InsufficientQuota) as refused:
        billing.reserve_request(principal, 900, model="m-small", route="test", request_id="big", pool=pool)
    # Then the refusal names the key's own remaining quota, and nothing moved
    assert "this key's remaining quota is $0.001 (500 units)" in refused.value.message
    assert balances.get_key(principal.key_hash)["remain_quota"] == 500
    assert balances.get_user(USER)["quota"] == 100_000
    assert holds.open_leases(USER) == []


def test_a_lease_settlement_reports_the_units_billed_metric_and_a_lease_refund_does_not(store, accounts, clock, capsys):

    from gateway import observability

    # Given a key whose requests hold on a quota lease, and an empty metrics buffer
    accounts.users.create_user(username="metered", quota=100_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    observability.flush()
    capsys.readouterr()
    # When one request settles at 120 units and another is refunded, both on the lease
    settled = billing.reserve_request(principal, 300, model="m-small", route="test", request_id="ls", pool=pool)
    refunded = billing.reserve_request(principal, 300, model="m-small", route="test", request_id="lr", pool=pool)
    billing.settle(settled, 120, pool=pool)
    billing.refund(refunded, pool=pool)
    observability.flush()
    # Then the EMF output carries UnitsBilled 120 once, for the settlement alone
    billed = [doc["UnitsBilled"] for doc in map(json.loads, filter(None, capsys.readouterr().out.splitlines()))
              if "UnitsBilled" in doc]
    assert billed == [[120.0]]


def _settled_in_one_window(accounts, username: str, requests: int) -> tuple[Principal, leases.LeasePool]:
    """A rich account whose one instance held and settled `requests` requests of 10 units, all at once."""
    accounts.users.create_user(username=username, quota=10_000_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    for n in range(requests):
        billing.settle(billing.reserve_request(principal, 10, model="m-small", route="test",
                                               request_id=f"{username}{n}", pool=pool), 10, pool=pool)
    pool.wait_renewals()
    return principal, pool


def test_a_new_lease_is_sized_by_the_holds_of_the_last_window(store, accounts, clock):
    # Given an instance that held 100 requests of 10 units for one account within one window
    principal, pool = _settled_in_one_window(accounts, "busy", 100)
    # When the window is over and the next request asks for a lease
    clock.advance(leases.WINDOW_SECONDS + 0.1)
    pool.fold_idle()
    assert holds.open_leases(USER) == []
    billing.reserve_request(principal, 10, model="m-small", route="test", request_id="next", pool=pool)
    # Then its lease holds as many requests as the last window did (100), not the default 64
    assert [lease["granted"] for lease in holds.open_leases(USER)] == [100 * 10]


def test_a_lease_is_renewed_in_the_background_once_less_than_a_quarter_of_it_is_free(store, accounts, clock):
    # Given a lease of 64 holds of 10 units (640), taken down to exactly a quarter free (160)
    principal, pool = _settled_in_one_window(accounts, "renew", 48)
    # Then no second lease was asked for yet
    assert [lease["granted"] for lease in holds.open_leases(USER)] == [640]
    # When one more hold leaves less than a quarter free
    billing.reserve_request(principal, 10, model="m-small", route="test", request_id="r48", pool=pool)
    pool.wait_renewals()
    # Then the next lease is granted in the background
    assert len(holds.open_leases(USER)) == 2


def test_ledger_entries_dynamodb_leaves_unprocessed_are_written_again_after_a_growing_wait(
        store, accounts, clock, monkeypatch):
    # Given DynamoDB answering the ledger's first two batch writes with every item unprocessed
    accounts.users.create_user(username="throttled", quota=100_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    held = billing.reserve_request(principal, 300, model="m-small", route="test", request_id="slow", pool=pool)
    db, throttled, waits = client("dynamodb"), [2], []

    class Throttling:
        def __getattr__(self, name: str) -> Any:
            return getattr(db, name)

        def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
            if throttled[0]:
                throttled[0] -= 1
                return {"UnprocessedItems": kwargs["RequestItems"]}
            return db.batch_write_item(**kwargs)

    monkeypatch.setattr(lease_closes, "_db", Throttling)
    monkeypatch.setattr(clock, "sleep", waits.append, raising=False)
    # When the request settles
    billing.settle(held, 120, pool=pool)
    # Then its entry is in the ledger, written after waits of 5 ms then 10 ms (backing off)
    assert [(e["request_id"], int(e["units"])) for e in accounts.usage.ledger(USER)] == [("slow", 120)]
    assert waits == [0.005, 0.01]


def test_closes_waiting_behind_a_lease_write_go_out_together_up_to_fifty_a_batch(store, accounts, clock, monkeypatch):
    import threading
    import time as real_time

    # Given 51 requests held on one lease, and the first close's write held up
    accounts.users.create_user(username="batched", quota=1_000_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    held = [billing.reserve_request(principal, 10, model="m-small", route="test", request_id=f"b{n}", pool=pool)
            for n in range(51)]
    lease = pool._leases[(USER, principal.key_hash)][0]
    write, gate, sizes = lease_closes._write_batch, threading.Event(), []

    def held_up(lease_: lease_closes.Lease, batch: list) -> None:
        sizes.append(len(batch))
        if len(sizes) == 1:
            gate.wait(60)
        write(lease_, batch)

    monkeypatch.setattr(lease_closes, "_write_batch", held_up)
    threads = [threading.Thread(target=billing.settle, args=(reservation, 10), kwargs={"pool": pool})
               for reservation in held]
    threads[0].start()
    deadline = real_time.monotonic() + 60
    while not sizes and real_time.monotonic() < deadline:
        real_time.sleep(0.01)
    # When the other 50 close while it is being written
    for thread in threads[1:]:
        thread.start()
    while len(lease.queue) < 50 and real_time.monotonic() < deadline:
        real_time.sleep(0.01)
    gate.set()
    for thread in threads:
        thread.join(60)
    # Then they are written as one batch of 50, and every one is billed once
    assert sizes == [1, 50]
    assert len(accounts.usage.ledger(USER)) == 51
    assert balances.get_user(USER)["used_quota"] == 510


def test_the_entries_a_lease_carries_read_back_whole():
    # A lease carries its last batch's entries without their index keys (rebuilt from the entry's
    # own fields, as the fold writes them)
    from datetime import UTC, datetime

    from gateway.admission.ledger import Reservation, entry

    held = Reservation(reservation_id="r1", user_id=USER, key_hash="h" * 64, key_id="key1", limited_key=False,
                       units=10, model="m-small", route="test", lease_id="l1")
    whole = entry(held, "settled", 5, {"price": 1.25, "stream": False}, datetime(2026, 11, 24, tzinfo=UTC),
                  shortfall=0, log_type=2)
    carried = lease_closes._carried(whole)
    assert not set(carried) & {"gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk"}
    lease = {"user_id": USER, "last_entries": [carried]}
    assert lease_closes.carried_entries(lease) == [to_item(whole)]
    assert lease_closes.carried_entries({"user_id": USER, "status": "open"}) == []


def _concurrent_closes(accounts, monkeypatch, *, holds: int, closing: int, linger: float):
    """`holds` requests held on one instance's lease, `closing` of them settled at once from their
    own threads: the batches written, and how long the closes took."""
    import threading

    accounts.users.create_user(username="batches", quota=1_000_000, user_id=USER)
    secret, _ = accounts.keys.create_key(USER, name="k", quota=None)
    principal = authenticate({"x-api-key": secret})
    pool = leases.LeasePool(holder="one")
    held = [billing.reserve_request(principal, 100, model="m-small", route="test", request_id=f"b{n}", pool=pool)
            for n in range(holds)]
    batches: list[int] = []
    write_batch = lease_closes._write_batch
    monkeypatch.setattr(lease_closes, "_write_batch", lambda lease, batch: batches.append(len(batch)) or
                        write_batch(lease, batch))
    monkeypatch.setattr(lease_closes, "LINGER_SECONDS", linger)
    start = threading.Barrier(closing)

    def close(reservation: billing.Reservation) -> None:
        start.wait()
        assert billing.settle(reservation, 40, pool=pool) is True

    threads = [threading.Thread(target=close, args=(reservation,)) for reservation in held[:closing]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)  # a hang guard, not a measure: a close that sat out an hour's linger
    assert not any(thread.is_alive() for thread in threads), "a close waited out the linger"
    assert {entry["request_id"] for entry in accounts.usage.ledger(USER)} == {f"b{n}" for n in range(closing)}
    return batches


def test_closes_of_one_lease_at_once_are_written_as_one_batch(store, accounts, monkeypatch):
    # Given four requests held on one lease, all settled at the same moment
    # (with a linger of an hour: were the batch to wait it out, the closes would never return)
    batches = _concurrent_closes(accounts, monkeypatch, holds=4, closing=4, linger=3600.0)
    # Then one batch carries them all, written as soon as the last joined (not after the linger)
    assert batches == [4]


def test_a_batch_of_closes_adds_every_close_to_the_lease_day_counters(store, accounts, monkeypatch):
    # Given four requests of one key and model held on one lease, settled at once at 40 units each
    batches = _concurrent_closes(accounts, monkeypatch, holds=4, closing=4, linger=3600.0)
    assert batches == [4]
    # Then the open lease's day counters (what usage reads before the lease folds) hold the four
    # closes summed: 160 units and 4 requests for the user, the key and the model, not one close's
    lease = next(item for pk in lease_pks(USER) for item in _items(pk) if item.get("status") == holds.OPEN)
    counters = {name: int(value) for name, value in lease.items() if name.startswith("c|")}
    assert counters and {name: value for name, value in counters.items() if not name.endswith("units")} == \
        {name: 4 for name in counters if not name.endswith("units")}
    assert {name: value for name, value in counters.items() if name.endswith("units")} == \
        {name: 160 for name in counters if name.endswith("units")}


def test_a_batch_waits_a_moment_for_the_lease_other_open_holds_and_no_longer(store, accounts, monkeypatch):
    # Given five requests held on one lease, three settled at once while two are still running
    batches = _concurrent_closes(accounts, monkeypatch, holds=5, closing=3, linger=0.3)
    # Then the three are one batch, written once the linger ran out (the two open holds never join)
    assert batches == [3]


def test_the_lease_only_hold_is_written_at_once(store, accounts, monkeypatch):
    # Given one request on its lease (one request per instance, as deployed)
    batches = _concurrent_closes(accounts, monkeypatch, holds=1, closing=1, linger=3600.0)
    # Then its close waits for no one (an hour's linger never sat out)
    assert batches == [1]


def test_a_close_on_a_lease_the_sweeper_folded_is_refused_and_writes_no_entry(store, accounts):
    # Given a request held on a lease that is folded under it (its instance froze past hold_until)
    accounts.users.create_user(username="frozen", quota=100_000, user_id=USER)
    secret, _ = accounts.keys.create_key(USER, name="k", quota=None)
    principal = authenticate({"x-api-key": secret})
    pool = leases.LeasePool(holder="frozen")
    held = billing.reserve_request(principal, 500, model="m-small", route="test", request_id="late", pool=pool)
    assert lease_folds.fold(USER, held.lease_id, reason="swept: its holder stopped") is True
    # When its close comes after all
    with pytest.raises(RuntimeError, match="refused a batch"):
        billing.settle(held, 300, pool=pool)
    # Then nothing is billed for it: no entry, and the quota is whole again
    assert [entry for entry in accounts.usage.ledger(USER) if entry["request_id"] == "late"] == []
    profile = accounts.users.raw_user(USER, consistent=True)
    assert profile["quota"] == 100_000 and profile["used_quota"] == 0


def test_a_lease_whose_key_is_gone_still_folds_its_units_back_to_the_user(store, accounts):
    # Given a settled request on a lease, and its key's item gone before the lease folds
    accounts.users.create_user(username="keyless", quota=100_000, user_id=USER)
    secret, _ = accounts.keys.create_key(USER, name="k", quota=None)
    principal = authenticate({"x-api-key": secret})
    pool = leases.LeasePool(holder="one")
    held = billing.reserve_request(principal, 500, model="m-small", route="test", request_id="kd", pool=pool)
    assert billing.settle(held, 300, pool=pool) is True
    client("dynamodb").delete_item(TableName=get_settings().accounts_table,
                                   Key=to_item({"pk": key_pk(principal.key_hash), "sk": "KEY"}))
    # When the lease folds
    assert lease_folds.fold(USER, held.lease_id, reason="drained") is True
    # Then the user has back what it did not spend, and the spend is used
    profile = accounts.users.raw_user(USER, consistent=True)
    assert profile["quota"] == 100_000 - 300 and profile["used_quota"] == 300
    assert holds.open_leases(USER) == []


def test_a_grant_other_instances_keep_outrunning_halves_its_ask_three_times_then_refuses(store, accounts, clock,
                                                                                        monkeypatch):
    """Each grant attempt finds less left than it asks (other instances took it meanwhile): the ask
    drops to half of what is left, at least the hold, and after three attempts the request is
    refused, so a hold never spins against a quota others keep draining."""
    accounts.users.create_user(username="outrun", quota=100_000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    asked: list[int] = []

    def outrun(principal_, units):  # what the conditional write finds: 10 000 units left
        asked.append(units)
        raise leases._Short(10_000, None)

    monkeypatch.setattr(pool, "_grant_once", outrun)
    with pytest.raises(InsufficientQuota, match="remaining quota is too low"):
        billing.reserve_request(principal, 1_000, model="m-small", route="test", request_id="outrun", pool=pool)
    assert len(asked) == 3 and asked[0] > 10_000 and asked[1:] == [5_000, 5_000]
    assert balances.get_user(USER)["quota"] == 100_000 and holds.open_leases(USER) == []


def test_a_lease_is_renewed_in_the_background_in_the_last_second_of_its_window(store, accounts, clock):
    # Given a lease with nearly all of it free
    principal, pool = _settled_in_one_window(accounts, "late", 1)
    assert len(holds.open_leases(USER)) == 1
    # When a hold comes in the last second of its window
    clock.advance(leases.WINDOW_SECONDS - leases.RENEW_SECONDS / 2)
    billing.reserve_request(principal, 10, model="m-small", route="test", request_id="late-1", pool=pool)
    pool.wait_renewals()
    # Then the next lease is granted in the background
    assert len(holds.open_leases(USER)) == 2


def test_a_second_hold_under_an_open_requests_id_is_refused_and_takes_nothing(store, accounts, clock):
    principal, pool = _settled_in_one_window(accounts, "twice", 1)
    first = billing.reserve_request(principal, 10, model="m-small", route="test", request_id="same", pool=pool)
    with pytest.raises(billing.Conflict):
        billing.reserve_request(principal, 10, model="m-small", route="test", request_id="same", pool=pool)
    (lease,) = [lease for leases_ in pool._leases.values() for lease in leases_]
    assert (lease.held, lease.holds) == (10, 1)  # the first hold's alone
    assert billing.settle(first, 10, pool=pool)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_grant_refused_for_a_disabled_user_says_so_whatever_its_keys_status(store, accounts, clock, when):
    # Disabling a user disables its keys; a key made after that is active, its user still disabled.
    accounts.users.create_user(username="off", quota=10_000, user_id=USER)
    if when == "before":
        principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
        accounts.users.set_user_enabled(USER, False)  # after the key cache read the key
    else:
        accounts.users.set_user_enabled(USER, False)
        principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    with pytest.raises(AuthenticationFailed) as refused:
        billing.reserve_request(principal, 10, model="m-small", route="test", request_id="off-1",
                                pool=leases.LeasePool(holder="one"))
    assert refused.value.message == USER_DISABLED


def test_a_price_above_the_hold_past_the_lease_records_what_went_unpaid(store, accounts, clock):
    # Given a user whose whole quota (1000) is one request's hold, so its lease has no more
    accounts.users.create_user(username="edge", quota=1000, user_id=USER)
    principal = authenticate({"x-api-key": accounts.keys.create_key(USER, name="k")[0]})
    pool = leases.LeasePool(holder="one")
    held = billing.reserve_request(principal, 1000, model="m-small", route="test", request_id="edge-1", pool=pool)
    # When the real price is 5000
    assert billing.settle(held, 5000, pool=pool)
    pool.release_all()
    # Then it is charged the 1000 there were, and the entry says 4000 went unpaid
    (entry,) = accounts.usage.ledger(USER)
    assert (entry["units"], entry["shortfall"]) == (1000, 4000)
    assert balances.get_user(USER)["quota"] == 0


def test_reading_an_account_with_its_leases_gives_up_after_five_rereads(store, accounts, monkeypatch):
    # (a lease granted or folded between every pair of reads, for ever: the last read is answered)
    reads = []
    monkeypatch.setattr(balances, "open_leases", lambda user_id: reads.append(1) or [{"lease_id": str(len(reads))}])
    result, found = balances.with_open_leases(USER, lambda: "profile")
    assert result == "profile" and len(reads) == 1 + 5
