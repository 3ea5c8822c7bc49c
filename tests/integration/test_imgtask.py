"""The imgtask routes and the life of their tasks: the imgtask, poller and callback functions
in-process, the emulator's tables and queues, the simulated `/mj` upstream on 127.0.0.1 with a
clock the test moves."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from gateway.admission import balances
from gateway.imagetypes import detect_image_type
from gateway.tasks import callbacks
from gateway_local.simulators import imgtask as simulator
from tests.conftest import serve_asgi, use_environment
from tests.integration.money_support import assert_nothing_held
from tests.integration.tasks_support import call, ledger_of, status_and_json, stored, task_count
from tests.integration.test_task_faults import Receiver

IMAGINE_UNITS = 50_000  # 0.10 USD per imagine
UPSCALE_UNITS = 25_000  # 0.05 USD per upscale
MODAL_UNITS = 50_000
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


def post(functions, ctx, path, body, key):
    return status_and_json(call(functions["imgtask"], ctx, "POST", path, key, body=body))


def fetch(functions, ctx, task_id, key):
    return status_and_json(call(functions["imgtask"], ctx, "GET", f"/imgtask/task/{task_id}/fetch", key,
                                resource="/imgtask/task/{id}/fetch", path_parameters={"id": task_id}))


def image(functions, ctx, task_id, key, query=None):
    """The image route's answer, its redirect to the kept copy followed with plain HTTP (no key),
    in API Gateway's shape."""
    answer = call(functions["imgtask"], ctx, "GET", f"/imgtask/image/{task_id}", key, query=query,
                  resource="/imgtask/image/{id}", path_parameters={"id": task_id})
    if answer["statusCode"] != 302:
        return answer
    kept = httpx.get(answer["multiValueHeaders"]["Location"][0])
    return {"statusCode": kept.status_code, "multiValueHeaders": {"Content-Type": [kept.headers["content-type"]]},
            "body": base64.b64encode(kept.content).decode(), "isBase64Encoded": True, "redirected": True}


def quota(accounts) -> int:
    return balances.get_user(1)["quota"]


def imagine(functions, ctx, key, prompt="a lighthouse at dawn", **extra):
    status, answer = post(functions, ctx, "/imgtask/submit/imagine", {"prompt": prompt, **extra}, key)
    assert status == 200 and answer["code"] == 1, answer
    return answer["result"]


def finish(queues, ctx, clock):
    clock.advance()
    queues.polls(ctx)


def test_an_imagine_task_runs_to_success_and_a_button_starts_an_upscale_that_finishes(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    # Given an imagine submit
    status, answer = post(functions, lambda_context, "/imgtask/submit/imagine",
                          {"prompt": "a lighthouse at dawn", "state": "order-7"}, demo["key"])
    assert status == 200 and answer["code"] == 1 and answer["description"] == "Submit success"
    task_id = answer["result"]
    assert task_id.isdigit() and answer["properties"] == {}
    assert quota(accounts) == before - IMAGINE_UNITS  # held at submit
    record = fetch(functions, lambda_context, task_id, demo["key"])[1]
    assert record["status"] == "SUBMITTED" and record["progress"] == "0%" and record["action"] == "IMAGINE"
    assert record["state"] == "order-7" and record["prompt"] == "a lighthouse at dawn" and record["imageUrl"] == ""
    # When the upstream works on it, progress rises
    clock.advance(15)
    queues.polls(lambda_context, rounds=1)
    running = fetch(functions, lambda_context, task_id, demo["key"])[1]
    assert running["status"] == "IN_PROGRESS" and running["progress"].endswith("%") and running["startTime"]
    # And when it is done, the record has its buttons, times and a signed image link of the gateway
    finish(queues, lambda_context, clock)
    status, done = fetch(functions, lambda_context, task_id, demo["key"])
    assert status == 200 and done["status"] == "SUCCESS" and done["progress"] == "100%"
    assert all(isinstance(done[name], int) for name in ("submitTime", "startTime", "finishTime"))
    assert done["failReason"] is None
    assert [b["label"] for b in done["buttons"]][:4] == ["U1", "U2", "U3", "U4"]
    assert all(set(b) == {"customId", "emoji", "label", "style", "type"} for b in done["buttons"])
    # (the gateway's address the client called, never the upstream's)
    assert urlsplit(done["imageUrl"]).path == "/imgtask/image/" + task_id
    assert urlsplit(tasks_env).netloc not in done["imageUrl"] and "attachments" not in done["imageUrl"]
    assert done["properties"] == {"finalPrompt": "a lighthouse at dawn"}  # the upstream's account ids stay out
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", IMAGINE_UNITS)]
    # When the caller presses U1
    u1 = next(b["customId"] for b in done["buttons"] if b["label"] == "U1")
    status, answer = post(functions, lambda_context, "/imgtask/submit/action", {"taskId": task_id, "customId": u1},
                          demo["key"])
    assert status == 200 and answer["code"] == 1
    upscale_id = answer["result"]
    assert upscale_id != task_id and quota(accounts) == before - IMAGINE_UNITS - UPSCALE_UNITS
    finish(queues, lambda_context, clock)
    # Then a new task, an upscale of the same prompt, finishes with its own buttons
    upscale = fetch(functions, lambda_context, upscale_id, demo["key"])[1]
    assert upscale["action"] == "UPSCALE" and upscale["status"] == "SUCCESS"
    assert upscale["prompt"] == "a lighthouse at dawn" and "Custom Zoom" in [b["label"] for b in upscale["buttons"]]
    assert stored(upscale_id)["parent_id"] == task_id
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, upscale_id)] == [("settled", UPSCALE_UNITS)]


