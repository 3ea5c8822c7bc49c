"""End-to-end fixtures: a running local gateway, named by the environment until the runner lands.

`GATEWAY_E2E_URL` is the gateway's base URL (e.g. http://127.0.0.1:3000) and `GATEWAY_E2E_KEY`
(or `GATEWAY_DEMO_KEY`, what `make run` was started with) its demo key. Without them every test
that needs them is skipped.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def gateway_url() -> str:
    url = os.environ.get("GATEWAY_E2E_URL", "").rstrip("/")
    if not url:
        pytest.skip("GATEWAY_E2E_URL is not set: no local gateway to talk to")
    return url


@pytest.fixture(scope="session")
def demo_key() -> str:
    key = os.environ.get("GATEWAY_E2E_KEY") or os.environ.get("GATEWAY_DEMO_KEY")
    if not key:
        pytest.skip("GATEWAY_E2E_KEY (or GATEWAY_DEMO_KEY) is not set: no demo key for the local gateway")
    return key
