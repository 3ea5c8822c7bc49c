"""The gamma adapter against its simulator, and against odd upstream answers."""

import httpx
import pytest

from gateway.tasks.adapter import UNIFIED, poll, submit
from gateway.tasks.families import family_of
from gateway.tasks.families.gamma import PUBLIC_STATUS
from gateway.tasks.families.gamma.adapter import GammaAdapter
from gateway.upstreams.errors import UpstreamError

from .conftest import SIM

KEY = "sk-upstream"
ADAPTER = GammaAdapter()
BASE = f"{SIM}/gamma"
REQUEST = {"input": {"prompt": "a cat", "img_url": "https://x.test/cat.png"},
           "parameters": {"resolution": "720P", "duration": 5}}


def answer(status, body):
    return httpx.Response(status, json=body, request=httpx.Request("GET", "http://up.test/x"))


def test_the_submit_is_asynchronous_with_the_bearer_key():
    request = ADAPTER.build_submit("http://up.test/", KEY, "wan-x", REQUEST)
    assert str(request.url) == "http://up.test/api/v1/services/aigc/video-generation/video-synthesis"
    assert request.headers["authorization"] == f"Bearer {KEY}" and request.headers["x-dashscope-async"] == "enable"
    assert httpx.Response(200, content=request.read()).json() == {"model": "wan-x", **REQUEST}


def test_a_gamma_task_lives_from_submit_to_a_downloadable_video(sim, clock):
    task_id = submit(sim, ADAPTER, BASE, KEY, "gamma2.6-i2v", REQUEST)
    pending = poll(sim, ADAPTER, BASE, KEY, task_id)
    assert (pending.status, pending.upstream_status) == ("queued", "PENDING")
    clock.advance(1.5)
    assert poll(sim, ADAPTER, BASE, KEY, task_id).status == "in_progress"
    clock.advance(3)
    done = poll(sim, ADAPTER, BASE, KEY, task_id)
    assert done.status == "succeeded" and done.progress == 100 and done.duration == "5"
    assert done.details["usage"] == {"video_duration": 5, "video_count": 1, "SR": 720} and done.details["end_time"]
    assert sim.get(done.result_urls[0]).content[4:8] == b"ftyp"


def test_the_simulator_refuses_a_missing_key_and_a_synchronous_call(sim):
    body = {"model": "m", **REQUEST}
    path = f"{BASE}/api/v1/services/aigc/video-generation/video-synthesis"
    assert sim.post(path, json=body, headers={"X-DashScope-Async": "enable"}).json()["code"] == "InvalidApiKey"
    refused = sim.post(path, json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert refused.status_code == 403 and refused.json()["code"] == "AccessDenied"


@pytest.mark.parametrize("fault,status,code",
                         [("reject", 400, "DataInspectionFailed"), ("throttle", 429, "Throttling")])
def test_a_refused_submit_is_an_upstream_error_with_its_code(sim, fault, status, code):
    request = {**REQUEST, "input": {**REQUEST["input"], "prompt": f"x #fault={fault}"}}
    with pytest.raises(UpstreamError) as caught:
        submit(sim, ADAPTER, BASE, KEY, "gamma2.6-i2v", request)
    assert caught.value.status == status and code in caught.value.message


def test_an_unknown_id_is_a_failed_task_and_an_unknown_word_keeps_running():
    unknown = ADAPTER.parse_poll(answer(200, {"output": {"task_id": "t", "task_status": "UNKNOWN"}}))
    assert unknown.status == "failed" and "UNKNOWN" in unknown.error
    odd = ADAPTER.parse_poll(answer(200, {"output": {"task_id": "t", "task_status": "SUSPENDED"}}))
    assert (odd.status, odd.upstream_status, odd.terminal) == ("in_progress", "SUSPENDED", False)
    failed = ADAPTER.parse_poll(answer(200, {"output": {"task_status": "FAILED", "code": "X", "message": "boom"}}))
    assert failed.status == "failed" and failed.error == "X: boom" and failed.details["code"] == "X"


def test_a_submit_without_a_task_id_is_not_retried():
    with pytest.raises(UpstreamError) as caught:
        ADAPTER.parse_submit(answer(200, {"request_id": "r", "output": {}}))
    assert not caught.value.retryable


def test_the_public_words_cover_every_unified_state():
    assert set(PUBLIC_STATUS) == set(UNIFIED)
    assert set(family_of("gamma").statuses.values()) <= set(UNIFIED)
