"""The alpha routes and the life of their tasks: the alpha, video, poller and callback functions
in-process, the emulator's tables and queues, the simulated alpha upstream on 127.0.0.1 (it
checks the HS256 token) with a clock the test moves."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from gateway.admission import balances
from gateway.tasks import callbacks, engine
from tests.conftest import serve_asgi
from tests.integration.tasks_support import call, ledger_of, status_and_json, stored, task_count
from tests.integration.test_task_faults import Receiver


def png(width: int, height: int) -> str:
    """A real grey PNG of that size, as bare base64."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return base64.b64encode(data).decode()


IMAGE = png(640, 360)
T2V = {"model_name": "alpha-v1-6", "prompt": "a lighthouse in a storm", "duration": "5"}
I2V = {"model": "alpha-v1-6", "image": IMAGE, "prompt": "the sea moves"}
# 0.028 USD/s of std video for the first generation = 14,000 units a second; the second: 140,000.
V1_STD_5 = 70_000


def post(functions, ctx, path, body, key):
    return status_and_json(call(functions["alpha"], ctx, "POST", path, key, body=body))


def get(functions, ctx, path, key, *, resource=None, params=None, query=None, headers=None):
    from tests.conftest import api_event

    event = api_event("GET", path, resource=resource, path_parameters=params, query=query,
                      headers={"Authorization": f"Bearer {key}", **(headers or {})})
    return status_and_json(functions["alpha"].lambda_handler(event, ctx))


def t2v_query(functions, ctx, task_id, key, model="alpha-v1-6"):
    return get(functions, ctx, f"/alpha/v1/videos/text2video/{task_id}", key,
               resource="/alpha/v1/videos/text2video/{task_id}", params={"task_id": task_id},
               headers={"model": model} if model else None)


def query(functions, ctx, operation, task_id, key):
    base = "/alpha/v1/images" if operation == "omni-image" else "/alpha/v1/videos"
    return get(functions, ctx, f"{base}/{operation}/{task_id}", key, resource=f"{base}/{operation}/{{task_id}}",
               params={"task_id": task_id})


def general(functions, ctx, task_id, key, taskid=None):
    return get(functions, ctx, f"/alpha/v1/video/{task_id}", key, resource="/alpha/v1/video/{task_id}",
               params={"task_id": task_id}, query={"taskid": taskid or task_id})


def quota(accounts) -> int:
    return balances.get_user(1)["quota"]


def test_a_text2video_task_goes_from_submit_to_succeed_in_the_upstreams_envelope_and_is_settled_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    # Given a text2video submit with an external id
    status, answer = post(functions, lambda_context, "/alpha/v1/videos/text2video",
                          {**T2V, "external_task_id": "mine-1"}, demo["key"])
    assert status == 200 and answer["code"] == 0 and answer["message"] == "SUCCEED" and answer["request_id"]
    data = answer["data"]
    assert data["task_status"] == "submitted" and data["created_at"] == data["updated_at"]
    assert data["created_at"] > 10**12  # milliseconds
    assert data["task_info"] == {"external_task_id": "mine-1"}
    task_id = data["task_id"]
    assert quota(accounts) == before - V1_STD_5  # held at submit
    # When a poll finds it running, and a later one finds it done
    clock.advance(15)
    queues.polls(lambda_context, rounds=1)
    assert t2v_query(functions, lambda_context, task_id, demo["key"])[1]["data"]["task_status"] == "processing"
    clock.advance()
    queues.polls(lambda_context)
    # Then the query answers the upstream's result shape, and the charge is settled once
    status, answer = t2v_query(functions, lambda_context, task_id, demo["key"])
    data = answer["data"]
    assert status == 200 and answer["code"] == 0 and data["task_status"] == "succeed"
    video = data["task_result"]["videos"][0]
    assert video["url"].startswith(tasks_env + "/alpha/files/") and video["duration"] == "5" and video["id"]
    assert data["final_unit_deduction"] == str(V1_STD_5) and data["task_info"] == {"external_task_id": "mine-1"}
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", V1_STD_5)]
    assert quota(accounts) == before - V1_STD_5
    # And the general query answers the same task
    assert general(functions, lambda_context, task_id, demo["key"])[1]["data"] == data


