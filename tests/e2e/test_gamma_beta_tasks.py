"""The gamma and beta families through the local gateway (what `make run` starts), over HTTP:
submit, then only the gateway's own query routes until the result is served."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.e2e.conftest import account

pytestmark = pytest.mark.e2e

WAIT_SECONDS = 60  # bounded: a task takes about 2 s plus a few polls


def wait_for(read, done, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"{what} did not finish in {WAIT_SECONDS} s: {value}"
        time.sleep(0.3)


def test_a_gamma_video_goes_from_submit_to_a_served_video(http, demo_key):
    headers = {"Authorization": f"Bearer {demo_key}", "X-DashScope-Async": "enable"}
    quota_before = account(http)["quota"]
    submitted = http.post("/gamma/api/v1/services/aigc/video-generation/video-synthesis", headers=headers, json={
        "model": "gamma2.5-t2v-preview", "input": {"prompt": "a kite over the sea"},
        "parameters": {"resolution": "480P", "duration": 10}})
    assert submitted.status_code == 200, submitted.text
    task_id = submitted.json()["output"]["task_id"]

    def query() -> dict:
        answer = http.get(f"/gamma/api/v1/tasks/{task_id}", headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    done = wait_for(query, lambda r: r["output"]["task_status"] not in ("PENDING", "RUNNING"), "the gamma task")
    assert done["output"]["task_status"] == "SUCCEEDED" and done["usage"]["video_duration"] == 10
    assert httpx.get(done["output"]["video_url"]).content[4:8] == b"ftyp"
    assert account(http)["quota"] == quota_before - 250_000  # 0.10 USD/s x 10 s x 0.5 (480P)
    # And a bad value is refused in the upstream's shape, holding nothing
    refused = http.post("/gamma/api/v1/services/aigc/video-generation/video-synthesis", headers=headers, json={
        "model": "gamma2.5-t2v-preview", "input": {"prompt": "x"}, "parameters": {"duration": 7}})
    assert refused.status_code == 400 and refused.json()["code"] == "InvalidParameter"
    assert refused.json()["message"].startswith("parameters.duration:")
    assert account(http)["quota"] == quota_before - 250_000