def test_the_image_is_served_with_the_key_and_by_its_signed_link_without_one(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    task_id = imagine(functions, lambda_context, demo["key"])
    # Before it is finished there is no image
    assert image(functions, lambda_context, task_id, demo["key"])["statusCode"] == 404
    finish(queues, lambda_context, clock)
    answer = image(functions, lambda_context, task_id, demo["key"])
    assert answer["statusCode"] == 200 and answer["isBase64Encoded"] is True
    assert answer["multiValueHeaders"]["Content-Type"] == ["image/png"]
    assert detect_image_type(base64.b64decode(answer["body"])) == "png"
    # The record's imageUrl works without any key
    link = fetch(functions, lambda_context, task_id, demo["key"])[1]["imageUrl"]
    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    signed = image(functions, lambda_context, task_id, "", query=query)
    assert signed["statusCode"] == 200 and signed["redirected"]
    assert base64.b64decode(signed["body"]) == base64.b64decode(answer["body"])
    # A tampered or expired link is refused, and no key is no access
    for bad in ({**query, "signature": "0" * 64}, {**query, "expires": "1"}):
        refused = call(functions["imgtask"], lambda_context, "GET", f"/imgtask/image/{task_id}", "", query=bad,
                       resource="/imgtask/image/{id}", path_parameters={"id": task_id})
        assert refused["statusCode"] == 404 and json.loads(refused["body"])["code"] == 3
    assert image(functions, lambda_context, task_id, "")["statusCode"] == 401
    assert image(functions, lambda_context, "not-a-number", demo["key"])["statusCode"] == 400


def test_an_image_larger_than_a_lambda_answer_is_kept_and_leaves_whole_by_a_presigned_link(
        tasks_env, functions, queues, demo, lambda_context, clock):
    from gateway.multipart import MAX_BINARY_ANSWER_BYTES

    task_id = imagine(functions, lambda_context, demo["key"], prompt="a wide grid #fault=big")
    finish(queues, lambda_context, clock)
    link = fetch(functions, lambda_context, task_id, demo["key"])[1]["imageUrl"]
    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    answer = image(functions, lambda_context, task_id, "", query=query)
    assert answer["statusCode"] == 200 and answer["redirected"], answer.get("body", "")[:300]
    data = base64.b64decode(answer["body"])
    assert len(data) > MAX_BINARY_ANSWER_BYTES and detect_image_type(data) == "png"


def test_an_expired_upstream_image_is_still_served_from_the_kept_copy_and_a_clear_404_without_one(
        tasks_env, functions, queues, demo, lambda_context, clock, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_IMAGE_SECONDS", "60")
    task_id = imagine(functions, lambda_context, demo["key"])
    finish(queues, lambda_context, clock)
    clock.advance(120)
    assert image(functions, lambda_context, task_id, demo["key"])["statusCode"] == 200  # the kept copy
    saved = use_environment(RESULTS_BUCKET=None)
    try:
        answer = image(functions, lambda_context, task_id, demo["key"])
    finally:
        use_environment(**saved)
    assert answer["statusCode"] == 404 and "no longer has the image" in json.loads(answer["body"])["description"]


def test_list_by_condition_answers_the_callers_records_in_order_and_leaves_out_others(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    first = imagine(functions, lambda_context, demo["key"], "one")
    second = imagine(functions, lambda_context, demo["key"], "two")
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    foreign = imagine(functions, lambda_context, other, "eve's")
    status, records = post(functions, lambda_context, "/imgtask/task/list-by-condition",
                           {"ids": [second, foreign, "123", first, second]}, demo["key"])
    assert status == 200 and [r["id"] for r in records] == [second, first]
    assert [r["prompt"] for r in records] == ["two", "one"]
    assert post(functions, lambda_context, "/imgtask/task/list-by-condition", {"ids": []}, demo["key"]) == (200, [])
    for body in ({"ids": "1"}, {}, {"ids": [1]}, [first]):
        status, answer = post(functions, lambda_context, "/imgtask/task/list-by-condition", body, demo["key"])
        assert status == 400 and answer["code"] == 4 and "ids" in answer["description"]
    # The foreign task is invisible to every other read too
    assert fetch(functions, lambda_context, foreign, demo["key"])[0] == 404
    assert image(functions, lambda_context, foreign, demo["key"])["statusCode"] == 404
    status, answer = status_and_json(call(functions["imgtask"], lambda_context, "GET",
                                          f"/imgtask/task/{foreign}/image-seed", demo["key"]))
    assert status == 404 and answer["code"] == 3
    assert fetch(functions, lambda_context, "999", demo["key"])[0] == 404


def test_polls_ask_the_upstream_once_per_channel_for_all_open_tasks(tasks_env, functions, queues, demo,
                                                                    lambda_context, clock):
    ids = [imagine(functions, lambda_context, demo["key"], f"picture {n}") for n in range(4)]
    simulator.LIST_CALLS.clear()
    queues.polls(lambda_context, rounds=1)
    # One list-by-condition for the four tasks, not one fetch each
    assert len(simulator.LIST_CALLS) == 1 and len(simulator.LIST_CALLS[0]) == 4
    finish(queues, lambda_context, clock)
    assert all(fetch(functions, lambda_context, i, demo["key"])[1]["status"] == "SUCCESS" for i in ids)


def test_image_seed_is_relayed_for_a_finished_task(tasks_env, functions, queues, demo, lambda_context, clock):
    task_id = imagine(functions, lambda_context, demo["key"])
    path = f"/imgtask/task/{task_id}/image-seed"
    status, answer = status_and_json(call(functions["imgtask"], lambda_context, "GET", path, demo["key"]))
    assert status == 400 and answer["code"] == 4  # not finished yet
    finish(queues, lambda_context, clock)
    status, answer = status_and_json(call(functions["imgtask"], lambda_context, "GET", path, demo["key"]))
    assert status == 200 and answer["code"] == 1 and answer["result"].isdigit()


def test_a_failed_task_is_refunded_exactly_once(tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    task_id = imagine(functions, lambda_context, demo["key"], "a storm #fault=fail")
    assert quota(accounts) == before - IMAGINE_UNITS
    finish(queues, lambda_context, clock)
    record = fetch(functions, lambda_context, task_id, demo["key"])[1]
    assert record["status"] == "FAILURE" and "Simulated failure" in record["failReason"] and record["buttons"] == []
    assert quota(accounts) == before
    # A redelivered poll and a sweep change nothing
    from gateway.tasks import engine
    assert engine.poll_once(task_id) == "done"
    engine.sweep(now=clock.now + 10_000)
    assert quota(accounts) == before
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("refunded", 0)]
    # And no action may be taken on it
    status, answer = post(functions, lambda_context, "/imgtask/submit/action",
                          {"taskId": task_id, "customId": "MJ::JOB::upsample::1::abc"}, demo["key"])
    assert status == 400 and answer["code"] == 4 and "taskId" in answer["description"]


def test_a_modal_action_waits_in_modal_holding_nothing_until_the_modal_completes_it(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    grid = imagine(functions, lambda_context, demo["key"])
    finish(queues, lambda_context, clock)
    u2 = next(b["customId"] for b in fetch(functions, lambda_context, grid, demo["key"])[1]["buttons"]
              if b["label"] == "U2")
    upscale = post(functions, lambda_context, "/imgtask/submit/action", {"taskId": grid, "customId": u2},
                   demo["key"])[1]["result"]
    finish(queues, lambda_context, clock)
    zoom = next(b["customId"] for b in fetch(functions, lambda_context, upscale, demo["key"])[1]["buttons"]
                if b["label"] == "Custom Zoom")
    before = quota(accounts)
    # When a custom zoom is asked for
    status, answer = post(functions, lambda_context, "/imgtask/submit/action", {"taskId": upscale, "customId": zoom},
                          demo["key"])
    # Then it answers 21, waits in MODAL, and nothing is held
    assert status == 200 and answer["code"] == 21 and answer["properties"]["remix"] is True
    modal_id = answer["result"]
    record = fetch(functions, lambda_context, modal_id, demo["key"])[1]
    assert record["status"] == "MODAL" and record["action"] == "ZOOM"
    assert quota(accounts) == before and ledger_of(accounts, modal_id) == []
    assert_nothing_held(accounts, before)
    queues.polls(lambda_context)
    assert fetch(functions, lambda_context, modal_id, demo["key"])[1]["status"] == "MODAL"
    # A modal without its prompt is refused, still holding nothing
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal", {"taskId": modal_id}, demo["key"])
    assert status == 400 and answer["code"] == 4 and "prompt" in answer["description"]
    # When the modal completes it, it is held, submitted, and finishes
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "a lighthouse at dawn --zoom 1.5"}, demo["key"])
    assert status == 200 and answer["code"] == 1 and answer["result"] == modal_id
    assert quota(accounts) == before - MODAL_UNITS
    # A second completion is refused
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "again --zoom 2"}, demo["key"])
    assert status == 400 and "not waiting for a modal" in answer["description"]
    finish(queues, lambda_context, clock)
    record = fetch(functions, lambda_context, modal_id, demo["key"])[1]
    assert record["status"] == "SUCCESS" and record["prompt"] == "a lighthouse at dawn --zoom 1.5"
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, modal_id)] == [("settled", MODAL_UNITS)]
    assert quota(accounts) == before - MODAL_UNITS


