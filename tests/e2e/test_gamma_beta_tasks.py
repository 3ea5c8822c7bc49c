"""The gamma and beta families through the local gateway (what `make run` starts), over HTTP:
submit, then only the gateway's own query routes until the result is served."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import account, closed_reservation
from tests.e2e.test_video_tasks import wait_for

pytestmark = pytest.mark.e2e


def test_a_gamma_video_goes_from_submit_to_a_served_video(gateway, http, demo_key):
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
    settled = closed_reservation(gateway, task_id)
    assert (settled["status"], settled["closed_units"]) == ("settled", 250_000)
    assert account(http)["quota"] == quota_before - 250_000  # 0.10 USD/s x 10 s x 0.5 (480P)
    # And a bad value is refused in the upstream's shape, holding nothing
    refused = http.post("/gamma/api/v1/services/aigc/video-generation/video-synthesis", headers=headers, json={
        "model": "gamma2.5-t2v-preview", "input": {"prompt": "x"}, "parameters": {"duration": 7}})
    assert refused.status_code == 400 and refused.json()["code"] == "InvalidParameter"
    assert refused.json()["message"].startswith("parameters.duration:")
    assert account(http)["quota"] == quota_before - 250_000


def test_a_beta_image_goes_from_submit_to_a_served_sample(gateway, http, demo_key):
    quota_before = account(http)["quota"]
    # Given a client of the upstream: its key in x-key, then GET on the polling URL it was given
    submitted = http.post("/beta/v1/beta-2-pro", headers={"x-key": demo_key}, json={
        "model": "beta-2-pro", "prompt": "a red boat", "width": 512, "height": 512, "output_format": "png"})
    assert submitted.status_code == 200, submitted.text
    polling_url = submitted.json()["polling_url"]
    done = wait_for(lambda: httpx.get(polling_url, headers={"x-key": demo_key}).json(),
                    lambda r: r["status"] != "Pending", "the beta task")
    assert done["status"] == "Ready", done
    # Then the sample downloads with no key, as the upstream's own link would
    image = httpx.get(done["result"]["sample"], headers={"Accept": "image/png"})
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    settled = closed_reservation(gateway, submitted.json()["id"])
    assert (settled["status"], settled["closed_units"]) == ("settled", 15_000)
    assert account(http)["quota"] == quota_before - 15_000  # 512x512 is one megapixel for BFL: 0.03 USD
    # And a bad value is refused in the upstream's shape, holding nothing
    refused = http.post("/beta/v1/beta-2-pro", headers={"x-key": demo_key},
                        json={"model": "beta-2-pro", "prompt": "x", "width": 100})
    assert refused.status_code == 400 and refused.json()["detail"].startswith("width:")
    assert account(http)["quota"] == quota_before - 15_000
