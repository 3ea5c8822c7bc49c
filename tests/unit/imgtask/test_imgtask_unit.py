"""The imgtask adapter against its simulator, the signed image links, the ids, the statuses,
and the button rules."""

from __future__ import annotations

import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway.errors import InvalidRequest
from gateway.store.tasks import Task
from gateway.tasks import links
from gateway.tasks.adapter import send
from gateway.tasks.families import family_of
from gateway.tasks.families.imgtask import image_link, image_path
from gateway.tasks.families.imgtask.schema import button_action
from gateway.upstreams.errors import UpstreamError
from gateway_local.simulators import imgtask as simulator
from tests.unit.video.conftest import SIM, Clock, asgi_client

FAMILY = family_of("imgtask")
ADAPTER = FAMILY.adapter
BASE = SIM + "/imgtask"


@pytest.fixture
def sim(monkeypatch):
    clock = Clock()
    monkeypatch.setenv("GATEWAY_SIM_TASK_SECONDS", "3")
    monkeypatch.setattr(simulator, "clock", clock)
    with asgi_client(Starlette(routes=[Mount("/imgtask", app=simulator.app)])) as client:
        client.clock = clock
        yield client


def submit(client, body, path="/mj/submit/imagine", key="secret"):
    request = ADAPTER.build_submit(BASE, key, "", {"path": path, "body": body})
    return ADAPTER.parse_submit_answer(send(client, request, repeatable=False))


def test_the_simulator_refuses_a_call_without_its_secret(sim):
    for path in ("/imgtask/mj/submit/imagine", "/imgtask/mj/task/list-by-condition"):
        assert sim.post(path, json={"prompt": "x", "ids": []}).status_code == 401
    with pytest.raises(UpstreamError) as refused:
        submit(sim, {"prompt": "x"}, key="")
    assert refused.value.status == 401 and not refused.value.retryable


def test_an_imagine_goes_not_start_submitted_in_progress_success_with_buttons_listed_in_one_call(sim):
    first, second = submit(sim, {"prompt": "a cat"}), submit(sim, {"prompt": "a dog"})
    assert first.code == 1 and first.task_id.isdigit()

    def listed():
        answer = send(sim, ADAPTER.build_list(BASE, "secret", [first.task_id, "404", second.task_id]), repeatable=True)
        return ADAPTER.parse_list(answer)

    seen = []
    for step in (0, 0.5, 1.5, 2.0):
        sim.clock.advance(step)
        snapshots = listed()
        assert set(snapshots) == {first.task_id, second.task_id}
        seen.append((snapshots[first.task_id].upstream_status, snapshots[first.task_id].progress))
    assert [word for word, _ in seen] == ["NOT_START", "SUBMITTED", "IN_PROGRESS", "SUCCESS"]
    assert seen[2][1] > 0 and seen[3][1] == 100
    done = listed()[first.task_id]
    assert done.status == "succeeded" and done.result_urls[0].startswith(BASE + "/attachments/")
    assert [b["label"] for b in done.details["buttons"]] == ["U1", "U2", "U3", "U4", "", "V1", "V2", "V3", "V4"]
    assert done.details["buttons"][0]["customId"].startswith("MJ::JOB::upsample::1::")
    assert done.details["properties"] == {"finalPrompt": "a cat"}  # the account id is not kept
    image = sim.send(ADAPTER.build_image(BASE, "secret", done.result_urls[0]))
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")


def test_a_failed_task_carries_its_reason_and_a_stuck_one_never_finishes(sim):
    failed, stuck = submit(sim, {"prompt": "x #fault=fail"}), submit(sim, {"prompt": "x #fault=stuck"})
    sim.clock.advance(1000)
    snapshots = ADAPTER.parse_list(send(sim, ADAPTER.build_list(BASE, "k", [failed.task_id, stuck.task_id]),
                                        repeatable=True))
    assert snapshots[failed.task_id].status == "failed" and "Simulated failure" in snapshots[failed.task_id].error
    assert snapshots[stuck.task_id].status == "in_progress"


@pytest.mark.parametrize("prompt,status,code,retryable", [
    ("a forbidden thing", 400, 24, False), ("x #fault=queue", 429, 23, True), ("x #fault=error", 502, 9, True),
])
def test_submit_refusals_carry_the_upstreams_code(sim, prompt, status, code, retryable):
    with pytest.raises(UpstreamError) as refused:
        submit(sim, {"prompt": prompt})
    assert (refused.value.status, refused.value.body["code"], refused.value.retryable) == (status, code, retryable)
    if code == 24:
        assert refused.value.body["properties"] == {"bannedWord": "forbidden"}


