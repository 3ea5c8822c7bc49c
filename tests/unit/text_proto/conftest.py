"""Fixtures for the text protocol tests: the three simulators behind a real HTTP server.

httpx's ASGITransport hands back a response only once the app has finished, so anything about
streaming timing (first byte, idle gaps, a consumer that leaves) runs against uvicorn on
127.0.0.1 instead.
"""

import socket
import threading
import time

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway_local.simulators import chat, content, messages


def simulators_app() -> Starlette:
    # Mounted the way the local runner mounts them: /<protocol>.
    return Starlette(routes=[Mount("/chat", chat.app), Mount("/messages", messages.app),
                             Mount("/content", content.app)])


@pytest.fixture(scope="session")
def sim_url():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(simulators_app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "simulator server did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=5)
    sock.close()


@pytest.fixture(autouse=True)
def fast_simulators(monkeypatch):
    """Streams paced at 1 ms a token and a 1 s slow fault, unless a test says otherwise."""
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "1")
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "1")