def test_the_ledger_shows_pro_at_three_and_a_half_times_std_and_ten_seconds_at_twice_five(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    asked = {
        ("alpha-v1-6", "std", "5"): None, ("alpha-v1-6", "pro", "5"): None,
        ("alpha-v1-6", "std", "10"): None, ("alpha-v1-6", "pro", "10"): None,
        ("alpha-v2-1-master", None, "5"): None, ("alpha-v2-1-master", None, "10"): None,
    }
    for model, mode, seconds in asked:
        body = {"model_name": model, "prompt": "a kite", "duration": seconds, **({"mode": mode} if mode else {})}
        status, answer = post(functions, lambda_context, "/alpha/v1/videos/text2video", body, demo["key"])
        assert status == 200, answer
        asked[(model, mode, seconds)] = answer["data"]["task_id"]
    clock.advance()
    queues.polls(lambda_context)
    settled = {}
    for spec, task_id in asked.items():
        entries = ledger_of(accounts, task_id)
        assert [e["outcome"] for e in entries] == ["settled"]
        settled[spec] = entries[0]["units"]
    std5 = settled[("alpha-v1-6", "std", "5")]
    assert std5 == V1_STD_5
    assert settled[("alpha-v1-6", "pro", "5")] == std5 * 35 // 10
    assert settled[("alpha-v1-6", "std", "10")] == 2 * std5
    assert settled[("alpha-v1-6", "pro", "10")] == 2 * std5 * 35 // 10
    # The second generation costs 10x the first at 5 s, 20x the first's 5 s at 10 s
    assert settled[("alpha-v2-1-master", None, "5")] == 10 * std5
    assert settled[("alpha-v2-1-master", None, "10")] == 20 * std5


def test_a_failed_task_is_refunded_exactly_once_and_says_why(tasks_env, functions, queues, demo, accounts,
                                                            lambda_context, clock):
    before = quota(accounts)
    _, answer = post(functions, lambda_context, "/alpha/v1/videos/text2video",
                     {**T2V, "prompt": "a storm #fault=fail", "mode": "pro"}, demo["key"])
    task_id = answer["data"]["task_id"]
    clock.advance()
    queues.polls(lambda_context)
    # A redelivered poll and a sweep change nothing
    engine.poll_once(task_id)
    engine.sweep(now=clock.now + 10**6)
    data = t2v_query(functions, lambda_context, task_id, demo["key"])[1]["data"]
    assert data["task_status"] == "failed" and "fault=fail" in data["task_status_msg"]
    assert data["final_unit_deduction"] == "0" and data["task_result"] == {"videos": []}
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"]
    assert quota(accounts) == before


def test_masks_the_upstream_finds_unfit_fail_the_task_with_a_full_refund(tasks_env, functions, queues, demo,
                                                                         accounts, lambda_context, clock):
    before = quota(accounts)
    body = {**I2V, "static_mask": "https://masks.example/mismatch.png"}
    status, answer = post(functions, lambda_context, "/alpha/v1/videos/image2video", body, demo["key"])
    assert status == 200
    task_id = answer["data"]["task_id"]
    clock.advance()
    queues.polls(lambda_context)
    data = t2v_query(functions, lambda_context, task_id, demo["key"])[1]["data"]
    assert data["task_status"] == "failed" and "mask" in data["task_status_msg"]
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"] and quota(accounts) == before


OPERATIONS = [
    ("image2video", "/alpha/v1/videos/image2video", I2V, "videos", 70_000),
    ("omni-video", "/alpha/v1/videos/omni-video",
     {"model": "alpha-video-o1", "prompt": "a dancer", "negative_prompt": "blur", "duration": 5,
      "aspect_ratio": "9:16", "cfg_scale": 0.5, "mode": "pro"}, "videos", 980_000),  # 0.112 x 5 x 3.5
    ("motion-control", "/alpha/v1/videos/motion-control",
     {"model_name": "alpha-video-o1", "image_url": "https://cdn.example/a.png",
      "video_url": "https://cdn.example/move.mp4?seconds=12", "mode": "std", "duration": 5,
      "character_orientation": "video"}, "videos", 672_000),  # 0.112 x 12 s of the reference video, not 5
    ("omni-image", "/alpha/v1/images/omni-image", {"model_name": "alpha-image-o1", "prompt": "a cat", "n": 2},
     "images", 28_000),  # 0.028 x 2 images
]


@pytest.mark.parametrize("operation,path,body,kind,units", OPERATIONS, ids=[o[0] for o in OPERATIONS])
def test_each_operation_goes_from_submit_to_its_result_through_its_query(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, operation, path, body, kind, units):
    status, answer = post(functions, lambda_context, path, body, demo["key"])
    assert status == 200 and answer["data"]["task_status"] == "submitted", answer
    task_id = answer["data"]["task_id"]
    assert query(functions, lambda_context, operation, task_id, demo["key"])[1]["data"]["task_status"] == "submitted"
    clock.advance()
    queues.polls(lambda_context)
    status, answer = query(functions, lambda_context, operation, task_id, demo["key"])
    data = answer["data"]
    assert status == 200 and data["task_status"] == "succeed"
    assert data["task_result"][kind] and all(item["url"].startswith(tasks_env + "/alpha/files/")
                                             for item in data["task_result"][kind])
    if kind == "images":
        assert [i["index"] for i in data["task_result"]["images"]] == [0, 1]
    assert data["final_unit_deduction"] == str(units)
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", units)]


@pytest.mark.parametrize("orientation,seconds,held,settled", [
    ("video", 12, 1_680_000, 672_000),  # held: 0.112 x 30 s; settled: x 12 s
    ("image", 7, 560_000, 392_000),     # held: 0.112 x 10 s; settled: x 7 s
])
def test_a_motion_control_holds_the_longest_video_and_settles_the_length_of_the_reference_video(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, orientation, seconds, held, settled):
    # The upstream's motion control has no duration: the video lasts as long as the reference
    # video, up to 30 s (orientation video) or 10 s (image). The simulator refuses a `duration`.
    before = quota(accounts)
    body = {"model_name": "alpha-video-o1", "image_url": "https://cdn.example/a.png", "mode": "std",
            "video_url": f"https://cdn.example/move.mp4?seconds={seconds}", "duration": 5,
            "character_orientation": orientation}
    status, answer = post(functions, lambda_context, "/alpha/v1/videos/motion-control", body, demo["key"])
    assert status == 200, answer
    task_id = answer["data"]["task_id"]
    assert before - quota(accounts) == held
    clock.advance()
    queues.polls(lambda_context)
    data = query(functions, lambda_context, "motion-control", task_id, demo["key"])[1]["data"]
    assert data["task_status"] == "succeed" and data["task_result"]["videos"][0]["duration"] == str(seconds)
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", settled)]
    assert before - quota(accounts) == settled and data["final_unit_deduction"] == str(settled)


def test_alpha_models_run_on_the_generic_route_and_answer_its_result(tasks_env, functions, queues, demo, accounts,
                                                                    lambda_context, clock):
    video = functions["video"]
    for body in ({"model": "alpha-v1-6", "prompt": "a fox", "duration": "5"},
                 {"model": "alpha-v1-6", "prompt": "a fox", "duration": "10", "image": IMAGE}):
        status, answer = status_and_json(call(video, lambda_context, "POST", "/v1/video/generations", demo["key"],
                                              body=body))
        assert status == 200 and answer == {"task_id": answer["task_id"], "task_status": "pending", "message": ""}
        clock.advance()
        queues.polls(lambda_context)
        status, result = status_and_json(call(video, lambda_context, "GET", "/v1/video/generations/result",
                                              demo["key"], query={"taskid": answer["task_id"]}))
        assert status == 200 and result["task_status"] == "succeeded" and result["duration"] == body["duration"]
        assert result["video_result"].startswith(tasks_env + "/alpha/files/")
        assert stored(answer["task_id"])["public"]["operation"] == ("image2video" if "image" in body else "text2video")
    # An alpha model of another operation is refused there, naming the model
    status, answer = status_and_json(call(video, lambda_context, "POST", "/v1/video/generations", demo["key"],
                                          body={"model": "alpha-video-o1", "prompt": "x"}))
    assert status == 400 and answer["error"]["param"] == "model" and "/alpha/v1" in answer["error"]["message"]
    # and an alpha rule is checked there too, in the route's own envelope, holding nothing
    before = quota(accounts)
    status, answer = status_and_json(call(video, lambda_context, "POST", "/v1/video/generations", demo["key"],
                                          body={"model": "alpha-v1-6", "prompt": "x", "duration": "7"}))
    assert status == 400 and answer["error"]["param"] == "duration" and quota(accounts) == before


def test_a_callback_follows_every_status_change_with_the_upstreams_payload_signed(
        tasks_env, functions, queues, demo, lambda_context, clock):
    receiver = Receiver(failures=0)
    with serve_asgi(Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])) as url:
        post(functions, lambda_context, "/alpha/v1/videos/text2video",
             {**T2V, "callback_url": url + "/hook", "external_task_id": "cb-1"}, demo["key"])
        clock.advance(15)
        queues.polls(lambda_context, rounds=1)
        queues.callbacks(lambda_context)
        queues.polls(lambda_context, rounds=1)  # a poll that finds nothing changed tells nobody
        queues.callbacks(lambda_context)
        clock.advance()
        queues.polls(lambda_context)
        queues.callbacks(lambda_context)
    payloads = [json.loads(body) for body, _ in receiver.received]
    assert [p["task_status"] for p in payloads] == ["processing", "succeed"]
    assert set(payloads[-1]) == {"task_id", "task_status", "task_status_msg", "created_at", "updated_at",
                                 "final_unit_deduction", "task_info", "task_result"}
    assert payloads[-1]["task_info"] == {"external_task_id": "cb-1"}
    assert payloads[-1]["final_unit_deduction"] == str(V1_STD_5) and payloads[-1]["task_result"]["videos"]
    assert all(callbacks.verify(body, headers["x-gateway-signature"], "test-secret")
               for body, headers in receiver.received)


