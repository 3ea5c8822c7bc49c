"""Each task adapter against its simulator: build, send, parse, map; and against odd upstream answers."""

import base64

import httpx
import pytest

from gateway.tasks.adapter import UNIFIED, poll, submit
from gateway.tasks.families import FAMILIES, epsilon, family_of, zeta
from gateway.tasks.families.base import GENERIC_TASK_STATUS
from gateway.tasks.families.delta.schema import DeltaVideoRequest
from gateway.tasks.families.epsilon.schema import EpsilonVideoRequest
from gateway.tasks.families.zeta.schema import ZetaVideoRequest
from gateway.upstreams.errors import UpstreamError

from .conftest import SIM

ADAPTERS = {name: family_of(name).adapter for name in FAMILIES}

KEY = "sk-upstream"
ZETA_PRO = "zeta-video-1-0-pro-250528"


def delta_request(prompt="a red fox in snow", **parameters):
    return DeltaVideoRequest.model_validate({
        "model": "delta-3.0-generate-001", "instances": [{"prompt": prompt}],
        "parameters": {"durationSeconds": 8, "generateAudio": True, **parameters}}).upstream_body()


def zeta_request(text="a cat surfing --dur 10", **extra):
    return ZetaVideoRequest.model_validate({"model": ZETA_PRO, "content": [{"type": "text", "text": text}],
                                            **extra}).upstream_body()


def epsilon_request(prompt="a paper boat", **extra):
    return EpsilonVideoRequest.model_validate({"prompt": prompt, **extra}).upstream_body()


def response(status, body, url="http://upstream.test/x"):
    return httpx.Response(status, json=body, request=httpx.Request("GET", url))


# --- one shape for every family -------------------------------------------------------------

def test_every_adapter_has_the_same_shape_and_maps_onto_the_unified_set():
    assert {"delta", "zeta", "epsilon"} <= set(ADAPTERS) == set(FAMILIES)
    for adapter in ADAPTERS.values():
        for method in ("build_submit", "parse_submit", "build_poll", "parse_poll"):
            assert callable(getattr(adapter, method))


def test_public_status_tables_cover_every_unified_state():
    assert set(GENERIC_TASK_STATUS.values()) == {"pending", "processing", "succeeded", "failed"}
    for table in (GENERIC_TASK_STATUS, zeta.PUBLIC_SUBMIT_STATUS, epsilon.PUBLIC_STATUS):
        assert set(table) == set(UNIFIED)
    assert set(epsilon.PUBLIC_STATUS.values()) == {"queued", "in_progress", "completed", "failed"}
    assert family_of("delta").public_statuses["submitted"] == "pending"


# --- delta ----------------------------------------------------------------------------------

def test_delta_submit_is_a_predict_long_running_call_with_the_key_header():
    request = ADAPTERS["delta"].build_submit("http://up.test/", KEY, "veo-x", delta_request())
    assert (request.method, str(request.url)) == ("POST", "http://up.test/v1beta/models/veo-x:predictLongRunning")
    assert request.headers["x-goog-api-key"] == KEY and "authorization" not in request.headers
    assert httpx.Response(200, content=request.read()).json() == delta_request()


def test_delta_task_lives_from_submit_to_a_downloadable_video(sim, clock):
    adapter, base = ADAPTERS["delta"], f"{SIM}/delta"
    name = submit(sim, adapter, base, KEY, "delta-3.0-generate-001", delta_request(sampleCount=2))
    assert name.startswith("models/delta-3.0-generate-001/operations/")

    running = poll(sim, adapter, base, KEY, name)
    assert (running.status, running.upstream_status, running.result_urls) == ("in_progress", "running", [])
    assert not running.terminal

    clock.advance(3)
    done = poll(sim, adapter, base, KEY, name)
    assert (done.status, done.progress, done.error, done.terminal) == ("succeeded", 100, None, True)
    assert len(done.result_urls) == 2 and all(url.startswith(f"{SIM}/delta/v1beta/files/") for url in done.result_urls)
    # The link answers only with the API key (new-api's video_proxy.go fetches it with x-goog-api-key)
    assert sim.get(done.result_urls[0]).status_code == 403
    video = sim.get(done.result_urls[0], headers={"x-goog-api-key": KEY})
    assert video.status_code == 200 and video.headers["content-type"] == "video/mp4" and video.content[4:8] == b"ftyp"


def test_delta_fail_mode_ends_failed_with_the_reason(sim, clock):
    adapter, base = ADAPTERS["delta"], f"{SIM}/delta"
    name = submit(sim, adapter, base, KEY, "m", delta_request("a fox #fault=fail"))
    clock.advance(5)
    snapshot = poll(sim, adapter, base, KEY, name)
    assert (snapshot.status, snapshot.result_urls) == ("failed", []) and "#fault=fail" in snapshot.error


