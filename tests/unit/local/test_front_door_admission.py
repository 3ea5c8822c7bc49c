"""The runner's admission of new connections (`gateway_local.front_door.Admission`), on a clock
the test moves: the token bucket per address and the penalty after repeated 431s (issue 33)."""

from __future__ import annotations

from gateway_local.front_door import Admission


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_gets_its_burst_then_one_connection_per_token_and_another_address_its_own():
    clock = Clock()
    door = Admission(rate=2, burst=4, strikes=3, penalty=10, clock=clock)
    assert [door.admit("10.0.0.1") for _ in range(5)] == [None, None, None, None, "rate"]
    assert door.admit("10.0.0.2") is None  # another address has its own bucket
    assert door.admit("10.0.0.1") == "rate"  # a refusal takes no token and gives none back
    clock.now += 0.5  # one token at 2 a second
    assert [door.admit("10.0.0.1") for _ in range(2)] == [None, "rate"]
    clock.now += 60  # a bucket refills to its burst, never past it
    assert [door.admit("10.0.0.1") for _ in range(5)] == [None, None, None, None, "rate"]


def test_the_third_431_within_the_penalty_time_refuses_the_address_for_that_time():
    clock = Clock()
    door = Admission(rate=100, burst=200, strikes=3, penalty=10, clock=clock)
    door.struck("10.0.0.1")
    door.struck("10.0.0.1")
    assert door.admit("10.0.0.1") is None  # two 431s: a client that sent too many headers twice
    door.struck("10.0.0.1")
    assert door.admit("10.0.0.1") == "penalty"
    assert door.admit("10.0.0.2") is None  # only that address
    clock.now += 9.9
    assert door.admit("10.0.0.1") == "penalty"
    clock.now += 0.2
    assert door.admit("10.0.0.1") is None  # the penalty ends, the strikes are spent


def test_strikes_older_than_the_penalty_time_do_not_count():
    clock = Clock()
    door = Admission(rate=100, burst=200, strikes=3, penalty=10, clock=clock)
    door.struck("10.0.0.1")
    door.struck("10.0.0.1")
    clock.now += 11
    door.struck("10.0.0.1")
    assert door.admit("10.0.0.1") is None


def test_many_addresses_are_forgotten_once_their_state_is_the_default(monkeypatch):
    from gateway_local import front_door

    monkeypatch.setattr(front_door, "MAX_TRACKED_ADDRESSES", 10)
    clock = Clock()
    door = Admission(rate=1, burst=2, strikes=1, penalty=10, clock=clock)
    for n in range(10):
        door.admit(f"10.0.1.{n}")
    door.struck("10.0.0.9")
    clock.now += 5  # every bucket full again; the penalty still on
    door.admit("10.0.2.1")
    assert len(door._buckets) <= 2
    assert door.admit("10.0.0.9") == "penalty"  # a penalty is never forgotten early
