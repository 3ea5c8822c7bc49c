"""`make invoke FUNCTION=<name> EVENT=events/<file>.json`: one function's handler on a sample
event, in-process, against the running gateway's emulator; the answer printed as `sam local
invoke -e` prints it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.e2e.conftest import DEMO_KEY, ROOT


def _invoke(gateway, function: str, event: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "GATEWAY_LOCAL_ENDPOINT_FILE": str(gateway.endpoint_file), **env}
    environment.pop("KEY", None) if "KEY" not in env else None
    return subprocess.run(["make", "-s", "invoke", f"FUNCTION={function}", f"EVENT={event}"], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=180)


def test_a_buffered_function_answers_its_sample_event_with_the_running_gateways_demo_key(gateway):
    done = _invoke(gateway, "account", "events/account.json", AWS_DEFAULT_REGION="eu-west-1",
                   AWS_PROFILE="no-such-profile")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["statusCode"] == 200, answer
    assert "total_usage" in json.loads(answer["body"])


def test_the_streaming_text_function_answers_its_sample_event_and_bills_the_key(gateway, http):
    before = http.get("/api/log/token", headers={"Authorization": f"Bearer {DEMO_KEY}"}).json()["data"]["total"]
    done = _invoke(gateway, "text", "events/text_chat_stream.json", KEY=DEMO_KEY)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["statusCode"] == 200 and "data: [DONE]" in answer["body"]
    assert "You said: Hello there" in "".join(
        json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        for line in answer["body"].splitlines() if line.startswith("data: {") and '"choices":[{' in line)
    after = http.get("/api/log/token", headers={"Authorization": f"Bearer {DEMO_KEY}"}).json()["data"]["total"]
    assert after == before + 1  # billed in the running gateway's tables


@pytest.mark.parametrize(("function", "event", "message"), [
    ("nope", "events/account.json", "FUNCTION=nope: no such function in template.yaml (one of: account,"),
    ("account", "events/missing.json", "EVENT=events/missing.json: not a readable JSON file"),
])
def test_a_wrong_function_or_event_is_named(gateway, function, event, message):
    done = _invoke(gateway, function, event)
    assert done.returncode != 0 and message in done.stderr


def test_without_a_running_gateway_it_says_to_start_one(tmp_path):
    done = subprocess.run(["make", "-s", "invoke", "FUNCTION=plants", "EVENT=events/plants.json"], cwd=ROOT,
                          env={**os.environ, "GATEWAY_LOCAL_ENDPOINT_FILE": str(tmp_path / "none.json")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "start `make run` in another terminal first" in done.stderr
