"""The gamma family through its function in-process: the emulator's tables and queues, the
simulated gamma upstream on 127.0.0.1 with a clock the test moves."""

from __future__ import annotations

import time

import pytest

from gateway.admission import balances
from gateway.settings import get_settings
from gateway.tasks import engine
from tests.integration.money_support import assert_nothing_held
from tests.integration.tasks_support import call, ledger_of, status_and_json, stored, task_count

SUBMIT = "/gamma/api/v1/services/aigc/video-generation/video-synthesis"
I2V = {"model": "gamma2.6-i2v", "input": {"prompt": "a cat turns its head", "img_url": "https://example.com/cat.png"},
       "parameters": {"resolution": "1080P", "duration": 10}}
I2V_UNITS = 750_000  # 0.10 USD/s x 10 s x 1.5 (1080P)


def submit(functions, ctx, body, key):
    return status_and_json(call(functions["gamma"], ctx, "POST", SUBMIT, key, body=body))


def query(functions, ctx, task_id, key):
    return status_and_json(call(functions["gamma"], ctx, "GET", f"/gamma/api/v1/tasks/{task_id}", key,
                                resource="/gamma/api/v1/tasks/{task_id}", path_parameters={"task_id": task_id}))


def quota(accounts) -> int:
    return balances.get_user(1)["quota"]


def with_prompt(prompt: str) -> dict:
    return {**I2V, "input": {**I2V["input"], "prompt": prompt}}


def test_a_gamma_video_goes_from_pending_to_succeeded_and_is_settled_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    # Given a submit in the upstream's shape
    status, answer = submit(functions, lambda_context, I2V, demo["key"])
    assert status == 200 and answer["request_id"] and answer["output"]["task_status"] == "PENDING"
    task_id = answer["output"]["task_id"]
    assert quota(accounts) == before - I2V_UNITS  # held at submit
    # When the upstream runs it, then finishes it
    queues.polls(lambda_context, rounds=1)
    assert query(functions, lambda_context, task_id, demo["key"])[1]["output"]["task_status"] == "PENDING"
    clock.advance(15)
    queues.polls(lambda_context, rounds=1)
    assert query(functions, lambda_context, task_id, demo["key"])[1]["output"]["task_status"] == "RUNNING"
    clock.advance()
    queues.polls(lambda_context)
    # Then the query answers the upstream's finished shape with the video link
    status, done = query(functions, lambda_context, task_id, demo["key"])
    output = done["output"]
    assert status == 200 and output["task_status"] == "SUCCEEDED" and done["request_id"]
    assert output["video_url"].startswith(tasks_env + "/gamma/files/") and output["submit_time"]
    assert output["end_time"] and output["scheduled_time"] and output["actual_prompt"] == "a cat turns its head"
    assert done["usage"] == {"video_duration": 10, "video_count": 1}
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", I2V_UNITS)]
    assert quota(accounts) == before - I2V_UNITS


def test_a_task_is_settled_at_the_operators_price_it_was_held_at_not_one_set_meanwhile(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    from gateway import options
    from gateway.store.options import OptionsRepository

    def operator_prices(per_second: str) -> None:  # PUT /api/option/ ModelPrice, as the console saves it
        options.update({"key": "ModelPrice", "value": {"gamma2.6-i2v": {"per_second": per_second}}}, 1)

    try:
        # Given the operator prices the model at 0.20 USD a second: the submit holds 3 USD
        operator_prices("0.2")
        before = quota(accounts)
        status, answer = submit(functions, lambda_context, I2V, demo["key"])
        task_id = answer["output"]["task_id"]
        assert status == 200 and quota(accounts) == before - 2 * I2V_UNITS
        assert stored(task_id)["price"] == {"per_second": "0.2"}  # kept with the task
        # When the operator lowers it to 0.05 USD a second while the video is made
        operator_prices("0.05")
        clock.advance(15)
        queues.polls(lambda_context, rounds=1)
        clock.advance()
        queues.polls(lambda_context)
        # Then the task settles at the price it was held at
        assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", 2 * I2V_UNITS)]
        assert quota(accounts) == before - 2 * I2V_UNITS
    finally:
        OptionsRepository().put_option("ModelPrice", "{}", by=1, at=int(time.time()))
        options.forget()


@pytest.mark.parametrize("fault,word", [("fail", "FAILED"), ("cancel", "CANCELED")])
def test_a_failed_or_cancelled_gamma_task_is_refunded_exactly_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, fault, word):
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, with_prompt(f"storm #fault={fault}"), demo["key"])
    task_id = answer["output"]["task_id"]
    clock.advance()
    queues.polls(lambda_context)
    output = query(functions, lambda_context, task_id, demo["key"])[1]["output"]
    assert output["task_status"] == word and output["code"] and output["message"]
    if fault == "fail":
        assert output["code"] == "InternalError.Algo" and "Simulated generation failure" in output["message"]
    # A late redelivery changes nothing
    assert engine.poll_once(task_id) == "done"
    assert quota(accounts) == before
    assert [(e["outcome"], e["reserved_units"]) for e in ledger_of(accounts, task_id)] == [("refunded", I2V_UNITS)]


