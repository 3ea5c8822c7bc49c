"""`no_wait`: what a request needs before its upstream call runs on the event loop when the
instance has it in memory, and asks for a worker thread (`WouldWait`) before any AWS call, with
nothing half done."""

from __future__ import annotations

import pytest

from gateway import auth
from gateway.admission import billing, leases
from gateway.routing import health
from gateway.store import holds
from gateway.store.aws import WouldWait, client, no_wait
from tests.conftest import use_environment


@pytest.fixture
def key_cache():
    """The key cache on, as deployed (the suite runs with it off)."""
    saved = use_environment(GATEWAY_KEY_CACHE_SECONDS="30")
    auth.clear_cache()
    yield
    use_environment(**saved)
    auth.clear_cache()


def test_no_aws_call_starts_under_no_wait(store):
    with no_wait(), pytest.raises(WouldWait):
        client("dynamodb")
    assert client("dynamodb") is not None  # and again outside it


def test_a_cached_key_is_checked_without_a_call_an_uncached_one_asks_for_a_thread(demo, key_cache, monkeypatch):
    headers = {"authorization": f"Bearer {demo['key']}"}
    # Given a key this instance has never read
    with no_wait(), pytest.raises(WouldWait):
        auth.authenticate(headers)
    # When a thread reads it (and stamps its last use)
    assert auth.authenticate(headers).user_id == 1
    # Then the next check needs no call
    with no_wait():
        assert auth.authenticate(headers).user_id == 1
    # And a stamp that falls due under no_wait is left to the thread, not skipped
    monkeypatch.setattr(auth, "_LAST_USED_EVERY", 0)
    stamped = []
    monkeypatch.setattr(auth.KeysRepository, "touch_key", lambda self, key_hash, now: stamped.append(now))
    with no_wait(), pytest.raises(WouldWait):
        auth.authenticate(headers)
    auth.authenticate(headers)
    assert len(stamped) == 1


def test_a_hold_without_a_lease_in_hand_asks_for_a_thread_and_holds_nothing(demo, key_cache):
    principal = auth.authenticate({"authorization": f"Bearer {demo['key']}"})
    pool = leases.LeasePool(holder="loop")
    # Given no lease yet: the hold would need a grant
    with no_wait(), pytest.raises(WouldWait):
        billing.reserve_request(principal, 100, model="m-small", route="test", request_id="w1", pool=pool)
    assert pool._open == {} and holds.open_leases(1) == []
    # When a thread holds (a lease is granted), the next holds come from it without a call
    first = billing.reserve_request(principal, 100, model="m-small", route="test", request_id="w1", pool=pool)
    with no_wait():
        second = billing.reserve_request(principal, 100, model="m-small", route="test", request_id="w2", pool=pool)
    assert second.lease_id == first.lease_id
    # And both close as ever
    assert billing.settle(first, 60, pool=pool) and billing.settle(second, 70, pool=pool)


def test_stale_channel_health_is_read_on_a_thread_not_marked_fresh_unread(store):
    book = health.book()
    book.forget()
    with no_wait(), pytest.raises(WouldWait):
        book.snapshot()
    assert book._read_at is None  # still to be read
    book.snapshot()
    with no_wait():
        book.snapshot()


def test_a_hold_does_not_wait_on_the_loop_for_another_thread_grant(demo, key_cache):
    import threading

    principal = auth.authenticate({"authorization": f"Bearer {demo['key']}"})
    billing.reserve_request(principal, 100, model="m-small", route="test", request_id="warm",
                            pool=leases.LeasePool(holder="warm"))  # the user's limits read once
    pool = leases.LeasePool(holder="loop")
    # Given another thread's grant for the account in flight
    pool._grants[(principal.user_id, principal.key_hash)] = threading.Event()
    # Then a hold under no_wait asks for a thread at once instead of waiting for it
    seen: list[BaseException] = []

    def hold() -> None:
        try:
            with no_wait():
                billing.reserve_request(principal, 100, model="m-small", route="test", request_id="w3", pool=pool)
        except BaseException as exc:  # noqa: BLE001 - the test reads what it was
            seen.append(exc)

    waiter = threading.Thread(target=hold, daemon=True)
    waiter.start()
    waiter.join(timeout=5)
    assert not waiter.is_alive(), "the hold waited for the other thread's grant"
    assert [type(exc) for exc in seen] == [WouldWait] and pool._open == {}


def test_here_unless_it_waits_runs_on_the_loop_and_moves_to_a_thread_only_for_an_aws_call(store):
    import threading

    import anyio

    from gateway.store.aws import here_unless_it_waits

    def where(needs_aws: bool) -> str:
        if needs_aws:
            client("dynamodb")
        return threading.current_thread().name

    async def both() -> tuple[str, str, str]:
        return (threading.current_thread().name, await here_unless_it_waits(where, False),
                await here_unless_it_waits(where, True))

    loop_thread, in_memory, with_aws = anyio.run(both)
    assert in_memory == loop_thread and with_aws != loop_thread
