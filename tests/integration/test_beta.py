"""The beta family through its function in-process: the emulator's tables and queues, the
simulated beta upstream on 127.0.0.1 (which names a polling URL on `localhost`) with a clock
the test moves."""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.admission import balances
from gateway.settings import get_settings
from gateway.store.aws import client
from gateway.tasks import callbacks, engine
from tests.conftest import api_event, serve_asgi, use_environment
from tests.integration.money_support import assert_nothing_held
from tests.integration.tasks_support import call, ledger_of, status_and_json, stored, task_count

SUBMIT = "/beta/v1/beta-2-pro"
BODY = {"model": "beta-2-pro", "prompt": "a lighthouse in fog", "width": 1024, "height": 768, "seed": 7,
        "output_format": "png"}
UNITS = 15_000  # 1024x768 is 0.79 MP, billed as 1: 0.03 USD (BFL FLUX.2 [pro])


def submit(functions, ctx, body, key, headers=None):
    event = api_event("POST", SUBMIT, body=body if isinstance(body, str) else json.dumps(body),
                      headers=headers or {"x-key": key})
    return status_and_json(functions["beta"].lambda_handler(event, ctx))


def get_result(functions, ctx, task_id, key, **kwargs):
    return status_and_json(call(functions["beta"], ctx, "GET", f"/beta/v1/get_result/{task_id}", key,
                                resource="/beta/v1/get_result/{task_id}", path_parameters={"task_id": task_id},
                                **kwargs))


def fetch_sample(functions, ctx, link, redirects=None):
    """The sample route's answer, its redirect to the kept copy followed with plain HTTP as a
    browser would (`redirects` collects the Locations); the answer in API Gateway's shape."""
    parts = urlsplit(link)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    task_id = parts.path.split("/")[-2]
    event = api_event("GET", parts.path, resource="/beta/v1/results/{task_id}/sample",
                      path_parameters={"task_id": task_id}, query=query, headers={"Accept": "image/png"})
    answer = functions["beta"].lambda_handler(event, ctx)
    if answer["statusCode"] != 302:
        return answer
    location = answer["multiValueHeaders"]["Location"][0]
    if redirects is not None:
        redirects.append(location)
    kept = httpx.get(location)
    return {"statusCode": kept.status_code, "multiValueHeaders": {"Content-Type": [kept.headers["content-type"]]},
            "body": base64.b64encode(kept.content).decode(), "isBase64Encoded": True}


def quota(accounts) -> int:
    return balances.get_user(1)["quota"]