def test_another_users_task_and_an_unknown_one_are_404_with_code_1203(tasks_env, functions, demo, accounts,
                                                                       lambda_context):
    _, answer = post(functions, lambda_context, "/alpha/v1/videos/text2video", T2V, demo["key"])
    task_id = answer["data"]["task_id"]
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    for status, body in (t2v_query(functions, lambda_context, task_id, other),
                         general(functions, lambda_context, task_id, other),
                         t2v_query(functions, lambda_context, "task_unknown", demo["key"]),
                         query(functions, lambda_context, "omni-image", task_id, demo["key"])):  # another operation
        assert status == 404 and body["code"] == 1203 and body["data"] is None and body["request_id"]
    # A task of another family is not an alpha task
    _, delta = status_and_json(call(functions["video"], lambda_context, "POST", "/v1/video/generations", demo["key"],
                                    body={"model": "zeta-video-1-0-pro-250528",
                                          "content": [{"type": "text", "text": "waves"}]}))
    assert general(functions, lambda_context, delta["taskId"], demo["key"])[0] == 404
    # The text2video query takes the spec's required model header; the general query its taskid
    status, body = t2v_query(functions, lambda_context, task_id, demo["key"], model=None)
    assert status == 400 and body["code"] == 1201 and body["message"].startswith("model:")
    status, body = general(functions, lambda_context, task_id, demo["key"], taskid="task_other")
    assert status == 400 and body["code"] == 1201 and body["message"].startswith("taskid:")