def test_delta_rejections_say_whether_to_retry(sim, clock):
    adapter, base = ADAPTERS["delta"], f"{SIM}/delta"
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, base, KEY, "m", delta_request("x #fault=reject"))
    assert (rejected.value.status, rejected.value.retryable) == (400, False)
    assert "INVALID_ARGUMENT" in rejected.value.message and "#fault=reject" in rejected.value.message
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, base, KEY, "m", delta_request("x #fault=500"))
    assert (rejected.value.status, rejected.value.retryable) == (500, True)
    with pytest.raises(UpstreamError) as rejected:
        poll(sim, adapter, f"{base}/fault/503", KEY, "models/m/operations/abc")
    assert (rejected.value.status, rejected.value.retryable) == (503, True)
    with pytest.raises(UpstreamError) as rejected:
        poll(sim, adapter, base, KEY, "models/m/operations/nope")
    assert (rejected.value.status, rejected.value.retryable) == (404, False)
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, base, "", "m", delta_request())
    assert rejected.value.status == 401


def test_delta_accepts_the_generated_videos_form():
    snapshot = ADAPTERS["delta"].parse_poll(response(200, {"name": "op", "done": True, "response": {
        "generatedVideos": [{"video": {"uri": "https://files.test/a.mp4"}}]}}))
    assert (snapshot.status, snapshot.result_urls) == ("succeeded", ["https://files.test/a.mp4"])


def test_delta_inline_bytes_are_handed_over_never_as_a_data_url_and_kept_out_of_raw():
    data = b"\x00\x00\x00\x18ftypisom"
    snapshot = ADAPTERS["delta"].parse_poll(response(200, {"name": "op", "done": True, "response": {
        "videos": [{"bytesBase64Encoded": base64.b64encode(data).decode(), "mimeType": "video/mp4"}]}}))
    assert (snapshot.status, snapshot.result_urls) == ("succeeded", [])
    assert [(item.mime_type, item.data) for item in snapshot.inline_results] == [("video/mp4", data)]
    assert snapshot.raw["response"]["videos"][0]["bytesBase64Encoded"] == "<16 base64 characters>"


def test_delta_done_without_a_video_is_a_failure_with_the_filter_reason():
    snapshot = ADAPTERS["delta"].parse_poll(response(200, {"name": "op", "done": True, "response": {
        "generateVideoResponse": {"raiMediaFilteredCount": 1, "raiMediaFilteredReasons": ["unsafe content"]}}}))
    assert snapshot.status == "failed" and "unsafe content" in snapshot.error


def test_delta_answers_without_an_operation_name_are_not_retried():
    for answer in (httpx.Response(200, text="<html>", request=httpx.Request("POST", "http://u.test")),
                   response(200, {"name": "../../admin"}), response(200, {})):
        with pytest.raises(UpstreamError) as rejected:
            ADAPTERS["delta"].parse_submit(answer)
        assert (rejected.value.status, rejected.value.retryable) == (502, False)


def test_delta_poll_refuses_an_operation_name_that_leaves_its_path():
    with pytest.raises(ValueError):
        ADAPTERS["delta"].build_poll("http://up.test", KEY, "models/x/../../secrets?x=1")


# --- zeta -----------------------------------------------------------------------------------

def test_zeta_submit_relays_model_and_content_but_never_the_callback_url():
    body = zeta_request(callback_url="https://client.test/hook")
    body["callback_url"] = "https://client.test/hook"  # even if a caller left it in
    request = ADAPTERS["zeta"].build_submit("http://up.test", KEY, "seedance-pro", body)
    assert str(request.url) == "http://up.test/api/v3/contents/generations/tasks"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert httpx.Response(200, content=request.read()).json() == {
        "model": "seedance-pro", "content": [{"type": "text", "text": "a cat surfing --dur 10"}]}


def test_zeta_task_lives_queued_running_succeeded(sim, clock):
    adapter, base = ADAPTERS["zeta"], f"{SIM}/zeta"
    task_id = submit(sim, adapter, base, KEY, ZETA_PRO, zeta_request())
    seen = [poll(sim, adapter, base, KEY, task_id)]
    for _ in range(2):
        clock.advance(1.5)
        seen.append(poll(sim, adapter, base, KEY, task_id))
    assert [s.upstream_status for s in seen] == ["queued", "running", "succeeded"]
    assert [s.status for s in seen] == ["queued", "in_progress", "succeeded"]
    done = seen[-1]
    assert done.result_urls == [f"{SIM}/zeta/files/{task_id}.mp4"] and done.duration == "10"
    assert done.raw["usage"]["completion_tokens"] > 0
    assert sim.get(done.result_urls[0]).headers["content-type"] == "video/mp4"


