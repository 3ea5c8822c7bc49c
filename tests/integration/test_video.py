"""The video routes and the life of their tasks: the real functions in-process, the emulator's
tables and queues, the simulated upstreams on 127.0.0.1 with a clock the test moves."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gateway.admission import balances
from gateway.routing.catalog import SIMULATOR_KEYS
from gateway_local.simulators.delta import MP4_BYTES
from tests.conftest import api_event, use_environment
from tests.integration.money_support import assert_nothing_held, put_in_group
from tests.integration.tasks_support import call, ledger_of, status_and_json, stored, task_count

DELTA = {"model": "delta-3.0-generate-001", "instances": [{"prompt": "a red fox in the snow"}],
         "parameters": {"durationSeconds": 8, "generateAudio": True, "sampleCount": 2}}
DELTA_UNITS = 3_200_000  # 0.40 USD/s x 8 s x 2 videos
ZETA = {"model": "zeta-video-1-0-pro-250528", "content": [{"type": "text", "text": "waves at dusk --duration 10"}]}
ZETA_UNITS = 612_000  # 1920x1088 (1080p 16:9) x 24 fps x 10 s / 1024 = 489600 tokens at 2.50 USD/M
EPSILON = {"prompt": "a paper boat", "model": "epsilon-2-pro", "seconds": "8", "size": "1792x1024"}
EPSILON_UNITS = 1_200_000  # 0.30 USD/s x 8 s


def submit(functions, ctx, body, key):
    return status_and_json(call(functions["video"], ctx, "POST", "/v1/video/generations", key, body=body))


def result(functions, ctx, task_id, key):
    return status_and_json(call(functions["video"], ctx, "GET", "/v1/video/generations/result", key,
                                query={"taskid": task_id}))


def create_video(functions, ctx, body, key):
    return status_and_json(call(functions["video"], ctx, "POST", "/v1/videos", key, body=body))


def get_video(functions, ctx, video_id, key):
    return status_and_json(call(functions["video"], ctx, "GET", f"/v1/videos/{video_id}", key,
                                resource="/v1/videos/{video_id}", path_parameters={"video_id": video_id}))


def content(functions, ctx, video_id, key, variant=None):
    return call(functions["video"], ctx, "GET", f"/videos/{video_id}/content", key,
                resource="/videos/{videoId}/content", path_parameters={"videoId": video_id},
                query={"variant": variant} if variant else None)


def quota(accounts) -> int:
    return balances.get_user(1)["quota"]


def test_a_delta_task_goes_from_submit_to_succeeded_with_its_urls_and_is_settled_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    # Given a delta submit
    status, answer = submit(functions, lambda_context, DELTA, demo["key"])
    assert status == 200 and answer["task_status"] == "pending" and answer["message"] == ""
    task_id = answer["task_id"]
    assert quota(accounts) == before - DELTA_UNITS  # reserved at submit
    assert result(functions, lambda_context, task_id, demo["key"])[1]["task_status"] == "pending"
    # When the upstream is still working, a poll makes it processing
    queues.polls(lambda_context, rounds=1)
    assert result(functions, lambda_context, task_id, demo["key"])[1]["task_status"] == "processing"
    # And when it is done, the poller finishes it
    clock.advance()
    queues.polls(lambda_context)
    status, answer = result(functions, lambda_context, task_id, demo["key"])
    assert status == 200
    assert answer["task_status"] == "succeeded" and answer["video_id"] == task_id and answer["duration"] == "8"
    assert len(answer["video_results"]) == 2 and answer["video_result"] == answer["video_results"][0]
    # The links are the gateway's own (the upstream's answer only with the channel's key)
    assert all(urlsplit(url).path.startswith(f"/v1/video/results/{task_id}/") for url in answer["video_results"])
    # Then the reservation was settled exactly once, at its full price
    entries = ledger_of(accounts, task_id)
    assert [(e["outcome"], e["units"]) for e in entries] == [("settled", DELTA_UNITS)]
    assert quota(accounts) == before - DELTA_UNITS
    assert "open_shard" not in stored(task_id) and stored(task_id)["billing"] == "settled"


def open_link(functions, ctx, link: str) -> httpx.Response | dict:
    """What a client with no key gets from a result link: the gateway's route called as API Gateway
    would (no credential), following its redirect with plain HTTP; any other link fetched as is."""
    parts = urlsplit(link)
    if not parts.path.startswith("/v1/video/results/"):
        return httpx.get(link)  # an upstream's link, as the client's browser or curl would open it
    task_id, index = parts.path.split("/")[-2:]
    answer = functions["video"].lambda_handler(api_event(
        "GET", parts.path, resource="/v1/video/results/{task_id}/{index}",
        path_parameters={"task_id": task_id, "index": index},
        query={k: v[0] for k, v in parse_qs(parts.query).items()}, headers={"Accept": "video/mp4"}), ctx)
    if answer["statusCode"] == 302:
        return httpx.get(answer["multiValueHeaders"]["Location"][0])  # S3's presigned link, no key either
    return answer


def test_a_delta_video_link_opens_without_any_key_for_a_day_and_carries_none(
        tasks_env, functions, queues, demo, lambda_context, clock):
    # Given a delta task whose upstream answers its video.uri only with the channel's key (403 without)
    task_id = submit(functions, lambda_context, DELTA, demo["key"])[1]["task_id"]
    clock.advance()
    queues.polls(lambda_context)
    answer = result(functions, lambda_context, task_id, demo["key"])[1]
    assert answer["task_status"] == "succeeded" and len(answer["video_results"]) == 2
    for link in answer["video_results"]:
        # Then no link carries a channel key, and each opens with no key at all
        assert SIMULATOR_KEYS.get("delta", "simulator") not in link and "key=" not in link
        opened = open_link(functions, lambda_context, link)
        assert isinstance(opened, httpx.Response) and opened.status_code == 200 and opened.content == MP4_BYTES
        # And it is valid as long as the copy is kept (a day after the task ended), not an hour
        expires = int(parse_qs(urlsplit(link).query)["expires"][0])
        assert expires == int(stored(task_id)["completed_at"]) + 24 * 3600 - 60
    # Even once the upstream no longer keeps the video (two days), the kept copy serves
    clock.advance(3 * 24 * 3600)
    assert open_link(functions, lambda_context, answer["video_result"]).content == MP4_BYTES
    # And a tampered link is refused
    forged = open_link(functions, lambda_context, answer["video_result"].replace("signature=", "signature=0"))
    assert forged["statusCode"] == 403


def test_a_delta_channel_on_plain_http_gets_its_videos_with_its_key(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, tmp_path):
    # Given a delta channel whose base URL is plain http (a relay on a private network), listing
    # no poll_hosts: its upstream's video.uri is on that same origin and answers only with the key
    document = {"channels": [{"name": "delta-relay", "protocol": "delta", "base_url": tasks_env + "/delta",
                              "api_key": "relay-key", "models": ["*"]}]}
    path = tmp_path / "channels.json"
    path.write_text(json.dumps(document))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path), GATEWAY_SIMULATOR_URL=None)
    try:
        task_id = submit(functions, lambda_context, DELTA, demo["key"])[1]["task_id"]
        clock.advance()
        queues.polls(lambda_context)
        # Then the videos were fetched with the channel's key (before: without it, refused, the
        # task failed and refunded though the upstream had made and charged them)
        answer = result(functions, lambda_context, task_id, demo["key"])[1]
        assert answer["task_status"] == "succeeded", answer
        assert [open_link(functions, lambda_context, link).content for link in answer["video_results"]] == \
            [MP4_BYTES, MP4_BYTES]
        assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]
    finally:
        use_environment(**saved)


def test_delta_videos_answered_inline_are_kept_and_served_by_the_gateways_links(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    body = {**DELTA, "instances": [{"prompt": "a fox #fault=inline"}]}
    task_id = submit(functions, lambda_context, body, demo["key"])[1]["task_id"]
    clock.advance()
    queues.polls(lambda_context)
    answer = result(functions, lambda_context, task_id, demo["key"])[1]
    assert answer["task_status"] == "succeeded" and len(answer["video_results"]) == 2
    assert all(open_link(functions, lambda_context, link).content == MP4_BYTES for link in answer["video_results"])
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", DELTA_UNITS)]


def test_without_a_results_bucket_a_delta_link_relays_the_video_fetched_with_the_channels_key(
        tasks_env, functions, queues, demo, lambda_context, clock):
    saved = use_environment(RESULTS_BUCKET=None)
    try:
        task_id = submit(functions, lambda_context, DELTA, demo["key"])[1]["task_id"]
        clock.advance()
        queues.polls(lambda_context)
        link = result(functions, lambda_context, task_id, demo["key"])[1]["video_result"]
        served = open_link(functions, lambda_context, link)
        assert served["statusCode"] == 200 and base64.b64decode(served["body"]) == MP4_BYTES
    finally:
        use_environment(**saved)


def test_a_failed_task_gives_back_exactly_its_reservation(tasks_env, functions, queues, demo, accounts,
                                                          lambda_context, clock):
    before = quota(accounts)
    body = {**ZETA, "content": [{"type": "text", "text": "storm #fault=fail --duration 10"}]}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 200 and answer["status"] == "queued"
    assert quota(accounts) == before - ZETA_UNITS
    clock.advance()
    queues.polls(lambda_context)
    status, answer = result(functions, lambda_context, answer["taskId"], demo["key"])
    assert answer["task_status"] == "failed" and "Simulated generation failure" in answer["message"]
    assert answer["video_results"] == [] and answer["video_result"] == ""
    assert quota(accounts) == before
    assert [(e["outcome"], e["units"], e["reserved_units"]) for e in ledger_of(accounts, answer["task_id"])] == [
        ("refunded", 0, ZETA_UNITS)]


def test_a_task_of_a_half_price_group_is_held_and_settled_at_that_ratio_whatever_changes_meanwhile(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    # Given the demo user in a group priced at 0.5
    put_in_group(accounts, 1, "half", {"default": 1, "half": 0.5})
    before = quota(accounts)
    # When a delta task asking for two videos is submitted (the upstream will deliver one)
    body = {**DELTA, "instances": [{"prompt": "a red fox #fault=fewer"}]}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 200
    task_id = answer["task_id"]
    assert quota(accounts) == before - DELTA_UNITS // 2  # half the worst case held
    # And the operator moves the user back to full price before the task ends
    put_in_group(accounts, 1, "default", {"default": 1, "half": 0.5})
    clock.advance()
    queues.polls(lambda_context)
    # Then the one video is settled at the ratio it was held at: half of half the hold
    (entry,) = ledger_of(accounts, task_id)
    assert (entry["outcome"], entry["units"], entry["reserved_units"]) == ("settled", DELTA_UNITS // 4,
                                                                          DELTA_UNITS // 2)
    assert (entry["group"], entry["group_ratio"], entry["base_units"]) == ("half", "0.5", DELTA_UNITS // 2)
    assert quota(accounts) == before - DELTA_UNITS // 4
    assert_nothing_held(accounts, before - DELTA_UNITS // 4)


def test_a_zeta_task_succeeds_and_its_submit_answer_is_the_zeta_shape(tasks_env, functions, queues, demo, accounts,
                                                                      lambda_context, clock):
    status, answer = submit(functions, lambda_context, ZETA, demo["key"])
    assert status == 200 and set(answer) == {"taskId", "status"} and answer["status"] == "queued"
    clock.advance()
    queues.polls(lambda_context)
    done = result(functions, lambda_context, answer["taskId"], demo["key"])[1]
    assert done["task_status"] == "succeeded" and done["video_result"].startswith(tasks_env + "/zeta/files/")
    assert done["duration"] == "10"
    assert [e["units"] for e in ledger_of(accounts, answer["taskId"])] == [ZETA_UNITS]


def test_an_expired_zeta_task_is_failed_and_refunded_at_the_first_poll_that_sees_it(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    # Ark's `expired` is final: before, the gateway polled it as running until the 2-hour sweep.
    before = quota(accounts)
    body = {**ZETA, "content": [{"type": "text", "text": "waves #fault=expire --duration 10"}]}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 200 and quota(accounts) == before - ZETA_UNITS
    clock.advance()
    queues.polls(lambda_context)
    done = result(functions, lambda_context, answer["taskId"], demo["key"])[1]
    assert done["task_status"] == "failed" and "expired" in done["message"]
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, answer["taskId"])] == [("refunded", 0)]
    assert quota(accounts) == before
    assert_nothing_held(accounts, before)


def test_a_zeta_task_holds_ark_s_worst_case_tokens_and_settles_the_tokens_ark_reports(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    # Ark bills width x height x 24 fps x seconds / 1024 tokens. An image-to-video task's ratio
    # follows its image (adaptive), so the hold is 720p's largest size (21:9, 1504x640), and the
    # settlement the tokens Ark reports for the 16:9 video it rendered (1248x704).
    before = quota(accounts)
    body = {"model": "zeta-video-1-0-pro-250528", "content": [
        {"type": "text", "text": "the cat jumps --rs 720p --duration 5"},
        {"type": "image_url", "image_url": {"image_url": "data:image/png;base64,iVBORw0KGgo="}}]}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 200, answer
    assert 1504 * 640 * 24 * 5 // 1024 == 112_800  # tokens; at 2.50 USD/M: 0.282 USD
    assert before - quota(accounts) == 141_000
    clock.advance()
    queues.polls(lambda_context)
    assert result(functions, lambda_context, answer["taskId"], demo["key"])[1]["task_status"] == "succeeded"
    assert 1248 * 704 * 24 * 5 // 1024 == 102_960  # tokens; at 2.50 USD/M: 0.2574 USD
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, answer["taskId"])] == [("settled", 128_700)]
    assert before - quota(accounts) == 128_700


def test_an_upstream_rejection_refunds_at_once_and_stores_no_task(tasks_env, functions, demo, accounts,
                                                                  lambda_context):
    before = quota(accounts)
    body = {**DELTA, "instances": [{"prompt": "nope #fault=reject"}]}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 400 and answer["error"]["code"] == "upstream_rejected"
    assert "simulated rejection" in answer["error"]["message"]
    assert quota(accounts) == before and task_count() == 0
    assert [e["outcome"] for e in accounts.usage.ledger(1)] == ["refunded"]


def test_an_upstream_server_error_at_submit_answers_502_and_refunds(tasks_env, functions, demo, accounts,
                                                                    lambda_context):
    before = quota(accounts)
    status, answer = create_video(functions, lambda_context, {**EPSILON, "prompt": "x #fault=500"}, demo["key"])
    assert status == 502 and answer["error"]["type"] == "upstream_error"
    assert quota(accounts) == before and task_count() == 0


def test_an_epsilon_video_is_created_queried_and_its_content_relayed_once_complete(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    status, video = create_video(functions, lambda_context, EPSILON, demo["key"])
    assert status == 200
    assert video["object"] == "video" and video["status"] == "queued" and video["progress"] == 0
    assert (video["completed_at"], video["error"], video["expires_at"], video["remixed_from_video_id"]) == (
        None, None, None, None)
    assert (video["model"], video["seconds"], video["size"]) == ("epsilon-2-pro", "8", "1792x1024")
    assert video["id"].startswith("video_") and quota(accounts) == before - EPSILON_UNITS
    # Before it is complete, the content is a clear 409
    early = content(functions, lambda_context, video["id"], demo["key"])
    assert early["statusCode"] == 409 and "video_not_ready" in early["body"]
    clock.advance(15)  # half of the simulated task time
    queues.polls(lambda_context, rounds=1)
    running = get_video(functions, lambda_context, video["id"], demo["key"])[1]
    assert running["status"] == "in_progress" and 0 < running["progress"] < 100
    clock.advance(16)
    queues.polls(lambda_context)
    status, done = get_video(functions, lambda_context, video["id"], demo["key"])
    assert done["status"] == "completed" and done["progress"] == 100 and isinstance(done["completed_at"], int)
    # Then the video comes from the gateway's kept copy, by a redirect to a short presigned link
    video_answer = content(functions, lambda_context, video["id"], demo["key"], "video")
    assert video_answer["statusCode"] == 302
    kept = httpx.get(video_answer["multiValueHeaders"]["Location"][0])  # no key: the link is signed by S3
    assert kept.status_code == 200 and b"ftyp" in kept.content and kept.headers["content-type"] == "video/mp4"
    # And each preview's bytes come back, base64-encoded for API Gateway, with their media type
    for variant, media_type, magic in (("thumbnail", "image/webp", b"WEBP"),
                                       ("spritesheet", "image/jpeg", b"\xff\xd8")):
        answer = content(functions, lambda_context, video["id"], demo["key"], variant)
        assert answer["statusCode"] == 200 and answer["isBase64Encoded"] is True
        assert answer["multiValueHeaders"]["Content-Type"] == [media_type]
        assert magic in base64.b64decode(answer["body"])
    bad = content(functions, lambda_context, video["id"], demo["key"], "poster")
    assert bad["statusCode"] == 400 and "variant" in bad["body"]
    assert [e["units"] for e in ledger_of(accounts, video["id"])] == [EPSILON_UNITS]


def test_an_epsilon_video_larger_than_a_lambda_answer_leaves_whole_through_a_presigned_link(
        tasks_env, functions, queues, demo, lambda_context, clock):
    from gateway.multipart import MAX_BINARY_ANSWER_BYTES
    from gateway_local.simulators.epsilon import BIG_MP4_BYTES

    # Given a completed video of 8 MB (a buffered function's answer carries about 4.6 MB)
    video = create_video(functions, lambda_context, {**EPSILON, "prompt": "a long take #fault=big"}, demo["key"])[1]
    clock.advance()
    queues.polls(lambda_context)
    # When the openai SDK's download asks for it, it is redirected to the kept copy
    answer = content(functions, lambda_context, video["id"], demo["key"])
    assert answer["statusCode"] == 302, answer["body"]
    kept = httpx.get(answer["multiValueHeaders"]["Location"][0])
    # Then every byte arrives
    assert kept.status_code == 200 and len(kept.content) > MAX_BINARY_ANSWER_BYTES
    assert len(kept.content) == 32 + BIG_MP4_BYTES and kept.content[4:8] == b"ftyp"


def test_a_task_is_visible_only_to_its_owner(tasks_env, functions, demo, accounts, lambda_context):
    _, delta_task = submit(functions, lambda_context, DELTA, demo["key"])
    _, video = create_video(functions, lambda_context, EPSILON, demo["key"])
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    assert result(functions, lambda_context, delta_task["task_id"], other)[0] == 404
    assert get_video(functions, lambda_context, video["id"], other)[0] == 404
    assert content(functions, lambda_context, video["id"], other)["statusCode"] == 404
    # A task of another family is not found under the other family's route either
    assert get_video(functions, lambda_context, delta_task["task_id"], demo["key"])[0] == 404
    assert result(functions, lambda_context, video["id"], demo["key"])[0] == 404
    assert result(functions, lambda_context, "task_unknown", demo["key"])[0] == 404
    status, answer = result(functions, lambda_context, "", demo["key"])
    assert status == 400 and answer["error"]["param"] == "taskid"


BAD_GENERATIONS = [
    ({**DELTA, "model": "delta-9"}, "model"),
    ({"instances": DELTA["instances"], "parameters": DELTA["parameters"]}, "model"),
    ({**DELTA, "instances": []}, "instances"),
    ({**DELTA, "instances": [{"prompt": ""}]}, "instances[0].prompt"),
    ({**DELTA, "instances": [{"prompt": "x", "image": {"inlineData": {"data": "AAAA"}}}]}, "image is empty"),
    ({**DELTA, "instances": [{"prompt": "x", "image": {"gcsUri": "gs://b/o.png", "mimeType": "image/png"}}]},
     "instances[0].image"),
    ({**DELTA, "instances": [{"prompt": "x", "lastFrame": {"bytesBase64Encoded": "AAAA", "mimeType": "image/png"}}]},
     "instances[0].lastFrame"),
    ({**DELTA, "parameters": {**DELTA["parameters"], "durationSeconds": 5}}, "parameters.durationSeconds"),
    ({**DELTA, "parameters": {"durationSeconds": 8}}, "parameters.generateAudio"),
    ({**DELTA, "parameters": {**DELTA["parameters"], "sampleCount": 5}}, "parameters.sampleCount"),
    ({**DELTA, "parameters": {**DELTA["parameters"], "seed": 4294967296}}, "parameters.seed"),
    ({**DELTA, "parameters": {**DELTA["parameters"], "resolution": "4k"}}, "parameters.resolution"),
    ({**DELTA, "parameters": {**DELTA["parameters"], "enhancePrompt": True}}, "parameters.enhancePrompt"),
    ({**DELTA, "parameters": {**DELTA["parameters"], "personGeneration": "all"}}, "parameters.personGeneration"),
    ({"model": "delta-2.0-generate-001", "instances": [{"prompt": "x"}], "parameters": {"durationSeconds": 9}},
     "parameters.durationSeconds"),
    ({**ZETA, "model": "zeta-video-9"}, "model"),
    ({**ZETA, "content": []}, "content"),
    ({**ZETA, "content": [{"type": "text", "text": "x --duration 7"}]}, "content[0].text"),
    ({**ZETA, "content": [{"type": "text", "text": "x --rs 4k"}]}, "content[0].text"),
    ({**ZETA, "content": [{"type": "video", "text": "x"}]}, "content[0].type"),
    ({"model": "zeta-video-1-0-lite-t2v-250428", "content": [
        {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}]},
     "content[1]"),
    ({"model": "zeta-video-1-0-lite-i2v-250428", "content": [{"type": "text", "text": "x"}]}, "content"),
    ({**ZETA, "callback_url": "ftp://example.com/hook"}, "callback_url"),
    ({**ZETA, "callback_url": "http://169.254.169.254/latest"}, "callback_url"),
    ({**ZETA, "callback_url": "http://10.0.0.7/hook"}, "callback_url"),
    ({**EPSILON}, "POST /v1/videos"),
]


@pytest.mark.parametrize("body,named", BAD_GENERATIONS)
def test_every_rule_of_a_generation_answers_a_clear_400_taking_no_quota_and_storing_no_task(
        tasks_env, functions, demo, accounts, lambda_context, monkeypatch, body, named):
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    from gateway.settings import reload_settings
    reload_settings()
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 400, answer
    assert set(answer["error"]) == {"message", "type", "param", "code"}
    assert answer["error"]["type"] == "invalid_request_error" and named in answer["error"]["message"]
    assert quota(accounts) == before and task_count() == 0 and accounts.usage.ledger(1) == []
    assert_nothing_held(accounts, before)


BAD_VIDEOS = [
    ({k: v for k, v in EPSILON.items() if k != "prompt"}, "prompt"),
    ({**EPSILON, "prompt": "  "}, "prompt"),
    ({**EPSILON, "model": "epsilon-3"}, "model"),
    ({**EPSILON, "seconds": 8}, "seconds"),
    ({**EPSILON, "seconds": "6"}, "seconds"),
    ({**EPSILON, "size": "640x480"}, "size"),
    ({**EPSILON, "model": "epsilon-2", "size": "1792x1024"}, "size"),
    ({**EPSILON, "model": "epsilon-2", "size": "1024x1792"}, "size"),
    ({**EPSILON, "quality": "hd"}, "quality"),
]


@pytest.mark.parametrize("body,named", BAD_VIDEOS)
def test_every_rule_of_an_epsilon_video_answers_a_clear_400_taking_no_quota_and_storing_no_task(
        tasks_env, functions, demo, accounts, lambda_context, body, named):
    before = quota(accounts)
    status, answer = create_video(functions, lambda_context, body, demo["key"])
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error" and answer["error"]["message"].startswith(named)
    assert quota(accounts) == before and task_count() == 0 and accounts.usage.ledger(1) == []
    assert_nothing_held(accounts, before)


@pytest.mark.parametrize("raw", ["", "not json", "[1, 2]", '{"model": 5}'])
def test_a_body_that_is_not_a_json_object_is_a_400(tasks_env, functions, demo, lambda_context, raw):
    for path in ("/v1/video/generations", "/v1/videos"):
        status, answer = status_and_json(call(functions["video"], lambda_context, "POST", path, demo["key"], body=raw))
        assert status == 400 and answer["error"]["type"] == "invalid_request_error"
    assert task_count() == 0


def test_a_missing_key_is_a_401_in_the_chat_envelope(tasks_env, functions, lambda_context):
    status, answer = submit(functions, lambda_context, DELTA, "sk-wrong")
    assert status == 401 and answer["error"]["type"] == "authentication_error"


def test_the_sample_events_drive_the_video_and_task_functions(tasks_env, functions, demo, accounts, lambda_context,
                                                              clock):
    from tests.conftest import EVENTS

    answer = functions["video"].lambda_handler(json.loads((EVENTS / "video.json").read_text()), lambda_context)
    assert answer["statusCode"] == 200 and json.loads(answer["body"])["status"] == "queued"
    # The poller's sample names tasks that do not exist: each message is acknowledged, none fails
    polled = functions["task_poller"].lambda_handler(json.loads((EVENTS / "task_poller.json").read_text()),
                                                     lambda_context)
    assert polled == {"batchItemFailures": []}
    sent = functions["callback_sender"].lambda_handler(json.loads((EVENTS / "callback_sender.json").read_text()),
                                                       lambda_context)
    assert sent == {"batchItemFailures": []}


def _form_event(key: str, fields: dict, files: dict | None = None) -> dict:
    from tests.conftest import api_event

    # By hand: httpx would send a form without files urlencoded; the openai SDK sends multipart.
    parts = [f'Content-Disposition: form-data; name="{name}"\r\n\r\n{value}'.encode() for name, value in fields.items()]
    for name, (filename, data, media_type) in (files or {}).items():
        parts.append(f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     f'Content-Type: {media_type}\r\n\r\n'.encode() + data)
    body = b"".join(b"--b0undary\r\n" + part + b"\r\n" for part in parts) + b"--b0undary--\r\n"
    content_type = "multipart/form-data; boundary=b0undary"
    return api_event("POST", "/v1/videos", body=base64.b64encode(body).decode(), base64=True,
                     headers={"Authorization": f"Bearer {key}", "Content-Type": content_type})


def test_an_epsilon_video_may_be_asked_for_as_the_sdks_multipart_form(tasks_env, functions, demo, accounts,
                                                                      lambda_context):
    event = _form_event(demo["key"], {"prompt": "a paper boat", "model": "epsilon-2", "seconds": "8"})
    status, video = status_and_json(functions["video"].lambda_handler(event, lambda_context))
    assert status == 200 and video["seconds"] == "8" and video["size"] == "1280x720"
    # A file input (image-to-video) is not offered: a clear 400 naming it, nothing taken
    before = quota(accounts)
    event = _form_event(demo["key"], {"prompt": "x"}, {"input_reference": ("a.png", b"\x89PNG", "image/png")})
    status, answer = status_and_json(functions["video"].lambda_handler(event, lambda_context))
    assert status == 400 and answer["error"]["param"] == "input_reference"
    assert quota(accounts) == before and task_count() == 1
    event = _form_event(demo["key"], {"prompt": "x", "seconds": "5"})
    status, answer = status_and_json(functions["video"].lambda_handler(event, lambda_context))
    assert status == 400 and answer["error"]["message"].startswith("seconds")


def test_a_zeta_submit_retried_with_the_same_idempotency_key_is_the_same_task_billed_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    def send(body, key_header, api_key=demo["key"]):
        return call(functions["video"], lambda_context, "POST", "/v1/video/generations", api_key, body=body,
                    headers={"Idempotency-Key": key_header})

    # Given a zeta submit with an Idempotency-Key
    before = quota(accounts)
    first = send(ZETA, "retry-me-1")
    # When the client retries it with the same key and body
    again = send(ZETA, "retry-me-1")
    # Then it gets the same task, once held
    first_id, again_id = json.loads(first["body"])["taskId"], json.loads(again["body"])["taskId"]
    assert first["statusCode"] == again["statusCode"] == 200 and first_id == again_id
    assert again["multiValueHeaders"]["Idempotent-Replayed"] == ["true"]
    assert before - quota(accounts) == ZETA_UNITS
    assert task_count() == 1
    # and the same key with another body is a 409 naming the header, charging nothing
    other = send({**ZETA, "content": [{"type": "text", "text": "another prompt --duration 10"}]}, "retry-me-1")
    assert other["statusCode"] == 409 and "Idempotency-Key" in other["body"]
    assert before - quota(accounts) == ZETA_UNITS
    # and once polled to the end, it is billed once
    clock.advance()
    queues.polls(lambda_context)
    assert [e["units"] for e in ledger_of(accounts, first_id)] == [ZETA_UNITS]
    # an over-long key is a 400 naming the header
    bad = send(ZETA, "x" * 300)
    assert bad["statusCode"] == 400 and "Idempotency-Key" in bad["body"]


def test_an_idempotency_key_of_one_api_key_never_answers_another(tasks_env, functions, demo, accounts,
                                                                lambda_context):
    from gateway.admin import ensure_demo_account

    other_key = "sk-" + "e" * 48
    ensure_demo_account(user_id=2, key=other_key, quota=500_000_000, access_token="other-token",
                        username="other")
    first = call(functions["video"], lambda_context, "POST", "/v1/video/generations", demo["key"], body=ZETA,
                 headers={"Idempotency-Key": "shared"})
    second = call(functions["video"], lambda_context, "POST", "/v1/video/generations", other_key, body=ZETA,
                  headers={"Idempotency-Key": "shared"})
    assert first["statusCode"] == second["statusCode"] == 200
    assert json.loads(first["body"])["taskId"] != json.loads(second["body"])["taskId"]
