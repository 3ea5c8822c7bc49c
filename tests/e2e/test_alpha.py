"""An alpha task's life through the local gateway (what `make run` starts), over HTTP: the
runner's poll queue and the simulated upstream (which checks the gateway's HS256 token) finish
it by themselves; the test only asks the spec's query paths."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import account, closed_reservation
from tests.e2e.test_video_tasks import auth, wait_for

pytestmark = [pytest.mark.e2e]


def test_a_text2video_task_is_submitted_finished_and_settled_through_the_spec_paths(gateway, http, demo_key):
    quota_before = account(http)["quota"]
    submitted = http.post("/alpha/v1/videos/text2video", headers=auth(demo_key), json={
        "model": "alpha-v1-6", "prompt": "a lighthouse at night", "mode": "pro", "duration": "10",
        "external_task_id": "e2e-1"})
    assert submitted.status_code == 200, submitted.text
    body = submitted.json()
    assert body["code"] == 0 and body["data"]["task_status"] == "submitted"
    task_id = body["data"]["task_id"]

    def read() -> dict:
        answer = http.get(f"/alpha/v1/videos/text2video/{task_id}", headers={**auth(demo_key), "model": "alpha-v1-6"})
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]

    done = wait_for(read, lambda d: d["task_status"] in ("succeed", "failed"), "the alpha task")
    assert done["task_status"] == "succeed" and done["task_info"] == {"external_task_id": "e2e-1"}
    assert httpx.get(done["task_result"]["videos"][0]["url"]).content[4:8] == b"ftyp"
    units = 14_000 * 10 * 35 // 10  # 0.028 USD/s x 10 s x 3.5 (pro)
    settled = closed_reservation(gateway, task_id)
    assert (settled["status"], settled["closed_units"]) == ("settled", units)
    assert done["final_unit_deduction"] == str(units) and account(http)["quota"] == quota_before - units
    general = http.get(f"/alpha/v1/video/{task_id}", params={"taskid": task_id}, headers=auth(demo_key))
    assert general.status_code == 200 and general.json()["data"] == done
    # A bad value is refused in the envelope, naming the field
    refused = http.post("/alpha/v1/videos/text2video", headers=auth(demo_key),
                        json={"model": "alpha-v1-6", "prompt": "x", "cfg_scale": 2})
    assert refused.status_code == 400 and refused.json()["code"] == 1201
    assert refused.json()["message"].startswith("cfg_scale:")