def test_a_region_vary_needs_its_mask(tasks_env, functions, queues, demo, lambda_context, clock):
    grid = imagine(functions, lambda_context, demo["key"])
    finish(queues, lambda_context, clock)
    u1 = fetch(functions, lambda_context, grid, demo["key"])[1]["buttons"][0]["customId"]
    upscale = post(functions, lambda_context, "/imgtask/submit/action", {"taskId": grid, "customId": u1},
                   demo["key"])[1]["result"]
    finish(queues, lambda_context, clock)
    inpaint = next(b["customId"] for b in fetch(functions, lambda_context, upscale, demo["key"])[1]["buttons"]
                   if b["customId"].startswith("MJ::Inpaint::"))
    modal_id = post(functions, lambda_context, "/imgtask/submit/action", {"taskId": upscale, "customId": inpaint},
                    demo["key"])[1]["result"]
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "a boat"}, demo["key"])
    assert status == 400 and "maskBase64" in answer["description"]
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "a boat", "maskBase64": PNG}, demo["key"])
    assert status == 200 and answer["code"] == 1
    finish(queues, lambda_context, clock)
    assert fetch(functions, lambda_context, modal_id, demo["key"])[1]["status"] == "SUCCESS"


@pytest.mark.parametrize("path,body,action", [
    ("/imgtask/submit/blend", {"base64Array": [PNG, PNG], "dimensions": "PORTRAIT"}, "BLEND"),
    ("/imgtask/submit/describe", {"base64": PNG}, "DESCRIBE"),
    ("/imgtask/submit/shorten", {"prompt": "a very long prompt about a lighthouse"}, "SHORTEN"),
    ("/imgtask/insight-face/swap", {"sourceBase64": PNG, "targetBase64": PNG}, "SWAP_FACE"),
])
def test_the_other_submits_run_to_success_and_settle_their_price(tasks_env, functions, queues, demo, accounts,
                                                                 lambda_context, clock, path, body, action):
    status, answer = post(functions, lambda_context, path, body, demo["key"])
    assert status == 200 and answer["code"] == 1
    finish(queues, lambda_context, clock)
    record = fetch(functions, lambda_context, answer["result"], demo["key"])[1]
    assert record["status"] == "SUCCESS" and record["action"] == action
    assert [e["outcome"] for e in ledger_of(accounts, answer["result"])] == ["settled"]


