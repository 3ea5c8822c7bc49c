"""When DynamoDB keeps refusing past botocore's retries (four attempts, `store.aws._new_client`),
a request answers 503 in its family's envelope with `Retry-After`, to be asked again, never a 500
to report (CI met one: `make test`'s fault run, a key read refused four times in a row). Each
path that answers a request maps it alike: the streaming functions (`gateway.asgi`), the buffered
ones (`gateway.http`), and the local runner's key check before a streaming function's body is read
(`gateway_local.serving`)."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from gateway.aws_failures import passing_failure
from gateway.observability import unexpected
from gateway_local.faults import Faults
from gateway_local.instances import AsgiPool
from gateway_local.serving import GatewayApp
from gateway_local.template import read_template
from tests.conftest import ROOT, api_event
from tests.integration.money_support import open_reservations

# botocore's standard mode as the layer configures it (`max_attempts: 3` counts the retries, not
# the first try: botocore's Config reference)
ATTEMPTS = 4


def _client_error(code: str, status: int, reasons: list[str] | None = None) -> ClientError:
    response: dict = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, "AnyOperation")


@pytest.mark.parametrize("error,passing", [
    (_client_error("ProvisionedThroughputExceededException", 400), True),
    (_client_error("ThrottlingException", 400), True),
    (_client_error("RequestLimitExceeded", 400), True),
    (_client_error("InternalServerError", 500), True),
    (_client_error("ServiceUnavailable", 503), True),
    (_client_error("TransactionCanceledException", 400, ["None", "ThrottlingError"]), True),
    (_client_error("TransactionCanceledException", 400, ["TransactionConflict", "None"]), True),
    (_client_error("TransactionCanceledException", 400, ["ConditionalCheckFailed", "ThrottlingError"]), False),
    (_client_error("TransactionCanceledException", 400, []), False),
    (_client_error("ConditionalCheckFailedException", 400), False),
    (_client_error("ValidationException", 400), False),
    (_client_error("ResourceNotFoundException", 400), False),
    (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
    (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True),
    (KeyError("quota"), False),
])
def test_an_aws_failure_that_passes_with_time_is_told_from_a_fault_of_ours(error, passing):
    assert passing_failure(error) is passing
    answered = unexpected(error)
    assert (answered.status, answered.headers.get("Retry-After")) == ((503, "1") if passing else (500, None))


def _throttle_the_next_key_reads(faults: Faults) -> None:
    for _ in range(ATTEMPTS):
        faults.plan("GetItem", "throttle")


CHAT = {"model": "m-small", "messages": [{"role": "user", "content": "hi"}]}


def test_the_text_function_answers_503_with_retry_after_when_the_key_read_stays_throttled(demo, app, faults):
    _throttle_the_next_key_reads(faults)

    async def scenario():
        # (Starlette raises the error again once its handler has answered, for the server to log:
        # the client has its answer by then)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            key = {"authorization": f"Bearer {demo['key']}"}
            refused = await client.post("/v1/chat/completions", headers=key, json=CHAT)
            # the next one reads the key (the throttling has passed) and meets the body's own rule
            after = await client.post("/v1/chat/completions", headers=key, json={"model": "m-small"})
            return refused, after

    refused, after = anyio.run(scenario)
    assert faults.counts.throttled == ATTEMPTS
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "store_unavailable"
    assert refused.json()["error"]["type"] == "server_error" and refused.headers["x-request-id"]
    assert after.status_code == 400 and after.json()["error"]["param"] == "messages"
    assert open_reservations(1) == []


def test_a_buffered_function_answers_503_with_retry_after_in_its_envelope(demo, faults, lambda_context):
    from tests.conftest import load_function

    account = load_function("account")
    _throttle_the_next_key_reads(faults)
    answer = account.lambda_handler(api_event("GET", "/v1/dashboard/billing/subscription", headers={
        "Authorization": f"Bearer {demo['key']}"}), lambda_context)
    assert faults.counts.throttled == ATTEMPTS
    assert answer["statusCode"] == 503 and json.loads(answer["body"])["error"]["code"] == "store_unavailable"
    headers = {**(answer.get("headers") or {}), **{k: v[0] for k, v in (answer.get("multiValueHeaders") or {}).items()}}
    assert headers["Retry-After"] == "1"


def test_the_local_runners_key_check_answers_503_in_the_envelope_not_a_bare_500(demo, faults):
    template = read_template(ROOT / "template.yaml")
    gateway = GatewayApp(template, {}, {"TextFunction": AsgiPool(template.functions["TextFunction"], 1)},
                         log=lambda line: None)
    _throttle_the_next_key_reads(faults)

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://gw") as client:
            return await client.post("/v1beta/models/m-small:generateContent", headers={
                "x-goog-api-key": demo["key"]}, json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})

    refused = anyio.run(scenario)
    assert faults.counts.throttled == ATTEMPTS
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["status"] == "UNAVAILABLE" and refused.headers["x-request-id"]


def test_a_fault_of_ours_still_answers_500_to_report_in_both_kinds_of_function(demo, app, monkeypatch, lambda_context):
    from gateway import auth
    from tests.conftest import load_function

    def broken(key_hash):
        raise KeyError("quota")

    monkeypatch.setattr(auth, "_load_key", broken)

    async def scenario():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            return await client.post("/v1/chat/completions", headers={"authorization": f"Bearer {demo['key']}"},
                                     json=CHAT)

    streamed = anyio.run(scenario)
    buffered = load_function("account").lambda_handler(api_event("GET", "/v1/dashboard/billing/subscription", headers={
        "Authorization": f"Bearer {demo['key']}"}), lambda_context)
    assert streamed.status_code == 500 and "retry-after" not in streamed.headers
    assert streamed.json()["error"]["message"].startswith("internal error; quote the request id")
    assert buffered["statusCode"] == 500
    assert json.loads(buffered["body"])["error"]["message"].startswith("internal error; quote the request id")
