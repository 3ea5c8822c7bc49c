"""The alpha family's parts: its token, its adapter against the simulator, its request rules,
its envelope's codes and its price factors."""

from __future__ import annotations

import base64
import struct
import time
from decimal import Decimal

import jwt
import pytest

from gateway.errors import (
    AuthenticationFailed,
    Dialect,
    InsufficientQuota,
    InvalidRequest,
    NotFound,
    RateLimited,
    UpstreamFailed,
    render,
)
from gateway.prices import SHIPPED, Price
from gateway.tasks.adapter import poll, submit
from gateway.tasks.families import family_of
from gateway.tasks.families.alpha.adapter import AlphaAdapter, bearer_token
from gateway.tasks.families.alpha.schema import Image2VideoRequest, Text2VideoRequest, check_image, image_size
from gateway.tasks.families.base import Quantities
from gateway.upstreams.errors import UpstreamError
from gateway_local.simulators import alpha as simulator
from tests.integration.test_alpha import IMAGE, png

from .conftest import SIM

KEY = f"{simulator.ACCESS}|{simulator.SECRET}"


def test_the_token_is_hs256_from_the_access_and_secret_with_the_upstreams_claims():
    token = bearer_token("ak-1|a-secret-that-is-at-least-32-bytes-long", now=1_700_000_000)
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, "a-secret-that-is-at-least-32-bytes-long", algorithms=["HS256"],
                        options={"verify_exp": False, "verify_nbf": False})
    assert header == {"alg": "HS256", "typ": "JWT"}
    assert claims == {"iss": "ak-1", "exp": 1_700_000_000 + 1800, "nbf": 1_700_000_000 - 5}


@pytest.mark.parametrize("key", ["only-access", "|secret", "access|"])
def test_a_channel_key_that_is_not_access_bar_secret_is_an_upstream_error(key):
    with pytest.raises(UpstreamError, match="access\\|secret"):
        bearer_token(key)


def test_the_adapter_submits_and_polls_each_operation_at_its_own_path_against_the_simulator(sim, clock):
    adapter = AlphaAdapter()
    body = {"prompt": "a cat", "n": 2}
    task_id = submit(sim, adapter, SIM + "/alpha", KEY, "alpha-image-o1", {"operation": "omni-image", "body": body})
    images = adapter.for_operation("omni-image")
    assert poll(sim, images, SIM + "/alpha", KEY, task_id).status == "queued"
    clock.advance(2)
    assert poll(sim, images, SIM + "/alpha", KEY, task_id).upstream_status == "processing"
    clock.advance(2)
    snapshot = poll(sim, images, SIM + "/alpha", KEY, task_id)
    assert snapshot.status == "succeeded" and len(snapshot.result_urls) == 2
    assert [i["index"] for i in snapshot.details["images"]] == [0, 1]
    # The same id under another operation's path is not found there
    with pytest.raises(UpstreamError) as found:
        poll(sim, adapter, SIM + "/alpha", KEY, task_id)
    assert found.value.status == 404 and "1203" in found.value.message


def test_the_simulator_refuses_a_wrong_secret_and_an_expired_token(sim):
    request = AlphaAdapter().build_submit(SIM + "/alpha", "simulator|" + "x" * 40, "alpha-v1",
                                          {"operation": "text2video", "body": {"prompt": "x"}})
    answer = sim.send(request)
    assert answer.status_code == 401 and answer.json()["code"] == 1002
    expired = bearer_token(KEY, now=time.time() - 4000)
    answer = sim.post(SIM + "/alpha/v1/videos/text2video", json={"model_name": "alpha-v1", "prompt": "x"},
                      headers={"Authorization": f"Bearer {expired}"})
    assert answer.status_code == 401 and answer.json()["code"] == 1004


def test_a_non_zero_code_in_a_200_answer_is_an_upstream_error_not_a_task():
    import httpx

    answer = httpx.Response(200, json={"code": 1102, "message": "resource pack used up", "data": None},
                            request=httpx.Request("POST", "http://u/v1/videos/text2video"))
    with pytest.raises(UpstreamError, match="1102: resource pack used up"):
        AlphaAdapter().parse_submit(answer)