def test_upstream_refusals_answer_the_upstreams_codes_and_hold_nothing(tasks_env, functions, demo, accounts,
                                                                       lambda_context):
    before = quota(accounts)
    status, answer = post(functions, lambda_context, "/imgtask/submit/imagine",
                          {"prompt": "something forbidden here"}, demo["key"])
    assert status == 400 and answer["code"] == 24 and answer["properties"] == {"bannedWord": "forbidden"}
    status, answer = post(functions, lambda_context, "/imgtask/submit/imagine", {"prompt": "x #fault=queue"},
                          demo["key"])
    assert status == 429 and answer["code"] == 23
    status, answer = post(functions, lambda_context, "/imgtask/submit/imagine", {"prompt": "x #fault=error"},
                          demo["key"])
    assert status == 502 and answer["code"] == 9
    assert quota(accounts) == before and task_count() == 0


def test_a_queued_submit_answers_22_and_the_task_still_runs(tasks_env, functions, queues, demo, lambda_context,
                                                            clock):
    status, answer = post(functions, lambda_context, "/imgtask/submit/imagine", {"prompt": "busy day #queued"},
                          demo["key"])
    assert status == 200 and answer["code"] == 22 and answer["result"].isdigit()
    finish(queues, lambda_context, clock)
    assert fetch(functions, lambda_context, answer["result"], demo["key"])[1]["status"] == "SUCCESS"


