"""Fixtures shared by the integration tests: the text catalog and app, the images stand-in upstreams
and function, the account and commerce functions, the text function served, the fake chat
upstreams, the task simulators, functions, clock and queues."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway.api import count_tokens, models, text
from gateway.routing.catalog import Catalog
from gateway.routing.channels import reset_catalog
from tests.channel_health_support import FakeUpstreams
from tests.conftest import load_function, serve_asgi, use_environment
from tests.integration.images_support import UPSTREAMS, hits
from tests.integration.tasks_support import SIMULATORS, TASK_SECONDS, Clock, Queues

# --- text -----------------------------------------------------------------------------------------------

@pytest.fixture
def catalog(monkeypatch):
    """Sets the channels document for the test; the default serves each protocol's simulator."""
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "0")

    def use(channels: list[dict[str, Any]], prices: dict[str, Any] | None = None) -> Catalog:
        built = Catalog.from_document({"channels": channels, "prices": prices or {}})
        for module in (text, models, count_tokens):
            monkeypatch.setattr(module, "get_catalog", lambda: built)
        return built

    reset_catalog()
    yield use
    reset_catalog()


@pytest.fixture
def app(monkeypatch):
    return load_function("text").app


# --- accounts, commerce and fake chat upstreams ---------------------------------------------------------

@pytest.fixture(scope="module")
def account_fn(aws):
    return load_function("account")


@pytest.fixture(scope="module")
def commerce_fn(aws):
    return load_function("commerce")


@pytest.fixture(scope="module")
def gateway_url(aws) -> Iterator[str]:
    """The text function served by uvicorn (as the Lambda Web Adapter runs it): its URL."""
    with serve_asgi(load_function("text").app) as url:
        yield url


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeUpstreams, str]]:
    """Chat upstreams that answer per channel path and count the attempts (tests/channel_health_support)."""
    upstreams = FakeUpstreams()
    with serve_asgi(upstreams.app) as url:
        yield upstreams, url


# --- images ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def upstream():
    with serve_asgi(UPSTREAMS) as url:
        yield url


@pytest.fixture(scope="module")
def images_fn(aws):
    return load_function("images")


@pytest.fixture(scope="module")
def images(images_fn):
    """The streaming images function served by uvicorn (as the Lambda Web Adapter runs it): its URL."""
    with serve_asgi(images_fn.app) as url:
        yield url


@pytest.fixture
def simulated(upstream, store):
    """Every model routes to the simulator, as under the local runner."""
    saved = use_environment(GATEWAY_SIMULATOR_URL=upstream, GATEWAY_CHANNELS_FILE=None,
                             GATEWAY_CHANNELS_PARAMETER=None)
    hits.clear()
    yield upstream
    use_environment(**saved)


# --- tasks ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def simulators_url() -> Iterator[str]:
    app = Starlette(routes=[Mount(f"/{name}", app=module.app) for name, module in SIMULATORS.items()])
    with serve_asgi(app) as url:
        yield url


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setenv("GATEWAY_SIM_TASK_SECONDS", str(TASK_SECONDS))
    for module in SIMULATORS.values():
        monkeypatch.setattr(module, "clock", fake)
    return fake


@pytest.fixture
def tasks_env(simulators_url, store, clock) -> Iterator[str]:
    """Every model routed to the simulators; polls due at once; callbacks to 127.0.0.1 allowed."""
    from gateway import signing_keys

    # The signing secrets as deployed: in Secrets Manager, read by the functions that sign.
    secret_ids = {name: _secret(name, value) for name, value in
                  (("gateway-callback", "test-secret"), ("gateway-result-link", "test-link-secret"))}
    saved = use_environment(GATEWAY_SIMULATOR_URL=simulators_url, GATEWAY_CHANNELS_FILE=None,
                            GATEWAY_CHANNELS_PARAMETER=None, GATEWAY_TASK_POLL_SECONDS="0",
                            GATEWAY_CALLBACK_ALLOW_PRIVATE="1", GATEWAY_CALLBACK_RETRY_SECONDS="0",
                            GATEWAY_CALLBACK_SECRET=None, GATEWAY_RESULT_LINK_SECRET=None,
                            GATEWAY_CALLBACK_SECRET_ID=secret_ids["gateway-callback"],
                            GATEWAY_RESULT_LINK_SECRET_ID=secret_ids["gateway-result-link"])
    signing_keys.forget()
    yield simulators_url
    use_environment(**saved)
    signing_keys.forget()


def _secret(name: str, value: str) -> str:
    """The ARN of a Secrets Manager secret holding `value` (made once per emulator state)."""
    from gateway.store.aws import client

    secretsmanager = client("secretsmanager")
    try:
        return secretsmanager.create_secret(Name=name, SecretString=value)["ARN"]
    except secretsmanager.exceptions.ResourceExistsException:
        return secretsmanager.describe_secret(SecretId=name)["ARN"]


@pytest.fixture(scope="module")
def functions(aws):
    return {name: load_function(name) for name in ("video", "alpha", "gamma", "beta", "imgtask", "task_poller",
                                                      "task_sweeper", "callback_sender")}


@pytest.fixture
def queues(aws, functions, tasks_env) -> Queues:
    return Queues(aws, functions)


@pytest.fixture
def faults(store):
    """Faults below the gateway (`gateway_local.faults`), none drawn at random: a test plans each
    one where it means it (`faults.plan("GetItem", "throttle")`); off again after the test."""
    from gateway_local.faults import Faults

    injected = Faults()
    store.use_faults(injected)
    yield injected
    store.use_faults(None)


@pytest.fixture
def stale_replica(monkeypatch):
    """`stale_replica("KEY", ...)`: from then on, an eventually consistent read of an accounts
    item with one of these sort keys finds nothing, as a replica that has not caught up with a
    write; consistent reads see the table."""
    from gateway.store.table import AccountsTable

    def make_stale(*sort_keys: str) -> None:
        real = AccountsTable._get

        def read(self, pk, sk, consistent=False):
            return None if sk in sort_keys and not consistent else real(self, pk, sk, consistent)

        monkeypatch.setattr(AccountsTable, "_get", read)

    return make_stale