@pytest.mark.parametrize("fault,status", [("fail", "failed"), ("cancel", "cancelled"), ("expire", "failed")])
def test_zeta_fault_modes_end_the_task(sim, clock, fault, status):
    adapter, base = ADAPTERS["zeta"], f"{SIM}/zeta"
    task_id = submit(sim, adapter, base, KEY, ZETA_PRO, zeta_request(f"a cat #fault={fault}"))
    clock.advance(10)
    snapshot = poll(sim, adapter, base, KEY, task_id)
    assert snapshot.status == status and snapshot.result_urls == []
    if fault == "fail":
        assert "#fault=fail" in snapshot.error and "OutputVideoSensitiveContentDetected" in snapshot.error


def test_an_expired_zeta_task_fails_at_once_rather_than_running_until_the_sweep(sim, clock):
    # Ark's states include `expired` (a task past its execution_expires_after): it never finishes.
    adapter, base = ADAPTERS["zeta"], f"{SIM}/zeta"
    task_id = submit(sim, adapter, base, KEY, ZETA_PRO, zeta_request("a cat #fault=expire"))
    clock.advance(10)
    snapshot = poll(sim, adapter, base, KEY, task_id)
    assert (snapshot.upstream_status, snapshot.status) == ("expired", "failed")
    assert "expired" in snapshot.error


@pytest.mark.parametrize("source", [{"url": "https://img.example/cat.png"},
                                    {"image_url": "data:image/png;base64,iVBORw0KGgo="}])
def test_a_zeta_image_reaches_ark_as_image_url_url_whether_a_link_or_a_data_url(sim, clock, source):
    # Ark (and new-api's doubao MediaURL) take `image_url: {url}` only; the simulator refuses any other key.
    body = ZetaVideoRequest.model_validate({"model": ZETA_PRO, "content": [
        {"type": "text", "text": "the cat jumps"}, {"type": "image_url", "image_url": source}]}).upstream_body()
    assert body["content"][1]["image_url"] == {"url": next(iter(source.values()))}
    adapter, base = ADAPTERS["zeta"], f"{SIM}/zeta"
    assert submit(sim, adapter, base, KEY, ZETA_PRO, body).startswith("cgt-")


def test_the_zeta_simulator_refuses_an_image_item_ark_would_refuse(sim, clock):
    image = {"type": "image_url", "image_url": {"image_url": "data:image/png;base64,AA"}}
    body = {"model": ZETA_PRO, "content": [{"type": "text", "text": "x"}, image]}
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, ADAPTERS["zeta"], f"{SIM}/zeta", KEY, ZETA_PRO, body)
    assert rejected.value.status == 400 and "image_url" in rejected.value.message


def test_zeta_rejections_carry_the_upstream_code(sim, clock):
    adapter, base = ADAPTERS["zeta"], f"{SIM}/zeta"
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, base, KEY, ZETA_PRO, zeta_request("x #fault=reject"))
    assert rejected.value.status == 400 and rejected.value.message.startswith("InvalidParameter:")
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, f"{base}/fault/500", KEY, ZETA_PRO, zeta_request())
    assert (rejected.value.status, rejected.value.retryable) == (500, True)
    with pytest.raises(UpstreamError) as rejected:
        poll(sim, adapter, base, "", "cgt-x")
    assert rejected.value.status == 401 and "AuthenticationError" in rejected.value.message


def test_zeta_unknown_words_keep_the_task_running_and_success_needs_a_url():
    assert ADAPTERS["zeta"].parse_poll(response(200, {"id": "t", "status": "paused"})).status == "in_progress"
    empty = ADAPTERS["zeta"].parse_poll(response(200, {"id": "t", "status": "succeeded", "content": {}}))
    assert empty.status == "failed" and "video_url" in empty.error


# --- epsilon --------------------------------------------------------------------------------

def test_epsilon_submit_posts_the_video_body_with_the_upstream_model():
    request = ADAPTERS["epsilon"].build_submit("http://up.test", KEY, "sora-2", epsilon_request(seconds="8"))
    assert (request.method, str(request.url)) == ("POST", "http://up.test/v1/videos")
    assert httpx.Response(200, content=request.read()).json() == {
        "prompt": "a paper boat", "seconds": "8", "size": "1280x720", "model": "sora-2"}