def test_notify_hook_hears_every_change_signed(tasks_env, functions, queues, demo, lambda_context, clock):
    receiver = Receiver(failures=0)
    with serve_asgi(Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])) as url:
        imagine(functions, lambda_context, demo["key"], notifyHook=url + "/hook")
        clock.advance(15)
        queues.polls(lambda_context, rounds=1)
        queues.callbacks(lambda_context)
        finish(queues, lambda_context, clock)
        queues.callbacks(lambda_context)
    records = [json.loads(body) for body, _ in receiver.received]
    assert [r["status"] for r in records] == ["IN_PROGRESS", "SUCCESS"]
    assert records[-1]["imageUrl"].startswith("http") and records[-1]["buttons"]
    assert all(callbacks.verify(body, headers["x-gateway-signature"], "test-secret")
               for body, headers in receiver.received)


U1 = "MJ::JOB::upsample::1::abc"
BAD_SUBMITS = [
    ("/imgtask/submit/imagine", {}, "prompt"),
    ("/imgtask/submit/imagine", {"prompt": ""}, "prompt"),
    ("/imgtask/submit/imagine", {"prompt": "   "}, "prompt"),
    ("/imgtask/submit/imagine", {"prompt": 7}, "prompt"),
    ("/imgtask/submit/imagine", {"prompt": "x" * 8193}, "prompt"),
    ("/imgtask/submit/imagine", {"prompt": "x", "base64Array": ["not-a-data-url"]}, "base64Array[0]"),
    ("/imgtask/submit/imagine", {"prompt": "x", "base64Array": ["data:image/png;base64,%%%"]}, "base64Array[0]"),
    ("/imgtask/submit/imagine", {"prompt": "x", "base64Array": ["data:image/png;base64,aGVsbG8="]}, "base64Array[0]"),
    ("/imgtask/submit/imagine", {"prompt": "x", "base64Array": [PNG] * 6}, "base64Array"),
    ("/imgtask/submit/imagine", {"prompt": "x", "notifyHook": "ftp://example.com/h"}, "notifyHook"),
    ("/imgtask/submit/imagine", {"prompt": "x", "notifyHook": "http://169.254.169.254/latest"}, "notifyHook"),
    ("/imgtask/submit/imagine", {"prompt": "x", "state": 5}, "state"),
    ("/imgtask/submit/imagine", {"prompt": "x", "botType": "OTHER"}, "botType"),
    ("/imgtask/submit/imagine", {"prompt": "x", "accountFilter": {}}, "accountFilter"),
    ("/imgtask/submit/action", {"customId": U1}, "taskId"),
    ("/imgtask/submit/action", {"taskId": "abc", "customId": U1}, "taskId"),
    ("/imgtask/submit/action", {"taskId": "123"}, "customId"),
    ("/imgtask/submit/modal", {"prompt": "x"}, "taskId"),
    ("/imgtask/submit/modal", {"taskId": "1", "maskBase64": "nope"}, "maskBase64"),
    ("/imgtask/submit/blend", {"base64Array": [PNG]}, "base64Array"),
    ("/imgtask/submit/blend", {"base64Array": [PNG] * 6}, "base64Array"),
    ("/imgtask/submit/blend", {"base64Array": [PNG, PNG], "dimensions": "WIDE"}, "dimensions"),
    ("/imgtask/submit/describe", {}, "base64"),
    ("/imgtask/submit/shorten", {"prompt": ""}, "prompt"),
    ("/imgtask/insight-face/swap", {"sourceBase64": PNG}, "targetBase64"),
]