def test_the_envelope_speaks_the_upstreams_codes_for_keys_and_quota(tasks_env, functions, demo, accounts,
                                                                    lambda_context):
    status, body = post(functions, lambda_context, "/alpha/v1/videos/text2video", T2V, "")
    assert status == 401 and body["code"] == 1001
    status, body = post(functions, lambda_context, "/alpha/v1/videos/text2video", T2V, "sk-" + "x" * 48)
    assert status == 401 and body["code"] == 1002
    accounts.users.create_user(username="poor", quota=10, user_id=3)
    poor, _ = accounts.keys.create_key(3, name="poor")
    status, body = post(functions, lambda_context, "/alpha/v1/videos/text2video", T2V, poor)
    assert status == 429 and body["code"] == 1102 and set(body) == {"code", "message", "request_id", "data"}
    assert task_count() == 0


def test_an_upstream_refusal_at_submit_refunds_at_once_and_stores_nothing(tasks_env, functions, demo, accounts,
                                                                         lambda_context):
    before = quota(accounts)
    status, body = post(functions, lambda_context, "/alpha/v1/videos/text2video",
                        {**T2V, "prompt": "no #fault=reject"}, demo["key"])
    assert status == 400 and body["code"] == 1201 and "1201" in body["message"]
    assert quota(accounts) == before and task_count() == 0


