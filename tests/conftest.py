"""Shared fixtures: one moto server for the session, tables and queues made from template.yaml."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"

# Nothing in the suite may reach real AWS, whatever the machine's environment says.
os.environ.update({
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
    "POWERTOOLS_LOG_LEVEL": "WARNING", "GATEWAY_KEY_CACHE_SECONDS": "0",
})
os.environ.pop("AWS_PROFILE", None)

from tests import iam_support  # noqa: E402 - after the environment above

iam_support.install()

if TYPE_CHECKING:
    from gateway.store.keys import KeysRepository
    from gateway.store.signin import SignInRepository
    from gateway.store.usage import UsageRepository
    from gateway.store.users import UsersRepository


def pytest_sessionfinish(session, exitstatus):
    """The IAM check (tests/iam_support.py): fails the session naming each function and action."""
    integration = {p.name for p in (ROOT / "tests" / "integration").glob("test_*.py")}
    ran = {Path(str(item.fspath)).name for item in session.items
           if "integration" in Path(str(item.fspath)).parts}
    option = session.config.option
    whole = integration <= ran and not option.keyword and not option.markexpr and exitstatus == 0
    found = iam_support.problems(whole)
    if found:
        print("\nIAM check failed:\n  " + "\n  ".join(found))
        session.exitstatus = 1


@pytest.fixture(scope="session")
def aws():
    """The AWS emulator for the session, with the template's tables and queues."""
    from gateway_local.emulator import start_emulator

    emulator = start_emulator(ROOT / "template.yaml")
    yield emulator
    emulator.stop()


@pytest.fixture
def store(aws):
    """A clean emulator state for one test."""
    from gateway import auth
    from gateway.admission import leases
    from gateway.routing import health

    leases.reset_pool(fold_first=False)  # a fresh instance: the leases of the last test's data are gone
    aws.reset()
    auth.clear_cache()
    health.reset()  # what this process knew of channel health was in the tables just emptied
    yield aws


@dataclass(frozen=True)
class Accounts:
    """The accounts table's rooms (`gateway.store`), a clean table under them; the balances as
    users see them are `gateway.admission.balances`."""

    users: UsersRepository
    keys: KeysRepository
    sign_in: SignInRepository
    usage: UsageRepository


@pytest.fixture
def accounts(store) -> Accounts:
    from gateway.store.keys import KeysRepository
    from gateway.store.signin import SignInRepository
    from gateway.store.usage import UsageRepository
    from gateway.store.users import UsersRepository

    return Accounts(UsersRepository(), KeysRepository(), SignInRepository(), UsageRepository())


@pytest.fixture
def demo(accounts):
    """User 1 with 1000 USD of quota, a system access token and an unlimited key."""
    from gateway.admin import ensure_demo_account

    key, token = "sk-" + "d" * 48, "demo-access-token"
    ensure_demo_account(user_id=1, key=key, quota=500_000_000, access_token=token)
    return {"user_id": 1, "key": key, "access_token": token}


def api_event(method: str, path: str, *, resource: str | None = None, body: str | None = None,
              headers: dict[str, str] | None = None, query: dict[str, str] | None = None,
              path_parameters: dict[str, str] | None = None, base64: bool = False) -> dict:
    """An API Gateway REST proxy event, built from the sample event of events/."""
    event = json.loads((EVENTS / "plants.json").read_text())
    headers = {"Content-Type": "application/json", **(headers or {})}
    event.update({
        "resource": resource or path, "path": path, "httpMethod": method, "body": body,
        "isBase64Encoded": base64, "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": path_parameters,
    })
    event["requestContext"].update({"resourcePath": resource or path, "httpMethod": method, "path": path,
                                    "requestId": str(uuid.uuid4())})
    return event


def use_environment(**values: str | None) -> dict[str, str | None]:
    """Sets (or, for None, unsets) environment variables and re-reads settings and channels;
    answers the previous values, to restore them the same way."""
    from gateway.routing import channels
    from gateway.settings import reload_settings

    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    reload_settings()
    channels.reset_catalog()
    return saved


class LambdaContext:
    function_name = "test-function"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 29_000


@pytest.fixture
def lambda_context():
    return LambdaContext()


def load_function(name: str):
    """A function's app.py under its own module name, as the local runner loads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"fn_test_{name}", ROOT / "functions" / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def serve_asgi(app) -> Iterator[str]:
    """`app` served by uvicorn in a thread on a free port of 127.0.0.1; yields its base URL."""
    import socket
    import threading
    import time

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # a free port chosen by the OS, no race with other tests
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the ASGI server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
