"""Task submits through their functions against simulators answering as the providers do (issue
30, row 7): DashScope's 400 `Arrearage` (gamma), Gemini's 400 `API_KEY_INVALID` (delta) and
Ark's 403 `AccountOverdueError` (zeta) fail over to the next channel and cool the refused one
down; when none is left, the client is told it is not its key, and nothing is charged."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gateway.routing import health
from gateway.routing.health import DynamoHealthStore
from tests.conftest import use_environment
from tests.integration.tasks_support import stored
from tests.integration.test_gamma import I2V, quota
from tests.integration.test_gamma import submit as gamma_submit
from tests.integration.test_video import DELTA, ZETA
from tests.integration.test_video import submit as video_submit

FAMILIES = {
    # family: (the fault's name in the simulators, the request, its model, how it is submitted)
    "gamma": ("arrearage", I2V, "gamma2.6-i2v", gamma_submit),
    "delta": ("keyinvalid", DELTA, "delta-3.0-generate-001", video_submit),
    "zeta": ("overdue", ZETA, "zeta-video-1-0-pro-250528", video_submit),
}


@pytest.fixture
def channels(tasks_env, tmp_path) -> Iterator:
    def use(family: str, *, spare: bool) -> None:
        fault, _, model, _ = FAMILIES[family]
        document = {"channels": [
            {"name": "refused", "protocol": family, "base_url": f"{tasks_env}/{family}/account/{fault}",
             "api_key": "k", "models": [model], "priority": 1}]}
        if spare:
            document["channels"].append({"name": "spare", "protocol": family, "base_url": f"{tasks_env}/{family}",
                                         "api_key": "k", "models": [model]})
        path = tmp_path / "channels.json"
        path.write_text(json.dumps(document))
        saved.update(use_environment(GATEWAY_CHANNELS_FILE=str(path)))

    saved: dict = {}
    yield use
    use_environment(**saved)
    health.reset()


def task_id_of(answer: dict) -> str:
    return answer.get("task_id") or answer.get("taskId") or answer["output"]["task_id"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_submit_the_upstream_refuses_for_the_channels_account_goes_to_the_next_channel(
        channels, functions, demo, accounts, lambda_context, family):
    _, body, _, submit = FAMILIES[family]
    channels(family, spare=True)
    # When a task is submitted (before: gamma's and delta's 400 were the client's, relayed)
    status, answer = submit(functions, lambda_context, body, demo["key"])
    # Then the other channel took it, and the refused one is out for the maximum as an account problem
    assert status == 200, answer
    assert stored(task_id_of(answer))["channel"] == "spare"
    refused = DynamoHealthStore().get("refused")
    assert refused.state == "cooling" and refused.period == 600 and refused.last_fault == "account"


@pytest.mark.parametrize("family", FAMILIES)
def test_when_no_channel_is_left_the_client_hears_it_is_not_its_key_and_pays_nothing(
        channels, functions, demo, accounts, lambda_context, family):
    _, body, _, submit = FAMILIES[family]
    channels(family, spare=False)
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, body, demo["key"])
    text = json.dumps(answer)
    assert status == 502 and "not a problem with your key" in text
    assert "API key not valid" not in text and "good standing" not in text and "overdue balance" not in text
    assert quota(accounts) == before