def _tail(mode):
    return {**I2V, "image_tail": IMAGE, **({"mode": mode} if mode else {})}


BAD = [
    ("text2video", {**T2V, "model_name": "alpha-v9"}, "model_name"),
    ("text2video", {**T2V, "model": "alpha-v1", "model_name": "alpha-v1-6"}, "model"),
    ("text2video", {"model_name": "alpha-v1"}, "prompt"),
    ("text2video", {**T2V, "prompt": "x" * 2501}, "prompt"),
    ("text2video", {**T2V, "negative_prompt": "x" * 2501}, "negative_prompt"),
    ("text2video", {**T2V, "cfg_scale": 1.5}, "cfg_scale"),
    ("text2video", {**T2V, "mode": "max"}, "mode"),
    ("text2video", {**T2V, "model_name": "alpha-v1-5", "mode": "std"}, "mode"),
    ("text2video", {**T2V, "model_name": "alpha-v2-master", "mode": "pro"}, "mode"),
    ("text2video", {**T2V, "aspect_ratio": "4:3"}, "aspect_ratio"),
    ("text2video", {**T2V, "duration": "7"}, "duration"),
    ("text2video", {**T2V, "callback_url": "http://10.0.0.7/hook"}, "callback_url"),
    ("text2video", {**T2V, "camera_control": {"type": "simple"}}, "camera_control"),
    ("text2video", {**T2V, "camera_control": {"type": "down_back", "config": {"zoom": 2}}}, "camera_control"),
    ("text2video", {**T2V, "camera_control": {"type": "orbit"}}, "camera_control.type"),
    ("text2video", {**T2V, "camera_control": {"type": "simple", "config": {"zoom": 11}}}, "camera_control.config.zoom"),
    ("text2video", {**T2V, "camera_control": {"type": "simple", "config": {"zoom": 1, "pan": 1}}},
     "camera_control.config"),
    ("text2video", {**T2V, "camera_control": {"type": "simple", "config": {"zoom": 0}}}, "camera_control.config"),
    ("text2video", {**T2V, "camera_control": {"type": "simple", "config": {"tit": 1, "tilt": 2}}},
     "camera_control.config"),
    ("text2video", {**T2V, "seed": 1}, "seed"),
    ("image2video", {"model_name": "alpha-v1-6"}, "image"),
    ("image2video", {**I2V, "model": "alpha-video-o1"}, "model"),
    ("image2video", {**I2V, "image": "data:image/png;base64," + IMAGE}, "image"),
    ("image2video", {**I2V, "image": "ftp://host/a.png"}, "image"),
    ("image2video", {**I2V, "image": png(200, 400)}, "image"),
    ("image2video", {**I2V, "image": png(1000, 300)}, "image"),
    ("image2video", {**I2V, "image": base64.b64encode(b"GIF89a" + b"\0" * 64).decode()}, "image"),
    ("image2video", _tail(None), "image_tail"),
    ("image2video", _tail("std"), "image_tail"),
    ("image2video", {**I2V, "static_mask": png(300, 300)}, "static_mask"),
    ("image2video", {**I2V, "static_mask": png(640, 360),
                     "dynamic_masks": [{"mask": png(1280, 720), "trajectories": [{"x": 1, "y": 1}, {"x": 2, "y": 2}]}]},
     "dynamic_masks[0].mask"),
    ("image2video", {**I2V, "dynamic_masks": [{"mask": png(640, 360), "trajectories": [{"x": 1, "y": 1}]}]},
     "dynamic_masks[0].trajectories"),
    ("image2video", {**I2V, "dynamic_masks": [{"mask": png(640, 360),
                                               "trajectories": [{"x": i, "y": i} for i in range(78)]}]},
     "dynamic_masks[0].trajectories"),
    ("image2video", {**I2V, "dynamic_masks": [{"mask": "https://m.example/m.png",
                                               "trajectories": [{"x": 1, "y": 1}, {"x": "a", "y": 2}]}]},
     "dynamic_masks[0].trajectories[1].x"),
    ("image2video", {**I2V, "dynamic_masks": [{"mask": "https://m.example/m.png",
                                               "trajectories": [{"x": 1, "y": 1}, {"x": 2, "y": 2}]}] * 7},
     "dynamic_masks"),
    ("image2video", {**I2V, "static_mask": "https://m.example/m.png",
                     "camera_control": {"type": "down_back"}}, "camera_control"),
    ("image2video", {**_tail("pro"), "dynamic_masks": [{"mask": "https://m.example/m.png",
                                                        "trajectories": [{"x": 1, "y": 1}, {"x": 2, "y": 2}]}]},
     "dynamic_masks"),
    ("omni-video", {"prompt": "x"}, "model_name"),
    ("omni-video", {"model": "alpha-video-o1", "prompt": "x", "duration": "5"}, "duration"),
    ("omni-video", {"model": "alpha-video-o1", "prompt": "x", "duration": 11}, "duration"),
    ("omni-video", {"model": "alpha-v1", "prompt": "x"}, "model"),
    ("omni-video", {"model": "alpha-video-o1", "prompt": "x", "cfg_scale": True}, "cfg_scale"),
    ("text2video", {**T2V, "cfg_scale": "0.5"}, "cfg_scale"),
    ("motion-control", {"model": "alpha-video-o1", "image_url": "https://a/b.png"}, "video_url"),
    ("motion-control", {"model": "alpha-video-o1", "image_url": "https://a/b.png", "video_url": "https://a/v.mp4",
                        "character_orientation": "left"}, "character_orientation"),
    ("omni-image", {"model_name": "alpha-image-o1"}, "prompt"),
    ("omni-image", {"model_name": "alpha-image-o1", "prompt": "x", "n": 10}, "n"),
]
PATHS = {"text2video": "/alpha/v1/videos/text2video", "image2video": "/alpha/v1/videos/image2video",
         "omni-video": "/alpha/v1/videos/omni-video", "motion-control": "/alpha/v1/videos/motion-control",
         "omni-image": "/alpha/v1/images/omni-image"}


