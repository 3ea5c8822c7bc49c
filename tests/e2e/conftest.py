"""The local gateway (`python -m gateway_local`, what `make run` starts) as a subprocess, over real HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO_KEY = "sk-e2e" + "k" * 44
DEMO_ACCESS_TOKEN = "e2e-access-token"
DEMO_QUOTA = 500_000_000  # 1000 USD


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalGateway:
    def __init__(self, extra_env: dict[str, str] | None = None):
        # Its own state directory unless told: never the checkout's .local/state of `make run`.
        given = (extra_env or {}).get("GATEWAY_LOCAL_STATE_DIR")
        self.state_dir = given or tempfile.mkdtemp(prefix="gateway-state-")
        self._own_state_dir = not given
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Its own endpoint file, so a test gateway never takes over that of a developer's `make run`
        self.endpoint_file = Path(tempfile.mkdtemp(prefix="gateway-e2e-")) / "gateway.json"
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        env.update({
            "PORT": str(self.port), "GATEWAY_SIMULATOR_PORT": str(free_port()), "GATEWAY_DEMO_KEY": DEMO_KEY,
            "GATEWAY_DEMO_QUOTA": str(DEMO_QUOTA), "GATEWAY_DEMO_ACCESS_TOKEN": DEMO_ACCESS_TOKEN,
            "GATEWAY_LOCAL_SCHEDULE_SECONDS": "1", "GATEWAY_SIM_TASK_SECONDS": "2", "GATEWAY_SIM_TOKEN_DELAY_MS": "1",
            "GATEWAY_LOCAL_ENDPOINT_FILE": str(self.endpoint_file), "GATEWAY_LOCAL_STATE_DIR": self.state_dir,
            "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(
                [str(ROOT / "layers" / "gateway"), str(ROOT / "local"), os.environ.get("PYTHONPATH", "")]),
            **(extra_env or {}),
        })
        self.process = subprocess.Popen([sys.executable, "-m", "gateway_local"], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        self._interrupted = False
        # A hang guard, not a clock: on a loaded machine every serving process must import the
        # functions and read the demo key before "ready" (processes.py), which can take a minute.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            if "gateway ready on" in line:
                break
        else:  # pragma: no cover
            self.stop()
            raise RuntimeError("the local gateway did not start in time:\n" + "".join(self.output))
        if not any("gateway ready on" in line for line in self.output):
            self.stop()
            raise RuntimeError("the local gateway did not start:\n" + "".join(self.output))
        # keep draining its output so it never blocks on a full pipe
        import threading
        threading.Thread(target=self._drain, daemon=True).start()

    @property
    def emulator_url(self) -> str:
        """The AWS emulator's endpoint, as the runner announces it."""
        line = next(line for line in self.output if "AWS emulator:" in line)
        return line.split("AWS emulator:", 1)[1].strip()

    def admin(self, *args: str) -> dict:
        """`python -m gateway.admin ...` against this gateway's emulator; its JSON answer."""
        env = {**os.environ, "AWS_ENDPOINT_URL": self.emulator_url, "ACCOUNTS_TABLE": "AccountsTable",
               "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
               "PYTHONPATH": str(ROOT / "layers" / "gateway")}
        env.pop("AWS_SESSION_TOKEN", None)
        done = subprocess.run([sys.executable, "-m", "gateway.admin", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.output.append(line)

    def release(self) -> None:
        """A fixture's teardown: asks the gateway to stop as Ctrl-C does and goes on without waiting
        for its shutdown (seconds each, thirty gateways a suite); `_reap_released` waits for every
        released one, and removes its state, before the session ends."""
        self._interrupt()
        RELEASED.append(self)

    def _interrupt(self) -> None:
        """Ctrl-C, once: a second one would make the runner's server skip its graceful shutdown."""
        if self.process.poll() is None and not self._interrupted:
            self._interrupted = True
            self.process.send_signal(signal.SIGINT)

    def stop(self) -> int:
        self._interrupt()
        if self.process.poll() is None:
            try:
                # A hang guard, not a clock: the runner's own shutdown may take its serving processes'
                # 20 s, its loops' 5 s each and the emulator's save (up to 60 s) on a loaded machine.
                self.process.wait(timeout=150)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.process.kill()
                self.process.wait()
        if self._own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        return self.process.returncode


RELEASED: list[LocalGateway] = []


@pytest.fixture(scope="session", autouse=True)
def _reap_released():
    """Every gateway a fixture released has stopped (and its state is gone) before the session ends."""
    yield
    while RELEASED:
        RELEASED.pop().stop()


@pytest.fixture(scope="session")
def gateway():
    server = LocalGateway()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gateway_url(gateway) -> str:
    return gateway.url


@pytest.fixture(scope="session")
def demo_key() -> str:
    return DEMO_KEY


@pytest.fixture
def openai_client(gateway_url, demo_key):
    """The official openai SDK pointed at the gateway, with no retries of its own."""
    import openai

    with openai.OpenAI(api_key=demo_key, base_url=f"{gateway_url}/v1", max_retries=0, timeout=60) as sdk:
        yield sdk


@pytest.fixture
def http(gateway_url):
    with httpx.Client(base_url=gateway_url, timeout=30) as client:
        yield client


def usage_cents(http: httpx.Client, key: str = DEMO_KEY) -> float:
    answer = http.get("/v1/dashboard/billing/usage", headers={"Authorization": f"Bearer {key}"})
    answer.raise_for_status()
    return answer.json()["total_usage"]


def account(http: httpx.Client) -> dict:
    answer = http.get("/api/user/self", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"})
    answer.raise_for_status()
    return answer.json()["data"]


# ---- the money, read where the gateway keeps it (its emulator's accounts table) ----------------

def _accounts_table(gateway: LocalGateway):
    import boto3

    return boto3.resource("dynamodb", endpoint_url=gateway.emulator_url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local").Table("AccountsTable")


def reservation(gateway: LocalGateway, reservation_id: str) -> dict | None:
    """The reservation record of a request or task (a task's id is its reservation's), or None."""
    from gateway.store.holds import reservation_pk

    return _accounts_table(gateway).get_item(Key={"pk": reservation_pk(reservation_id), "sk": "RES"},
                                             ConsistentRead=True).get("Item")


def closed_reservation(gateway: LocalGateway, reservation_id: str, seconds: float = 60) -> dict:
    """The reservation once it has left `reserved` (a task's terminal status is written just before
    it is settled or refunded); fails if it is still open after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        record = reservation(gateway, reservation_id)
        if record is not None and record["status"] != "reserved":
            return record
        assert time.monotonic() < deadline, f"reservation {reservation_id} still open: {record}"
        time.sleep(0.3)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed end-to-end test shows the last lines its local gateway printed (its serving
    processes' tracebacks and access lines), which a browser's or an SDK's timeout alone hides."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, LocalGateway):
            report.sections.append((f"the local gateway's output ({name}, last 120 lines)",
                                    "".join(value.output[-120:])))