def test_a_beta_image_goes_from_submit_to_a_served_sample_following_the_polling_url(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    # Given a submit with the upstream's own key header
    status, answer = submit(functions, lambda_context, BODY, demo["key"])
    assert status == 200 and set(answer) == {"id", "polling_url"}
    task_id = answer["id"]
    assert urlsplit(answer["polling_url"]).path == f"/beta/v1/get_result/{task_id}"
    assert quota(accounts) == before - UNITS
    # The upstream named its polling URL on the other local host name, and the task keeps it
    assert urlsplit(stored(task_id)["poll_url"]).hostname == "localhost"
    # When the poller asks while it runs, then once it is done
    queues.polls(lambda_context, rounds=1)
    pending = get_result(functions, lambda_context, task_id, demo["key"], body={"model": "beta-2-pro"})[1]
    assert pending["status"] == "Pending" and pending["result"] is None and 0 <= pending["progress"] < 1
    clock.advance()
    queues.polls(lambda_context)
    # Then the result is Ready with a gateway link, never the upstream's
    status, done = get_result(functions, lambda_context, task_id, demo["key"], query={"model": "beta-2-pro"})
    assert status == 200 and done["status"] == "Ready" and done["id"] == task_id and done["progress"] is None
    sample = done["result"]["sample"]
    assert urlsplit(sample).path == f"/beta/v1/results/{task_id}/sample" and tasks_env not in sample
    assert done["result"]["seed"] == 7 and done["result"]["prompt"] == "a lighthouse in fog"
    # And the link serves the image with no key, from the kept copy by a presigned S3 link
    redirects: list[str] = []
    served = fetch_sample(functions, lambda_context, sample, redirects)
    assert len(redirects) == 1 and "X-Amz-Signature=" in redirects[0]
    assert served["statusCode"] == 200 and served["multiValueHeaders"]["Content-Type"] == ["image/png"]
    data = base64.b64decode(served["body"]) if served.get("isBase64Encoded") else served["body"].encode()
    assert data.startswith(b"\x89PNG")
    assert [(e["outcome"], e["units"]) for e in ledger_of(accounts, task_id)] == [("settled", UNITS)]
    assert quota(accounts) == before - UNITS


def test_the_kept_image_outlives_the_upstreams_link_and_a_tampered_link_is_refused(
        tasks_env, functions, queues, demo, lambda_context, clock):
    task_id = submit(functions, lambda_context, BODY, demo["key"])[1]["id"]
    clock.advance()
    queues.polls(lambda_context)
    sample = get_result(functions, lambda_context, task_id, demo["key"])[1]["result"]["sample"]
    forged = sample.replace("signature=", "signature=0")
    refused = fetch_sample(functions, lambda_context, forged)
    assert refused["statusCode"] == 403 and "signature" in json.loads(refused["body"])["detail"]
    # When the upstream's own link has expired (ten minutes after Ready)
    clock.advance(601)
    # Then the gateway's link still serves the copy it kept
    served = fetch_sample(functions, lambda_context, sample)
    assert served["statusCode"] == 200 and base64.b64decode(served["body"]).startswith(b"\x89PNG")
    # And once the bucket's lifecycle has removed it, the link says it is gone
    client("s3").delete_object(Bucket=get_settings().results_bucket, Key=f"beta/{task_id}/0")
    gone = fetch_sample(functions, lambda_context, sample)
    assert gone["statusCode"] == 410 and "one day" in json.loads(gone["body"])["detail"]


def test_an_image_that_expired_before_the_gateway_could_keep_it_fails_and_is_refunded(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    task_id = submit(functions, lambda_context, BODY, demo["key"])[1]["id"]
    # Given the poller comes back only after the upstream's link has expired
    clock.advance(31 + 601)
    queues.polls(lambda_context)
    answer = get_result(functions, lambda_context, task_id, demo["key"])[1]
    assert answer["status"] == "Error" and "expired" in answer["details"]["error"]
    assert quota(accounts) == before and [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"]
    assert_nothing_held(accounts, before)


def test_without_a_results_bucket_the_link_relays_the_upstreams_bytes_until_they_expire(
        tasks_env, functions, queues, demo, lambda_context, clock):
    saved = use_environment(RESULTS_BUCKET=None)
    try:
        task_id = submit(functions, lambda_context, BODY, demo["key"])[1]["id"]
        clock.advance()
        queues.polls(lambda_context)
        sample = get_result(functions, lambda_context, task_id, demo["key"])[1]["result"]["sample"]
        assert fetch_sample(functions, lambda_context, sample)["statusCode"] == 200
        clock.advance(601)
        gone = fetch_sample(functions, lambda_context, sample)
        assert gone["statusCode"] == 410 and "ten minutes" in json.loads(gone["body"])["detail"]
    finally:
        use_environment(**saved)


@pytest.mark.parametrize("fault,word", [("fail", "Error"), ("moderate-request", "Request Moderated"),
                                        ("moderate-content", "Content Moderated")])
def test_a_failed_or_moderated_image_is_refunded_exactly_once(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, fault, word):
    before = quota(accounts)
    task_id = submit(functions, lambda_context, {**BODY, "prompt": f"x #fault={fault}"}, demo["key"])[1]["id"]
    clock.advance()
    queues.polls(lambda_context)
    answer = get_result(functions, lambda_context, task_id, demo["key"])[1]
    assert answer["status"] == word and answer["result"] is None and answer["details"]["error"]
    assert engine.poll_once(task_id) == "done"
    assert quota(accounts) == before
    assert [(e["outcome"], e["reserved_units"]) for e in ledger_of(accounts, task_id)] == [("refunded", UNITS)]
    assert_nothing_held(accounts, before)


def test_a_polling_url_on_a_host_the_channel_does_not_allow_is_never_called_and_the_task_is_asked_for_at_its_base(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock, tmp_path):
    # Given a channel document whose beta channel allows only its own host: the upstream (which
    # charged at submit) names a polling URL on the other local host name
    document = {"channels": [{"name": "beta-strict", "protocol": "beta", "base_url": tasks_env + "/beta",
                              "api_key": "k", "models": ["beta-2-pro"]}]}
    path = tmp_path / "channels.json"
    path.write_text(json.dumps(document))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path))
    try:
        before = quota(accounts)
        task_id = submit(functions, lambda_context, BODY, demo["key"])[1]["id"]
        assert urlsplit(stored(task_id)["poll_url"]).hostname == "localhost"
        clock.advance()
        queues.polls(lambda_context)
        answer = get_result(functions, lambda_context, task_id, demo["key"])[1]
        # Then the key went only to the channel's own host, where the task was found Ready and billed
        assert answer["status"] == "Ready", answer
        assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["settled"]
        assert quota(accounts) == before - UNITS
        assert_nothing_held(accounts, quota(accounts))
    finally:
        use_environment(**saved)


def test_a_status_word_the_gateway_does_not_know_keeps_polling_until_the_sweeper_refunds_it(
        tasks_env, functions, queues, demo, accounts, lambda_context, clock):
    before = quota(accounts)
    task_id = submit(functions, lambda_context, {**BODY, "prompt": "x #fault=strange"}, demo["key"])[1]["id"]
    clock.advance()
    queues.polls(lambda_context, rounds=1)
    assert stored(task_id)["upstream_status"] == "Throttled" and "open_shard" in stored(task_id)
    assert queues.depth("TaskPollQueue") == 1
    assert get_result(functions, lambda_context, task_id, demo["key"])[1]["status"] == "Pending"
    queues.purge("TaskPollQueue")
    too_old = time.time() + get_settings().task_max_age_seconds + 1
    assert engine.sweep(now=too_old)["timed_out"] == 1
    assert get_result(functions, lambda_context, task_id, demo["key"])[1]["status"] == "Error"
    assert quota(accounts) == before
    assert [e["outcome"] for e in ledger_of(accounts, task_id)] == ["refunded"]
    assert_nothing_held(accounts, before)


def test_an_unknown_or_foreign_id_answers_task_not_found(tasks_env, functions, demo, accounts, lambda_context):
    from gateway.admin import ensure_demo_account

    task_id = submit(functions, lambda_context, BODY, demo["key"])[1]["id"]
    other = "sk-" + "o" * 48
    ensure_demo_account(user_id=2, key=other, quota=500_000_000, access_token="other-token",
                        username="other")
    for key, wanted in ((other, task_id), (demo["key"], "no-such-id")):
        status, answer = get_result(functions, lambda_context, wanted, key)
        assert status == 200 and answer == {"id": wanted, "status": "Task not found", "result": None,
                                            "progress": None}


@pytest.mark.parametrize("change,field", [
    ({"model": None}, "model"), ({"model": "beta-1"}, "model"), ({"prompt": None}, "prompt"),
    ({"prompt": "  "}, "prompt"), ({"prompt": "p" * 10_001}, "prompt"),
    ({"seed": -1}, "seed"), ({"seed": 4_294_967_296}, "seed"), ({"seed": "7"}, "seed"),
    ({"width": 1000}, "width"), ({"width": 48}, "width"), ({"width": 2064}, "width"),
    ({"height": 770}, "height"), ({"height": 4096}, "height"),
    ({"safety_tolerance": 7}, "safety_tolerance"), ({"safety_tolerance": -1}, "safety_tolerance"),
    ({"output_format": "webp"}, "output_format"), ({"webhook_url": "ftp://x/y"}, "webhook_url"),
    ({"webhook_url": "http://169.254.169.254/hook"}, "webhook_url"), ({"steps": 50}, "steps"),
])
def test_every_bad_value_is_refused_naming_the_field_and_holds_nothing(
        tasks_env, functions, demo, accounts, lambda_context, change, field, monkeypatch):
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    from gateway.settings import reload_settings
    reload_settings()
    before = quota(accounts)
    body = {k: v for k, v in {**BODY, **change}.items() if v is not None}
    status, answer = submit(functions, lambda_context, body, demo["key"])
    assert status == 400 and set(answer) == {"detail"} and answer["detail"].startswith(f"{field}:"), answer
    assert quota(accounts) == before and task_count() == 0 and accounts.usage.ledger(1) == []
    assert_nothing_held(accounts, before)


def test_an_upstream_refusal_is_relayed_in_the_detail_shape_and_refunded(
        tasks_env, functions, demo, accounts, lambda_context):
    before = quota(accounts)
    status, answer = submit(functions, lambda_context, {**BODY, "prompt": "x #fault=reject"}, demo["key"])
    assert status == 400 and "Simulated rejection" in answer["detail"]
    assert quota(accounts) == before and task_count() == 0
    assert_nothing_held(accounts, before)


def test_no_key_is_a_401_in_the_detail_shape(tasks_env, functions, lambda_context):
    status, answer = submit(functions, lambda_context, BODY, "", headers={"Content-Type": "application/json"})
    assert status == 401 and "API key" in answer["detail"]


class Receiver:
    def __init__(self) -> None:
        self.received: list[tuple[bytes, dict]] = []

    async def handle(self, request: Request) -> JSONResponse:
        self.received.append((await request.body(), dict(request.headers)))
        return JSONResponse({"ok": True})


def test_the_webhook_gets_the_signed_result_with_its_sample_link(
        tasks_env, functions, queues, demo, lambda_context, clock):
    receiver = Receiver()
    with serve_asgi(Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])) as url:
        task_id = submit(functions, lambda_context, {**BODY, "webhook_url": url + "/hook"}, demo["key"])[1]["id"]
        clock.advance()
        queues.polls(lambda_context)
        queues.callbacks(lambda_context)
    body, headers = receiver.received[-1]
    payload = json.loads(body)
    assert payload["id"] == task_id and payload["status"] == "Ready" and "/sample?" in payload["result"]["sample"]
    assert callbacks.verify(body, headers["x-gateway-signature"], "test-secret")