@pytest.mark.parametrize("path,body,field", BAD_SUBMITS)
def test_a_bad_submit_is_a_400_naming_the_field_and_holds_nothing(tasks_env, functions, demo, accounts,
                                                                  lambda_context, monkeypatch, path, body, field):
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    from gateway.settings import reload_settings
    reload_settings()
    before = quota(accounts)
    status, answer = post(functions, lambda_context, path, body, demo["key"])
    assert status == 400 and answer["code"] == 4 and answer["result"] is None
    assert answer["description"].startswith(field), answer
    assert quota(accounts) == before and task_count() == 0 and accounts.usage.ledger(1) == []
    assert_nothing_held(accounts, before)


def test_an_action_needs_one_of_the_parents_buttons_and_the_callers_own_parent(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    grid = imagine(functions, lambda_context, demo["key"])
    finish(queues, lambda_context, clock)
    buttons = fetch(functions, lambda_context, grid, demo["key"])[1]["buttons"]
    before = quota(accounts)
    status, answer = post(functions, lambda_context, "/imgtask/submit/action",
                          {"taskId": grid, "customId": "MJ::JOB::upsample::1::somebody-elses"}, demo["key"])
    assert status == 400 and answer["description"].startswith("customId")
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    status, answer = post(functions, lambda_context, "/imgtask/submit/action",
                          {"taskId": grid, "customId": buttons[0]["customId"]}, other)
    assert status == 404 and answer["code"] == 3
    assert quota(accounts) == before


def test_an_upstream_image_link_to_a_private_address_is_never_read(tasks_env, functions, queues, demo,
                                                                   lambda_context, clock, monkeypatch):
    task_id = imagine(functions, lambda_context, demo["key"])
    # Given private addresses refused (as deployed), the simulator's 127.0.0.1 link is not followed:
    # neither by the poller that would keep the image, nor by the route that would relay it
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    from gateway.settings import reload_settings
    reload_settings()
    finish(queues, lambda_context, clock)
    assert stored(task_id)["status"] == "succeeded"
    answer = image(functions, lambda_context, task_id, demo["key"])
    assert answer["statusCode"] == 502 and "does not read" in json.loads(answer["body"])["description"]


def _parked_zoom(functions, queues, ctx, clock, key) -> str:
    """A custom zoom waiting in MODAL, on an upscale of an imagine."""
    grid = imagine(functions, ctx, key)
    finish(queues, ctx, clock)
    u1 = fetch(functions, ctx, grid, key)[1]["buttons"][0]["customId"]
    upscale = post(functions, ctx, "/imgtask/submit/action", {"taskId": grid, "customId": u1}, key)[1]["result"]
    finish(queues, ctx, clock)
    zoom = next(b["customId"] for b in fetch(functions, ctx, upscale, key)[1]["buttons"] if b["label"] == "Custom Zoom")
    answer = post(functions, ctx, "/imgtask/submit/action", {"taskId": upscale, "customId": zoom}, key)[1]
    assert answer["code"] == 21
    return answer["result"]


def test_a_modal_the_upstream_refuses_ends_the_task_failed_and_refunded_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    modal_id = _parked_zoom(functions, queues, lambda_context, clock, demo["key"])
    before = quota(accounts)
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "something forbidden --zoom 2"}, demo["key"])
    assert status == 400 and answer["code"] == 24 and answer["properties"] == {"bannedWord": "forbidden"}
    record = fetch(functions, lambda_context, modal_id, demo["key"])[1]
    assert record["status"] == "FAILURE" and "banned" in record["failReason"]
    assert quota(accounts) == before
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, modal_id)] == [("refunded", 0)]
    assert stored(modal_id).get("open_shard") is None