def test_a_custom_zoom_waits_for_its_modal(sim):
    grid = submit(sim, {"prompt": "a cat"})
    sim.clock.advance(10)
    u1 = ADAPTER.parse_poll(send(sim, ADAPTER.build_poll(BASE, "k", grid.task_id),
                                 repeatable=True)).details["buttons"][0]
    upscale = submit(sim, {"taskId": grid.task_id, "customId": u1["customId"]}, path="/mj/submit/action")
    sim.clock.advance(10)
    buttons = ADAPTER.parse_poll(send(sim, ADAPTER.build_poll(BASE, "k", upscale.task_id),
                                      repeatable=True)).details["buttons"]
    zoom = next(b["customId"] for b in buttons if b["label"] == "Custom Zoom")
    # Without expecting a modal, the 21 is a refusal; expecting it, a task that waits
    with pytest.raises(UpstreamError):
        submit(sim, {"taskId": upscale.task_id, "customId": zoom}, path="/mj/submit/action")
    answer = ADAPTER.parse_submit_answer(send(sim, ADAPTER.build_submit(
        BASE, "k", "", {"path": "/mj/submit/action",
                        "body": {"taskId": upscale.task_id, "customId": zoom}}), repeatable=False),
        modal_expected=True)
    assert answer.code == 21 and answer.properties["remix"] is True
    assert ADAPTER.parse_poll(send(sim, ADAPTER.build_poll(BASE, "k", answer.task_id),
                                   repeatable=True)).upstream_status == "MODAL"
    done = ADAPTER.parse_submit_answer(send(sim, ADAPTER.build_modal(BASE, "k", answer.task_id,
                                                                            {"prompt": "--zoom 2"}), repeatable=False))
    assert done.code == 1 and done.task_id == answer.task_id


def test_an_image_link_is_signed_expires_and_names_its_task(monkeypatch):
    monkeypatch.setenv("GATEWAY_RESULT_LINK_SECRET", "s3cret")
    from gateway.settings import reload_settings
    reload_settings()
    try:
        url = image_link("https://gw.example/Prod/", "1700000000000123456")
        assert url.startswith("https://gw.example/Prod/imgtask/image/1700000000000123456?expires=")
        query = dict(part.split("=") for part in url.split("?")[1].split("&"))
        now = int(query["expires"]) - 7200
        assert int(query["expires"]) - time.time() >= 3600  # at least an hour
        path = image_path("1700000000000123456")
        assert links.valid(path, query["expires"], query["signature"], now=now)
        assert not links.valid(image_path("1700000000000123457"), query["expires"], query["signature"], now=now)
        assert not links.valid(path, query["expires"], query["signature"], now=int(query["expires"]) + 1)
        assert not links.valid(path, "x", query["signature"], now=now)
    finally:
        monkeypatch.delenv("GATEWAY_RESULT_LINK_SECRET")
        reload_settings()
    assert image_link("https://gw.example", "1") == ""  # no secret: no unsigned link


def test_task_ids_are_numeric_strings_of_the_time_in_ms_and_six_random_digits():
    import time

    before = time.time_ns() // 1_000_000
    ids = [FAMILY.new_task_id() for _ in range(50)]
    after = time.time_ns() // 1_000_000
    assert all(i.isdigit() and len(i) == 19 and int(i) < 2**63 for i in ids)
    assert all(before <= int(i[:13]) <= after for i in ids)
    assert len({i[13:] for i in ids}) > 40  # the random part varies (the store's put refuses a repeat)


def _task(**changes) -> Task:
    return Task(task_id="1", owner_id="1", family="imgtask", model="imgtask-imagine", channel="c",
                upstream_task_id="u", reservation={}, created_at=1, updated_at=1).replace(**changes)


@pytest.mark.parametrize("status,word,public", [
    ("submitted", None, "SUBMITTED"), ("submitted", "NOT_START", "NOT_START"), ("queued", "SUBMITTED", "SUBMITTED"),
    ("in_progress", "IN_PROGRESS", "IN_PROGRESS"), ("succeeded", "SUCCESS", "SUCCESS"),
    ("failed", "FAILURE", "FAILURE"), ("failed", "timed_out", "FAILURE"), ("cancelled", "CANCEL", "CANCEL"),
])
def test_the_record_status_is_one_of_the_seven(status, word, public):
    assert FAMILY.public_status(_task(status=status, upstream_status=word)) == public


