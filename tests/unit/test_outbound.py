"""The shared event loop and client of upstream calls (no sockets: the calls never send)."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from gateway.routing import outbound


async def _client_and_loop(http: httpx.AsyncClient):
    await asyncio.sleep(0.01)
    return http, asyncio.get_running_loop()


def test_every_call_from_every_thread_shares_one_client_and_one_loop():
    # When sixteen calls run from eight threads at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        seen = list(pool.map(lambda _: outbound.run(_client_and_loop), range(16)))
    # Then they all ran on the same loop with the same client, which stays open for the next
    assert len({id(client) for client, _ in seen}) == 1 and len({id(loop) for _, loop in seen}) == 1
    client, _ = seen[0]
    assert not client.is_closed and outbound.run(_client_and_loop)[0] is client


def test_a_call_that_fails_raises_its_own_exception_in_the_caller():
    async def fail(_http):
        raise LookupError("upstream said no")

    with pytest.raises(LookupError, match="upstream said no"):
        outbound.run(fail)
    assert outbound.run(lambda http: _client_and_loop(http))[0] is not None