def test_a_modal_refused_for_quota_waits_again_and_two_completions_never_both_run(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, monkeypatch):
    from unittest.mock import create_autospec

    from gateway.admission import billing
    from gateway.errors import Conflict, InsufficientQuota
    from gateway.tasks import engine

    modal_id = _parked_zoom(functions, queues, lambda_context, clock, demo["key"])
    real_reserve = billing.reserve

    def empty_wallet(*args, **kwargs):
        raise InsufficientQuota("the account's remaining quota is too low")

    monkeypatch.setattr(billing, "reserve", create_autospec(billing.reserve, side_effect=empty_wallet))
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "--zoom 2"}, demo["key"])
    assert status == 403 and fetch(functions, lambda_context, modal_id, demo["key"])[1]["status"] == "MODAL"
    monkeypatch.setattr(billing, "reserve", real_reserve)
    # Two completions racing on the same parked task: the second one's claim fails
    stale = engine.tasks().get(modal_id)
    status, answer = post(functions, lambda_context, "/imgtask/submit/modal",
                          {"taskId": modal_id, "prompt": "--zoom 2"}, demo["key"])
    assert status == 200 and answer["code"] == 1
    from gateway.auth import authenticate
    from gateway.tasks.engine import NewTask
    principal = authenticate({"Authorization": f"Bearer {demo['key']}"}, None)
    with pytest.raises(Conflict):
        engine.submit(principal, NewTask(family="imgtask", model=stale.model, upstream_request={}, route="/x",
                                         quantities={"calls": 1}, channel=stale.channel), parked=stale)
    assert [e["outcome"] for e in ledger_of(accounts, modal_id)] == []  # held once, not yet settled
    finish(queues, lambda_context, clock)
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, modal_id)] == [("settled", MODAL_UNITS)]


# --- the basic (open-source) midjourney-proxy: a channel's `variant` --------------------------

@pytest.fixture
def basic_channel(tasks_env, tmp_path):
    """The only imgtask channel runs the open-source midjourney-proxy (`variant: basic`)."""
    from tests.conftest import use_environment

    document = {"channels": [{"name": "mj-basic", "protocol": "imgtask", "base_url": tasks_env + "/imgtask/basic",
                              "api_key": "k", "models": ["*"], "variant": "basic"}]}
    path = tmp_path / "channels.json"
    path.write_text(json.dumps(document))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path))
    yield tasks_env
    use_environment(**saved)


