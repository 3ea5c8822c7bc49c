"""A newcomer's first minutes with `make run`: it starts whatever the shell's AWS settings say,
its banner's first call works on every start, and GATEWAY_DEMO_QUOTA is applied when it changes."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import pytest

from tests.e2e.conftest import DEMO_KEY, LocalGateway


def _banner_call(gateway: LocalGateway) -> subprocess.CompletedProcess:
    """The banner's export and curl lines, run by a shell as a user pastes them."""
    text = "".join(gateway.output)
    lines = text[text.index("In another terminal:"):].splitlines()[1:3]
    return subprocess.run(["sh", "-c", " && ".join(line.strip() for line in lines) + " -sS -w ' %{http_code}'"],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def _quota(gateway: LocalGateway) -> int:
    answer = httpx.get(f"{gateway.url}/api/user/self", timeout=30,
                       headers={"Authorization": "e2e-access-token", "X-Api-User": "1"})
    return int(answer.json()["data"]["quota"])


def test_make_run_ignores_the_users_aws_settings_and_its_banner_call_works_every_time(tmp_path):
    config = tmp_path / "aws-config"
    config.write_text("[default]\nregion = ap-southeast-2\nendpoint_url = http://127.0.0.1:9\n"
                      "[profile other]\nregion = eu-central-1\n")
    shell = {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-1", "AWS_PROFILE": "no-such-profile",
             "AWS_ACCESS_KEY_ID": "AKIAUSERSOWN", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "t",
             "AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": str(config),
             "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9", "GATEWAY_LOCAL_STATE_DIR": str(tmp_path / "state")}
    for start in range(2):
        gateway = LocalGateway(shell)
        try:
            done = _banner_call(gateway)
            body, status = done.stdout.rsplit(" ", 1)
            assert status == "200", (start, done.stdout, done.stderr)
            assert json.loads(body)["choices"][0]["message"]["content"] == "You said: hello"
            assert "export KEY=" + DEMO_KEY in "".join(gateway.output)
        finally:
            assert gateway.stop() == 0


def test_a_changed_demo_quota_is_applied_and_an_unchanged_one_keeps_the_spending(tmp_path):
    state = {"GATEWAY_LOCAL_STATE_DIR": str(tmp_path / "state")}
    gateway = LocalGateway({**state, "GATEWAY_DEMO_QUOTA": "1000000"})
    try:
        assert _quota(gateway) == 1_000_000
        httpx.post(f"{gateway.url}/v1/chat/completions", timeout=30, headers={"Authorization": f"Bearer {DEMO_KEY}"},
                   json={"model": "m-small", "messages": [{"role": "user", "content": "hi"}]}).raise_for_status()
        spent = _quota(gateway)
        assert spent < 1_000_000
    finally:
        gateway.stop()
    gateway = LocalGateway({**state, "GATEWAY_DEMO_QUOTA": "1000000"})
    try:
        assert _quota(gateway) == spent  # unchanged: what is left stays
        assert re.search(r"demo quota: \d+ units left \(GATEWAY_DEMO_QUOTA=1000000 applies when it changes\)",
                         "".join(gateway.output))
    finally:
        gateway.stop()
    gateway = LocalGateway({**state, "GATEWAY_DEMO_QUOTA": "2500000"})
    try:
        assert _quota(gateway) == 2_500_000
        assert "demo quota: set to 2500000 units (GATEWAY_DEMO_QUOTA changed)" in "".join(gateway.output)
    finally:
        gateway.stop()
    with pytest.raises(RuntimeError, match="GATEWAY_DEMO_QUOTA: must be a whole number of units"):
        LocalGateway({**state, "GATEWAY_DEMO_QUOTA": "-5"})