@pytest.mark.parametrize("operation,body,named", BAD, ids=[f"{o}-{n}-{i}" for i, (o, _, n) in enumerate(BAD)])
def test_every_rule_refuses_a_bad_value_with_1201_naming_the_field_holding_nothing(
        tasks_env, functions, demo, accounts, lambda_context, monkeypatch, operation, body, named):
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    from gateway.settings import reload_settings
    reload_settings()
    before = quota(accounts)
    status, answer = post(functions, lambda_context, PATHS[operation], body, demo["key"])
    assert status == 400 and answer["code"] == 1201, answer
    assert answer["message"].startswith(named + ":") or answer["message"].startswith(named + " "), answer
    assert quota(accounts) == before and task_count() == 0


def test_custom_elements_and_voices_are_relayed_kept_per_user_and_free(tasks_env, functions, demo, accounts,
                                                                      lambda_context, clock):
    before = quota(accounts)
    element = {"model": "alpha-video-o1", "element_name": "hero", "element_description": "a knight in red",
               "element_frontal_image": "https://cdn.example/hero.png",
               "element_refer_list": [{"image_url": "https://cdn.example/hero-side.png"}],
               "tag_list": [{"tag_id": "o_102"}]}
    status, answer = post(functions, lambda_context, "/alpha/v1/general/custom-elements", element, demo["key"])
    assert status == 200 and answer["code"] == 0
    created = answer["data"]
    assert created["element_id"] and created["element_name"] == "hero" and created["model_name"] == "alpha-video-o1"
    # A voice is made by a creation task upstream (its create answers task_id and task_status)
    status, answer = post(functions, lambda_context, "/alpha/v1/general/custom-voices",
                          {"model": "alpha-video-o1", "voice_name": "narrator",
                           "voice_url": "https://cdn.example/voice.mp3"}, demo["key"])
    assert status == 200, answer
    creating = answer["data"]
    assert creating["task_id"] and creating["task_status"] == "submitted" and creating["voice_name"] == "narrator"
    assert "voice_id" not in creating
    # The lists and the single read answer the caller's own; the voice's id once the upstream made it
    listed = get(functions, lambda_context, "/alpha/v1/general/custom-elements", demo["key"],
                 query={"model_name": "alpha-video-o1"})[1]["data"]
    assert [e["element_id"] for e in listed] == [created["element_id"]]
    voices = get(functions, lambda_context, "/alpha/v1/general/custom-voices", demo["key"],
                 query={"model_name": "alpha-video-o1"})[1]["data"]
    assert [(v["task_id"], v["task_status"], v.get("voice_id")) for v in voices] == [
        (creating["task_id"], "submitted", None)]
    clock.advance()
    voices = get(functions, lambda_context, "/alpha/v1/general/custom-voices", demo["key"],
                 query={"model_name": "alpha-video-o1"})[1]["data"]
    voice = voices[0]
    assert len(voices) == 1 and voice["task_status"] == "succeed" and voice["voice_id"].startswith("v-")
    assert voice["voice_name"] == "narrator" and voice["task_id"] == creating["task_id"]
    by_task = get(functions, lambda_context, f"/alpha/v1/general/custom-voices/{creating['task_id']}", demo["key"],
                  resource="/alpha/v1/general/custom-voices/{voice_id}", params={"voice_id": creating["task_id"]},
                  query={"model_name": "alpha-video-o1"})
    assert by_task[0] == 200 and by_task[1]["data"] == voice
    path = f"/alpha/v1/general/custom-voices/{voice['voice_id']}"
    one = get(functions, lambda_context, path, demo["key"], resource="/alpha/v1/general/custom-voices/{voice_id}",
              params={"voice_id": voice["voice_id"]}, query={"model_name": "alpha-video-o1"})
    assert one[0] == 200 and one[1]["data"] == voice
    # Another user sees none of them
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    assert get(functions, lambda_context, "/alpha/v1/general/custom-voices", other,
               query={"model_name": "alpha-video-o1"})[1]["data"] == []
    status, body = get(functions, lambda_context, path, other, resource="/alpha/v1/general/custom-voices/{voice_id}",
                       params={"voice_id": voice["voice_id"]}, query={"model_name": "alpha-video-o1"})
    assert status == 404 and body["code"] == 1203
    # The required fields and query parameters are checked; nothing was charged
    status, body = post(functions, lambda_context, "/alpha/v1/general/custom-voices",
                        {"model": "alpha-video-o1", "voice_name": "x"}, demo["key"])
    assert status == 400 and body["message"].startswith("voice_url:")
    status, body = post(functions, lambda_context, "/alpha/v1/general/custom-voices",
                        {"model": "alpha-video-o1", "voice_name": "n" * 21, "voice_url": "https://a/v.mp3"},
                        demo["key"])
    assert status == 400 and body["message"].startswith("voice_name:")
    status, body = get(functions, lambda_context, "/alpha/v1/general/custom-elements", demo["key"])
    assert status == 400 and body["message"].startswith("model_name:")
    assert quota(accounts) == before


def test_the_sample_event_drives_the_alpha_function(tasks_env, functions, demo, accounts, lambda_context):
    from tests.conftest import EVENTS

    before = quota(accounts)
    answer = functions["alpha"].lambda_handler(json.loads((EVENTS / "alpha.json").read_text()), lambda_context)
    body = json.loads(answer["body"])
    assert answer["statusCode"] == 200 and body["code"] == 0, body
    assert body["data"]["task_info"] == {"external_task_id": "sample-1"}
    assert quota(accounts) == before - V1_STD_5  # held until the task ends
