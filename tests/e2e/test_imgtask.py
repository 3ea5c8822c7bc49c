"""Image tasks through the local gateway (what `make run` starts), over HTTP: an imagine and a
follow-up action finish by themselves, the four reads answer, a failed task is refunded."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import account, closed_reservation
from tests.e2e.test_video_tasks import auth, wait_for

pytestmark = pytest.mark.e2e

FINISHED = ("SUCCESS", "FAILURE", "CANCEL")


def record(http: httpx.Client, key: str, task_id: str) -> dict:
    answer = http.get(f"/imgtask/task/{task_id}/fetch", headers=auth(key))
    assert answer.status_code == 200, answer.text
    return answer.json()


def submit(http: httpx.Client, key: str, path: str, body: dict) -> str:
    answer = http.post(path, headers=auth(key), json=body)
    assert answer.status_code == 200 and answer.json()["code"] == 1, answer.text
    return answer.json()["result"]


def test_an_imagine_and_its_upscale_finish_and_the_four_reads_answer(gateway, http, demo_key):
    quota_before = account(http)["quota"]
    task_id = submit(http, demo_key, "/imgtask/submit/imagine", {"prompt": "a lighthouse at dawn"})
    done = wait_for(lambda: record(http, demo_key, task_id), lambda r: r["status"] in FINISHED, "the imagine task")
    assert done["status"] == "SUCCESS" and done["progress"] == "100%" and len(done["buttons"]) == 9
    # The image: with the key, and by the record's signed link without one
    with_key = http.get(f"/imgtask/image/{task_id}", headers={**auth(demo_key), "Accept": "image/png"},
                        follow_redirects=True)  # to the kept copy
    assert with_key.status_code == 200 and with_key.headers["content-type"] == "image/png"
    assert with_key.content.startswith(b"\x89PNG")
    assert httpx.get(done["imageUrl"], follow_redirects=True).content == with_key.content
    assert http.get(f"/imgtask/image/{task_id}").status_code == 401
    seed = http.get(f"/imgtask/task/{task_id}/image-seed", headers=auth(demo_key)).json()
    assert seed["code"] == 1 and seed["result"].isdigit()
    # A follow-up action from a button
    upscale_id = submit(http, demo_key, "/imgtask/submit/action", {"taskId": task_id,
                                                                   "customId": done["buttons"][0]["customId"]})
    upscale = wait_for(lambda: record(http, demo_key, upscale_id), lambda r: r["status"] in FINISHED, "the upscale")
    assert upscale["status"] == "SUCCESS" and upscale["action"] == "UPSCALE"
    listed = http.post("/imgtask/task/list-by-condition", headers=auth(demo_key),
                       json={"ids": [upscale_id, "1", task_id]}).json()
    assert [r["id"] for r in listed] == [upscale_id, task_id]
    assert http.get("/imgtask/task/1/fetch", headers=auth(demo_key)).status_code == 404
    for settled_id, units in ((task_id, 50_000), (upscale_id, 25_000)):
        settled = closed_reservation(gateway, settled_id)
        assert (settled["status"], settled["closed_units"]) == ("settled", units)
    assert account(http)["quota"] == quota_before - 50_000 - 25_000  # 0.10 USD imagine + 0.05 USD upscale


def test_a_failed_imagine_is_refunded(gateway, http, demo_key):
    quota_before = account(http)["quota"]
    task_id = submit(http, demo_key, "/imgtask/submit/imagine", {"prompt": "a storm #fault=fail"})
    done = wait_for(lambda: record(http, demo_key, task_id), lambda r: r["status"] in FINISHED, "the failing task")
    assert done["status"] == "FAILURE" and done["failReason"]
    refunded = closed_reservation(gateway, task_id)
    assert (refunded["status"], refunded["closed_units"]) == ("refunded", 0)
    assert account(http)["quota"] == quota_before