def test_on_a_basic_channel_buttons_are_change_calls_u_v_and_reroll(
        basic_channel, functions, queues, demo, accounts, lambda_context, clock):
    # The open-source midjourney-proxy has no /mj/submit/action and its records no buttons: the
    # gateway gives a finished grid U1-U4, V1-V4 and reroll, and runs them as /mj/submit/change.
    task_id = imagine(functions, lambda_context, demo["key"])
    finish(queues, lambda_context, clock)
    done = fetch(functions, lambda_context, task_id, demo["key"])[1]
    assert done["status"] == "SUCCESS"
    assert [b["label"] or b["emoji"] for b in done["buttons"]] == ["U1", "U2", "U3", "U4", "🔄",
                                                                   "V1", "V2", "V3", "V4"]
    made = {}
    for label, action in (("U2", "UPSCALE"), ("V3", "VARIATION"), ("🔄", "IMAGINE")):
        custom_id = next(b["customId"] for b in done["buttons"] if (b["label"] or b["emoji"]) == label)
        status, answer = post(functions, lambda_context, "/imgtask/submit/action",
                              {"taskId": task_id, "customId": custom_id}, demo["key"])
        assert status == 200 and answer["code"] == 1, answer
        upstream = simulator.TASKS[stored(answer["result"])["upstream_task_id"]]
        assert upstream["basic"] and upstream["parent"] == stored(task_id)["upstream_task_id"]
        finish(queues, lambda_context, clock)
        record = fetch(functions, lambda_context, answer["result"], demo["key"])[1]
        assert record["status"] == "SUCCESS" and record["action"] == action
        assert [(e["outcome"]) for e in ledger_of(accounts, answer["result"])] == ["settled"]
        made[label] = record
    # A variation is a grid again (its buttons are change calls too); an upscale is not: none
    assert [b["label"] for b in made["V3"]["buttons"]][:4] == ["U1", "U2", "U3", "U4"]
    assert made["U2"]["buttons"] == []


@pytest.mark.parametrize("path,body,named", [
    ("/imgtask/submit/shorten", {"prompt": "a very long prompt"}, "shorten"),
    ("/imgtask/insight-face/swap", {"sourceBase64": PNG, "targetBase64": PNG}, "face swap"),
    ("/imgtask/submit/imagine", {"prompt": "a fox", "botType": "NIJI_JOURNEY"}, "NIJI_JOURNEY"),
])
def test_what_the_basic_build_cannot_do_is_a_clear_400_before_any_hold(
        basic_channel, functions, demo, accounts, lambda_context, path, body, named):
    before = quota(accounts)
    status, answer = post(functions, lambda_context, path, body, demo["key"])
    assert status == 400, answer
    assert named in answer["description"] and "basic" in answer["description"]
    assert quota(accounts) == before and task_count() == 0 and accounts.usage.ledger(1) == []
    assert_nothing_held(accounts, before)


def test_a_basic_channel_refuses_image_seed_and_an_extended_only_button_with_a_400(
        basic_channel, functions, queues, demo, accounts, lambda_context, clock):
    task_id = imagine(functions, lambda_context, demo["key"])
    finish(queues, lambda_context, clock)
    status, answer = status_and_json(call(functions["imgtask"], lambda_context, "GET",
                                          f"/imgtask/task/{task_id}/image-seed", demo["key"],
                                          resource="/imgtask/task/{id}/image-seed", path_parameters={"id": task_id}))
    assert status == 400 and "image-seed" in answer["description"], answer
    before = quota(accounts)
    job = stored(task_id)["details"]["buttons"][0]["customId"].rsplit("::", 1)[-1]
    status, answer = post(functions, lambda_context, "/imgtask/submit/action",
                          {"taskId": task_id, "customId": f"MJ::JOB::pan_left::1::{job}::SOLO"}, demo["key"])
    assert status == 400 and quota(accounts) == before


def test_the_basic_simulator_answers_404_for_what_the_open_source_proxy_lacks(tasks_env):
    import httpx

    base = tasks_env + "/imgtask/basic/mj"
    for path in ("/submit/action", "/submit/modal", "/submit/shorten", "/insight-face/swap"):
        answer = httpx.post(base + path, json={}, headers={"mj-api-secret": "k"})
        assert answer.status_code == 404 and answer.json()["error"] == "Not Found", path
    assert httpx.get(base + "/task/1/image-seed", headers={"mj-api-secret": "k"}).status_code == 404