def test_a_status_word_the_gateway_does_not_know_keeps_polling_until_the_sweeper_refunds_it(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    task_id = submit(functions, lambda_context, with_prompt("odd #fault=strange"), demo["key"])[1]["output"]["task_id"]
    clock.advance()
    # When the upstream answers a word the table does not have
    queues.polls(lambda_context, rounds=1)
    # Then it is recorded, the task stays open and its next poll is queued
    task = stored(task_id)
    assert task["upstream_status"] == "SUSPENDED" and task["status"] == "in_progress" and "open_shard" in task
    assert queues.depth("TaskPollQueue") == 1
    assert query(functions, lambda_context, task_id, demo["key"])[1]["output"]["task_status"] == "RUNNING"
    assert quota(accounts) == before - I2V_UNITS
    # And at its age limit the sweeper ends it with one refund
    queues.purge("TaskPollQueue")
    too_old = time.time() + get_settings().task_max_age_seconds + 1
    assert engine.sweep(now=too_old)["timed_out"] == 1
    assert engine.sweep(now=too_old + 60)["timed_out"] == 0
    output = query(functions, lambda_context, task_id, demo["key"])[1]["output"]
    assert output["task_status"] == "FAILED" and output["code"] == "TaskTimeout"
    assert quota(accounts) == before
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"]


def test_a_task_the_upstream_calls_unknown_is_refunded_and_shown_unknown(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    from gateway_local.simulators import gamma

    before = quota(accounts)
    task_id = submit(functions, lambda_context, I2V, demo["key"])[1]["output"]["task_id"]
    gamma.TASKS.clear()  # the upstream forgets it (an expired id)
    queues.polls(lambda_context)
    output = query(functions, lambda_context, task_id, demo["key"])[1]["output"]
    assert output["task_status"] == "UNKNOWN" and "UNKNOWN" in output["message"]
    assert quota(accounts) == before
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"]


def test_an_unknown_or_foreign_task_id_answers_unknown_like_the_upstream(
        tasks_env, functions, demo, accounts, lambda_context):
    from gateway.admin import ensure_demo_account

    task_id = submit(functions, lambda_context, I2V, demo["key"])[1]["output"]["task_id"]
    other = "sk-" + "o" * 48
    ensure_demo_account(user_id=2, key=other, quota=500_000_000, access_token="other-token",
                        username="other")
    for key, wanted in ((other, task_id), (demo["key"], "no-such-task")):
        status, answer = query(functions, lambda_context, wanted, key)
        assert status == 200 and answer["output"] == {"task_id": wanted, "task_status": "UNKNOWN"}


@pytest.mark.parametrize("change,field", [
    ({"model": "gamma9"}, "model"),
    ({"input": {"prompt": "no image"}}, "input.img_url"),
    ({"input": {"img_url": "ftp://x/y.png"}}, "input.img_url"),
    ({"input": {"img_url": "https://x/y.png", "audio_url": "file:///etc/passwd"}}, "input.audio_url"),
    ({"input": {"img_url": "https://x/y.png", "prompt": "p" * 2001}}, "input.prompt"),
    ({"model": "gamma2.6-t2v", "input": {"prompt": "x", "img_url": "https://x/y.png"}}, "input.img_url"),
    ({"model": "gamma2.6-t2v", "input": {"prompt": " "}}, "input.prompt"),
    ({"parameters": {"resolution": "480P"}}, "parameters.resolution"),
    ({"parameters": {"resolution": "4K"}}, "parameters.resolution"),
    ({"parameters": {"duration": 7}}, "parameters.duration"),
    ({"parameters": {"duration": "5"}}, "parameters.duration"),
    ({"model": "gamma2.5-i2v-preview", "parameters": {"duration": 15}}, "parameters.duration"),
    ({"parameters": {"shot_type": "wide"}}, "parameters.shot_type"),
    ({"model": "gamma2.5-i2v-preview", "parameters": {"shot_type": "single"}}, "parameters.shot_type"),
    ({"parameters": {"prompt_extend": "yes"}}, "parameters.prompt_extend"),
    ({"parameters": {"seed": -1}}, "parameters.seed"),
    ({"parameters": {"fps": 30}}, "parameters.fps"),
    ({"input": None}, "input"),
    ({"parameters": {"size": "1920*1080"}}, "parameters.size"),  # image-to-video takes resolution
    ({"model": "gamma2.6-t2v", "input": {"prompt": "x"}, "parameters": {"size": "1920x1080"}}, "parameters.size"),
    ({"model": "gamma2.6-t2v", "input": {"prompt": "x"}, "parameters": {"size": "832*480"}}, "parameters.size"),
    ({"model": "gamma2.5-t2v-preview", "input": {"prompt": "x"},
      "parameters": {"size": "832*480", "resolution": "1080P"}}, "parameters.size"),
])
def test_every_bad_value_is_an_invalid_parameter_naming_the_field_and_holds_nothing(
        tasks_env, functions, demo, accounts, lambda_context, change, field):
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, {**I2V, **change}, demo["key"])
    assert status == 400 and answer["code"] == "InvalidParameter" and answer["request_id"]
    assert answer["message"].startswith(f"{field}:"), answer["message"]
    assert quota(accounts) == before and task_count() == 0 and accounts.usage.ledger(1) == []
    assert_nothing_held(accounts, before)


@pytest.mark.parametrize("parameters,size,units", [
    ({"resolution": "480P"}, "832*480", 125_000),     # 0.10 USD/s x 5 s x 0.5
    ({"size": "480*832"}, "480*832", 125_000),
    ({"resolution": "720P"}, "1280*720", 250_000),
    ({}, "1920*1080", 375_000),                       # the default, 1080P: x 1.5
])
def test_a_text_to_video_task_reaches_wan_as_a_size_and_is_billed_for_the_size_rendered(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, parameters, size, units):
    # Wan text-to-video reads `parameters.size` (W*H) and ignores `resolution` (DashScope's
    # reference; new-api's ali adaptor): the simulator renders its default 1920*1080 otherwise.
    from gateway_local.simulators import gamma as simulator

    before = quota(accounts)
    body = {"model": "gamma2.5-t2v-preview", "input": {"prompt": "a kite over the sea"},
            "parameters": {**parameters, "duration": 5}}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 200, answer
    upstream = simulator.TASKS[stored(answer["output"]["task_id"])["upstream_task_id"]]
    assert upstream["size"] == size
    assert quota(accounts) == before - units
    clock.advance()
    queues.polls(lambda_context)
    task_id = answer["output"]["task_id"]
    assert query(functions, lambda_context, task_id, demo["key"])[1]["output"]["task_status"] == "SUCCEEDED"
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", units)]


def test_a_gamma_task_settles_to_the_seconds_and_tier_the_upstream_reports_never_above_the_hold():
    from dataclasses import replace

    from gateway.prices import SHIPPED
    from gateway.store.tasks import Task
    from gateway.tasks.families.gamma import FAMILY

    price = SHIPPED["gamma2.6-i2v"]
    task = Task(task_id="t", owner_id="1", family="gamma", model="gamma2.6-i2v", channel="c", upstream_task_id="u",
                reservation={"units": I2V_UNITS}, created_at=0, updated_at=0, public={"resolution": "1080P"})
    assert FAMILY.units_to_settle(replace(task, details={"usage": {"video_duration": 10, "SR": 720}}), price) \
        == 500_000  # rendered at 720P: x 1
    assert FAMILY.units_to_settle(replace(task, details={"usage": {"duration": 5, "size": "832*480"}}), price) \
        == 125_000
    assert FAMILY.units_to_settle(replace(task, details={"usage": {"video_duration": 99, "SR": 1080}}), price) \
        == I2V_UNITS
    assert FAMILY.units_to_settle(replace(task, details={}), price) == I2V_UNITS


def test_a_body_that_is_not_json_is_an_invalid_parameter(tasks_env, functions, demo, lambda_context):
    status, answer = submit(functions, lambda_context, "{nope", demo["key"])
    assert status == 400 and answer["code"] == "InvalidParameter" and "JSON" in answer["message"]


def test_an_upstream_refusal_is_relayed_in_the_gamma_shape_and_refunded(
        tasks_env, functions, demo, accounts, lambda_context):
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, with_prompt("bad #fault=reject"), demo["key"])
    assert status == 400 and set(answer) == {"request_id", "code", "message"}
    assert "DataInspectionFailed" in answer["message"]
    assert quota(accounts) == before and task_count() == 0
    assert_nothing_held(accounts, before)


def test_keys_missing_and_wrong_answer_in_the_spec_and_upstream_shapes(tasks_env, functions, lambda_context):
    from tests.conftest import api_event

    missing = functions["gamma"].lambda_handler(api_event("POST", SUBMIT, body="{}"), lambda_context)
    status, body = status_and_json(missing)
    assert status == 401 and body["error"]["type"] == "api_error"
    assert missing["body"] and body["error"]["message"]
    wrong = status_and_json(call(functions["gamma"], lambda_context, "POST", SUBMIT, "sk-" + "x" * 48, body=I2V))
    assert wrong[0] == 401 and wrong[1]["code"] == "InvalidApiKey"


def test_an_upstream_throttling_answers_429_throttling_and_holds_nothing(
        tasks_env, functions, demo, accounts, lambda_context):
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, with_prompt("busy #fault=throttle"), demo["key"])
    assert status == 429 and answer["code"] == "Throttling" and answer["request_id"]
    assert quota(accounts) == before and task_count() == 0