def test_a_parked_task_is_modal_and_its_submit_answer_says_so():
    task = _task(waiting_for="CustomZoom")
    assert FAMILY.public_status(task) == "MODAL"
    assert FAMILY.submit_answer(task) == {"code": 21, "description": "Waiting for window confirm", "result": "1",
                                          "properties": {"remix": True, "modal": "CustomZoom"}}


@pytest.mark.parametrize("custom_id,action,price,modal", [
    ("MJ::JOB::upsample::3::ab12", "UPSCALE", "upscale", None),
    ("MJ::JOB::variation::2::ab12", "VARIATION", "variation", None),
    ("MJ::JOB::reroll::0::ab12::SOLO", "IMAGINE", "imagine", None),
    ("MJ::Outpaint::50::1::ab12::SOLO", "ZOOM", "zoom", None),
    ("MJ::JOB::pan_left::1::ab12::SOLO", "PAN", "pan", None),
    ("MJ::CustomZoom::ab12", "ZOOM", "modal", "CustomZoom"),
    ("MJ::Inpaint::1::ab12::SOLO", "VARIATION", "modal", "Inpaint"),
])
def test_a_button_stands_for_a_priced_action(custom_id, action, price, modal):
    what = button_action(custom_id)
    assert (what.action, what.price, what.modal) == (action, price, modal)


def test_an_unknown_button_is_a_400_naming_custom_id():
    with pytest.raises(InvalidRequest) as refused:
        button_action("MJ::Something::1")
    assert refused.value.param == "customId"


def test_an_upstream_answer_of_the_wrong_shape_is_a_retryable_poll_failure():
    request = httpx.Request("POST", BASE + "/mj/task/list-by-condition")
    with pytest.raises(UpstreamError) as failed:
        ADAPTER.parse_list(httpx.Response(200, json={"not": "a list"}, request=request))
    assert failed.value.retryable


def test_the_template_routes_every_imgtask_operation_to_its_function_with_the_link_secret():
    from pathlib import Path

    from gateway_local.template import load_template

    template = load_template(Path(__file__).resolve().parents[3] / "template.yaml")
    function = template["Resources"]["ImgtaskFunction"]["Properties"]
    routes = {(e["Properties"]["Path"], e["Properties"]["Method"]) for e in function["Events"].values()}
    assert routes == {*((f"/imgtask/submit/{kind}", "post") for kind in
                        ("imagine", "action", "modal", "blend", "describe", "shorten")),
                      ("/imgtask/insight-face/swap", "post"), ("/imgtask/task/list-by-condition", "post"),
                      ("/imgtask/task/{id}/fetch", "get"), ("/imgtask/task/{id}/image-seed", "get"),
                      ("/imgtask/image/{id}", "get")}
    assert function["Environment"]["Variables"]["GATEWAY_RESULT_LINK_SECRET_ID"] == {"Ref": "ResultLinkSecret"}
    assert "image~1*" in template["Resources"]["GatewayApi"]["Properties"]["BinaryMediaTypes"]


@pytest.mark.parametrize("context_path,path,public_url,expected", [
    ("/Prod/imgtask/task/1/fetch", "/imgtask/task/1/fetch", "", "https://api.example/Prod"),
    ("/imgtask/task/1/fetch", "/imgtask/task/1/fetch", "", "https://api.example"),
    ("/Prod/imgtask/task/1/fetch", "/imgtask/task/1/fetch", "https://gw.example/ai/", "https://gw.example/ai"),
])
def test_links_use_the_public_url_or_the_address_the_client_called(monkeypatch, context_path, path, public_url,
                                                                   expected):
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

    from gateway.http import public_base_url
    from gateway.settings import reload_settings
    from tests.conftest import api_event

    monkeypatch.setenv("GATEWAY_PUBLIC_URL", public_url)
    reload_settings()
    try:
        event = api_event("GET", path)
        event["requestContext"].update(path=context_path, domainName="api.example")
        app = APIGatewayRestResolver()
        app.current_event = APIGatewayProxyEvent(event)
        assert public_base_url(app) == expected
    finally:
        monkeypatch.delenv("GATEWAY_PUBLIC_URL")
        reload_settings()