def test_epsilon_video_lives_and_its_content_is_served_only_once_completed(sim, clock):
    adapter, base = ADAPTERS["epsilon"], f"{SIM}/epsilon"
    video_id = submit(sim, adapter, base, KEY, "epsilon-2", epsilon_request(seconds="8"))
    queued = poll(sim, adapter, base, KEY, video_id)
    assert (queued.status, queued.progress, queued.duration) == ("queued", 0, "8")

    not_ready = sim.send(adapter.build_content(base, KEY, video_id, "video"))
    assert not_ready.status_code == 409 and not_ready.json()["error"]["code"] == "video_not_ready"

    clock.advance(1.5)
    running = poll(sim, adapter, base, KEY, video_id)
    assert running.status == "in_progress" and 0 < running.progress < 100

    clock.advance(1.5)
    done = poll(sim, adapter, base, KEY, video_id)
    assert (done.status, done.upstream_status, done.progress, done.result_urls) == ("succeeded", "completed", 100, [])
    for variant, media_type in epsilon.adapter.CONTENT_VARIANTS.items():
        content = sim.send(adapter.build_content(base, KEY, video_id, variant))
        assert content.status_code == 200 and content.headers["content-type"] == media_type and content.content


def test_epsilon_fail_mode_ends_failed_with_the_upstream_message(sim, clock):
    adapter, base = ADAPTERS["epsilon"], f"{SIM}/epsilon"
    video_id = submit(sim, adapter, base, KEY, "epsilon-2", epsilon_request("boat #fault=fail"))
    clock.advance(3)
    snapshot = poll(sim, adapter, base, KEY, video_id)
    assert snapshot.status == "failed" and "#fault=fail" in snapshot.error


def test_epsilon_content_variant_is_checked_before_anything_is_sent():
    with pytest.raises(ValueError, match="poster"):
        ADAPTERS["epsilon"].build_content("http://up.test", KEY, "video_1", "poster")
    request = ADAPTERS["epsilon"].build_content("http://up.test", KEY, "video_1", "thumbnail")
    assert str(request.url) == "http://up.test/v1/videos/video_1/content?variant=thumbnail"


def test_epsilon_rejection_and_unauthenticated_calls(sim, clock):
    adapter, base = ADAPTERS["epsilon"], f"{SIM}/epsilon"
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, base, KEY, "epsilon-2", epsilon_request("x #fault=reject"))
    assert rejected.value.status == 400 and "#fault=reject" in rejected.value.message
    with pytest.raises(UpstreamError) as rejected:
        submit(sim, adapter, base, "", "epsilon-2", epsilon_request())
    assert (rejected.value.status, rejected.value.retryable) == (401, False)


# --- the network seam -----------------------------------------------------------------------

def _client(error):
    def handler(request):
        raise error
    return httpx.Client(transport=httpx.MockTransport(handler))


def test_a_submit_that_never_connected_may_be_retried_but_one_that_timed_out_may_not():
    adapter = ADAPTERS["zeta"]
    with pytest.raises(UpstreamError) as rejected:
        submit(_client(httpx.ConnectError("refused")), adapter, "http://u.test", KEY, "m", zeta_request())
    assert rejected.value.retryable
    with pytest.raises(UpstreamError) as rejected:
        submit(_client(httpx.ReadTimeout("slow")), adapter, "http://u.test", KEY, "m", zeta_request())
    assert (rejected.value.status, rejected.value.retryable) == (504, False)


def test_a_poll_that_timed_out_may_be_retried():
    with pytest.raises(UpstreamError) as rejected:
        poll(_client(httpx.ReadTimeout("slow")), ADAPTERS["epsilon"], "http://u.test", KEY, "video_1")
    assert (rejected.value.status, rejected.value.retryable) == (504, True)


def test_a_garbled_poll_answer_may_be_retried():
    answer = httpx.Response(200, text="upstream hiccup", request=httpx.Request("GET", "http://u.test"))
    with pytest.raises(UpstreamError) as rejected:
        ADAPTERS["zeta"].parse_poll(answer)
    assert (rejected.value.status, rejected.value.retryable) == (502, True)


def test_every_submit_and_poll_carries_the_task_timeout():
    # A request built by hand has no timeout of its own: without one a client would wait forever
    from gateway.tasks.adapter import UPSTREAM_TIMEOUT

    seen = []

    def handler(request):
        seen.append(request.extensions.get("timeout"))
        return httpx.Response(200, json={"id": "t1", "status": "running"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    assert submit(client, ADAPTERS["zeta"], "http://u.test", KEY, ZETA_PRO, zeta_request()) == "t1"
    assert poll(client, ADAPTERS["zeta"], "http://u.test", KEY, "t1").status == "in_progress"
    assert seen == [UPSTREAM_TIMEOUT.as_dict()] * 2