def jpeg(width: int, height: int) -> bytes:
    """The headers of a baseline JPEG: SOI, an APP0 segment, then SOF0 with the size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def test_image_sizes_are_read_from_png_and_jpeg_headers():
    assert image_size(base64.b64decode(png(640, 360))) == ("png", 640, 360)
    assert image_size(jpeg(1280, 720)) == ("jpeg", 1280, 720)
    assert image_size(b"GIF89a....") is None
    assert check_image(base64.b64encode(jpeg(600, 600)).decode()) == (600, 600)
    assert check_image("https://cdn.example/any.png") is None  # the upstream checks a URL
    with pytest.raises(ValueError, match="at most 10 MB"):
        check_image(base64.b64encode(jpeg(600, 600) + b"\0" * (10 * 1024 * 1024)).decode())


def test_requests_send_the_upstreams_words_and_defaults():
    # tit is sent as tilt; a pro-only model runs pro without being told; a master model gets no mode
    request = Text2VideoRequest.model_validate({"model": "alpha-v1-5", "prompt": "x", "camera_control": {
        "type": "simple", "config": {"tit": -4}}, "callback_url": "https://h.example/cb"})
    body = request.upstream_body()
    assert body["camera_control"]["config"]["tilt"] == -4 and "tit" not in body["camera_control"]["config"]
    assert body["mode"] == "pro" and "callback_url" not in body and "model" not in body
    assert request.quantities() == Quantities(seconds=5, multiplier="3.5")
    master = Text2VideoRequest.model_validate({"model_name": "alpha-v2-master", "prompt": "x", "duration": 10})
    assert "mode" not in master.upstream_body() and master.upstream_body()["duration"] == "10"
    assert master.quantities() == Quantities(seconds=10, multiplier="1")
    # Trajectory points given as digits are sent as numbers
    i2v = Image2VideoRequest.model_validate({"model": "alpha-v1", "image": IMAGE, "dynamic_masks": [
        {"mask": png(640, 360), "trajectories": [{"x": "1", "y": "2"}, {"x": 3, "y": 4}]}]})
    assert i2v.upstream_body()["dynamic_masks"][0]["trajectories"] == [{"x": 1, "y": 2}, {"x": 3, "y": 4}]


@pytest.mark.parametrize("error,status,code", [
    (AuthenticationFailed("no key", code="missing_api_key"), 401, 1001),
    (AuthenticationFailed("bad key"), 401, 1002),
    (AuthenticationFailed("old key", code="expired_api_key"), 401, 1004),
    (InsufficientQuota("empty"), 429, 1102),
    (RateLimited("slow down"), 429, 1302),
    (InvalidRequest("prompt: is required", param="prompt"), 400, 1201),
    (NotFound("task 'x' does not exist"), 404, 1203),
    (UpstreamFailed("upstream broke"), 502, 5000),
])
def test_the_alpha_envelope_uses_the_upstreams_codes_and_statuses(error, status, code):
    rendered = render(error, Dialect.ALPHA, request_id="r-1")
    assert rendered.status == status
    assert rendered.body == {"code": code, "message": error.message, "request_id": "r-1", "data": None}


def test_the_price_factors_pro_three_and_a_half_ten_seconds_twice_second_generation_ten_times():
    first, second = SHIPPED["alpha-v1-6"], SHIPPED["alpha-v2-1-master"]
    std5 = Quantities(seconds=5).units(first)
    assert Quantities(seconds=5, multiplier="3.5").units(first) * 10 == std5 * 35
    assert Quantities(seconds=10).units(first) == 2 * std5
    assert Quantities(seconds=5).units(second) == 10 * std5
    assert Quantities(seconds=10).units(second) == 20 * std5
    assert all(SHIPPED[m].per_second == first.per_second for m in ("alpha-v1", "alpha-v1-5"))
    assert SHIPPED["alpha-image-o1"] == Price(per_image=Decimal("0.028"))
    assert family_of("alpha").public_statuses["succeeded"] == "succeed"


def test_an_omni_image_task_that_delivers_fewer_images_settles_its_share_of_the_hold_from_the_task_alone():
    from gateway.store.tasks import Task

    family = family_of("alpha")
    task = Task(task_id="task_1", owner_id="1", family="alpha", model="alpha-image-o1", channel="c",
                upstream_task_id="u", created_at=0, updated_at=0, status="succeeded", reservation={"units": 42_001},
                quantities=Quantities(images=3, samples=3).as_dict(), result_urls=["https://r/0", "https://r/1"],
                public={"operation": "omni-image"})
    assert family.units_to_settle(task, None) == 28_001  # 2/3 of the hold, rounded up
    assert family.query_answer(task)["final_unit_deduction"] == "28001"
    assert family.units_to_settle(task.replace(result_urls=["https://r/0"] * 3), None) == 42_001


# --- custom voices and elements: created at once, or by a creation task ---------------------

def _envelope(data):
    import httpx as _httpx

    return _httpx.Response(200, json={"code": 0, "message": "SUCCEED", "request_id": "r", "data": data},
                           request=_httpx.Request("POST", "http://up.test/x"))


def test_a_create_answer_is_the_record_or_the_creation_task_and_nothing_else():
    import pytest as _pytest

    from gateway.tasks.families.alpha.adapter import AlphaAdapter
    from gateway.upstreams.errors import UpstreamError

    adapter = AlphaAdapter()
    assert adapter.parse_create_custom(_envelope({"element_id": 7, "element_name": "x"}), "element") == {
        "element_id": "7", "element_name": "x", "task_status": "succeed"}
    assert adapter.parse_create_custom(_envelope({"task_id": "t1", "task_status": "submitted", "task_info": {}}),
                                       "voice") == {"task_id": "t1", "task_status": "submitted"}
    with _pytest.raises(UpstreamError):
        adapter.parse_create_custom(_envelope({"task_status": "submitted"}), "voice")


def test_a_creation_task_names_the_voice_once_made_and_a_success_without_one_is_a_failure():
    from gateway.tasks.families.alpha.adapter import AlphaAdapter

    adapter = AlphaAdapter()
    made = adapter.parse_query_custom(_envelope({"task_id": "t1", "task_status": "succeed", "task_result": {
        "voices": [{"voice_id": "v-1", "voice_name": "n", "trial_url": "https://x/t.mp3"}]}}), "voice")
    assert made["voice_id"] == "v-1" and made["task_status"] == "succeed"
    assert adapter.parse_query_custom(_envelope({"task_id": "t1", "task_status": "processing"}), "voice") == {
        "task_status": "processing", "task_status_msg": ""}
    assert adapter.parse_query_custom(_envelope({"task_id": "t1", "task_status": "succeed", "task_result": {}}),
                                      "voice")["task_status"] == "failed"
