"""The three video simulators mounted the way the local runner mounts them, behind one client."""

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway_local.simulators import alpha, beta, delta, epsilon, gamma, zeta

SIM = "http://sim.test"
SIMULATORS = {"delta": delta, "zeta": zeta, "epsilon": epsilon, "gamma": gamma, "beta": beta, "alpha": alpha}


class Clock:
    """Simulated time, so a task's life is walked through without waiting for it."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setenv("GATEWAY_SIM_TASK_SECONDS", "3")
    for module in SIMULATORS.values():
        monkeypatch.setattr(module, "clock", fake)
    return fake


class SyncASGITransport(httpx.BaseTransport):
    """httpx.ASGITransport for a sync client (the adapters' callers are sync): no sockets."""

    def __init__(self, app) -> None:
        self._inner = httpx.ASGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def send() -> httpx.Response:
            answer = await self._inner.handle_async_request(request)
            return httpx.Response(answer.status_code, headers=answer.headers, content=await answer.aread())
        return asyncio.run(send())


def asgi_client(app, base_url: str = SIM) -> httpx.Client:
    return httpx.Client(transport=SyncASGITransport(app), base_url=base_url)


@pytest.fixture
def sim():
    """An httpx client whose every request reaches the simulators mounted at /<protocol>."""
    outer = Starlette(routes=[Mount(f"/{name}", app=module.app) for name, module in SIMULATORS.items()])
    with asgi_client(outer) as client:
        yield client
