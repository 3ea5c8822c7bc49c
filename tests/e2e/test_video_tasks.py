"""The whole life of a video task through the local gateway (what `make run` starts), over HTTP.

After the submit, the test only asks the gateway's query endpoints: the local runner's poll
queue, schedule and simulators finish each task by themselves (tasks take 2 s there).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import pytest

from tests.e2e.conftest import account, closed_reservation

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")]

WAIT_SECONDS = 60  # bounded: a task takes about 2 s plus a few polls


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def wait_for(read, done, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"{what} did not finish in {WAIT_SECONDS} s: {value}"
        time.sleep(0.3)


def result(http: httpx.Client, key: str, task_id: str) -> dict:
    answer = http.get("/v1/video/generations/result", params={"taskid": task_id}, headers=auth(key))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_delta_task_goes_from_submit_to_succeeded_by_itself_and_is_settled_to_what_it_delivered(
        gateway, http, demo_key):
    quota_before = account(http)["quota"]
    # Given two videos asked for, of which the upstream delivers one (the hold is twice the price)
    submitted = http.post("/v1/video/generations", headers=auth(demo_key), json={
        "model": "delta-3.1-fast-generate-001", "instances": [{"prompt": "a lighthouse at night #fault=fewer"}],
        "parameters": {"durationSeconds": 6, "generateAudio": False, "sampleCount": 2}})
    assert submitted.status_code == 200, submitted.text
    body = submitted.json()
    assert body["task_status"] == "pending" and set(body) == {"task_id", "task_status", "message"}
    assert account(http)["quota"] == quota_before - 900_000  # held: 0.15 USD/s x 6 s x 2 videos
    done = wait_for(lambda: result(http, demo_key, body["task_id"]),
                    lambda r: r["task_status"] in ("succeeded", "failed"), "the delta task")
    assert done["task_status"] == "succeeded" and done["video_id"] == body["task_id"]
    assert done["video_result"] and done["video_results"] == [done["video_result"]] and done["duration"] == "6"
    # The gateway's own link, with no key: a redirect to the kept copy, as a browser or `curl -L` follows it
    opened = httpx.get(done["video_result"], follow_redirects=True)
    assert opened.history[0].status_code == 302 and opened.content[4:8] == b"ftyp"
    # Then the reservation is settled at the one video's price, and the rest of the hold came back
    settled = closed_reservation(gateway, body["task_id"])
    assert (settled["status"], settled["closed_units"]) == ("settled", 450_000)
    assert account(http)["quota"] == quota_before - 450_000  # 0.15 USD/s x 6 s x 1 video


def test_a_zeta_task_goes_from_submit_to_succeeded_by_itself(http, demo_key):
    submitted = http.post("/v1/video/generations", headers=auth(demo_key), json={
        "model": "zeta-video-1-0-lite-t2v-250428", "content": [{"type": "text", "text": "a kite --rs 720p"}]})
    assert submitted.status_code == 200, submitted.text
    body = submitted.json()
    assert body["status"] == "queued" and body["taskId"]
    done = wait_for(lambda: result(http, demo_key, body["taskId"]),
                    lambda r: r["task_status"] in ("succeeded", "failed"), "the zeta task")
    assert done["task_status"] == "succeeded" and done["video_result"].endswith(".mp4")


def test_an_epsilon_video_with_the_openai_sdk_completes_and_its_content_downloads(gateway, gateway_url, demo_key,
                                                                                    http):
    quota_before = account(http)["quota"]
    with openai.OpenAI(api_key=demo_key, base_url=f"{gateway_url}/v1", max_retries=0, timeout=30) as sdk:
        video = sdk.videos.create(prompt="a paper boat", model="epsilon-2", seconds="4", size="720x1280")
        assert video.status == "queued" and video.progress == 0 and video.completed_at is None
        done = wait_for(lambda: sdk.videos.retrieve(video.id), lambda v: v.status in ("completed", "failed"),
                        "the epsilon video")
        assert done.status == "completed" and done.progress == 100 and done.seconds == "4"
        assert sdk.videos.download_content(video.id).read()[4:8] == b"ftyp"
    # The spec's own content path (no /v1), each variant with its media type
    thumbnail = http.get(f"/videos/{video.id}/content", params={"variant": "thumbnail"}, headers=auth(demo_key))
    assert thumbnail.status_code == 200 and thumbnail.headers["content-type"] == "image/webp"
    assert thumbnail.content[8:12] == b"WEBP"
    settled = closed_reservation(gateway, video.id)
    assert (settled["status"], settled["closed_units"]) == ("settled", 200_000)
    assert account(http)["quota"] == quota_before - 200_000  # 0.10 USD/s x 4 s


def test_a_failed_task_gives_back_exactly_its_reservation(gateway, http, demo_key):
    quota_before = account(http)["quota"]
    submitted = http.post("/v1/videos", headers=auth(demo_key),
                          json={"prompt": "doomed #fault=fail", "model": "epsilon-2-pro", "seconds": "12"})
    assert submitted.status_code == 200, submitted.text
    video_id = submitted.json()["id"]
    assert account(http)["quota"] == quota_before - 1_800_000  # held while it runs
    done = wait_for(lambda: http.get(f"/v1/videos/{video_id}", headers=auth(demo_key)).json(),
                    lambda v: v["status"] in ("completed", "failed"), "the failing video")
    assert done["status"] == "failed" and "Simulated generation failure" in done["error"]["message"]
    refunded = closed_reservation(gateway, video_id)
    assert (refunded["status"], refunded["closed_units"]) == ("refunded", 0)
    assert account(http)["quota"] == quota_before
    early = http.get(f"/videos/{video_id}/content", headers=auth(demo_key))
    assert early.status_code == 409 and early.json()["error"]["code"] == "video_not_ready"


class _Hooks(BaseHTTPRequestHandler):
    received: list[tuple[bytes, dict]] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((body, dict(self.headers)))
        self.send_response(503 if len(type(self).received) == 1 else 200)  # the first delivery fails
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_zeta_callback_reaches_a_local_receiver_signed_after_a_retry(http, demo_key):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hooks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
        submitted = http.post("/v1/video/generations", headers=auth(demo_key), json={
            "model": "zeta-video-1-0-pro-250528", "content": [{"type": "text", "text": "rain"}], "callback_url": hook})
        assert submitted.status_code == 200, submitted.text
        wait_for(lambda: len(_Hooks.received), lambda n: n >= 2, "the callback")
    finally:
        server.shutdown()
    body, headers = _Hooks.received[-1]
    payload = json.loads(body)
    assert payload["task_id"] == submitted.json()["taskId"] and payload["task_status"] == "succeeded"
    from gateway.tasks.callbacks import verify
    assert verify(body, headers["X-Gateway-Signature"], "local-callback-secret")
