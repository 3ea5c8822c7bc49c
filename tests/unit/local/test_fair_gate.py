"""The streaming function's instances are lent round-robin across principals."""

from __future__ import annotations

import asyncio

from gateway_local.instances import FairGate


def test_waiting_principals_are_let_in_one_each_in_turn():
    async def scenario() -> list[str]:
        gate, order = FairGate(1), []
        await gate.acquire("holder")

        async def request(principal: str) -> None:
            await gate.acquire(principal)
            order.append(principal)
            await asyncio.sleep(0)
            gate.release()

        flood = [asyncio.create_task(request("flood")) for _ in range(5)]
        await asyncio.sleep(0)
        other = asyncio.create_task(request("other"))
        await asyncio.sleep(0)
        gate.release()
        await asyncio.gather(*flood, other)
        return order

    order = asyncio.run(scenario())
    assert order[:2] == ["flood", "other"] and order.count("flood") == 5


def test_a_cancelled_waiter_leaves_the_line_and_a_place_is_never_lost():
    async def scenario() -> tuple[int, int]:
        gate = FairGate(1)
        await gate.acquire("a")
        waiter = asyncio.create_task(gate.acquire("b"))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        waiting = gate.waiting
        gate.release()
        await asyncio.wait_for(gate.acquire("c"), 1)  # the place is free again
        return waiting, gate.busy

    assert asyncio.run(scenario()) == (0, 1)
