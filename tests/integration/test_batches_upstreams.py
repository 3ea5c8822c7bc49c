"""Batches on Gemini's batch mode (a `content` channel) and on Bedrock batch inference (a
`bedrock` channel), through the openai SDK.

The batches function is served in-process behind the local runner's API Gateway (`GatewayApp`,
one function), the upstream is the content simulator's batch mode (`simulators/gemini_batch.py`)
on 127.0.0.1, and the poller is driven directly (`queues.polls`): a four-line batch completes,
its output is read by custom_id in the chat dialect, it is billed exactly the batch price of the
usage the upstream reported, once; another user's key gets 404; a cancelled batch pays only for
its completed lines. The same on Bedrock (`simulators/bedrock_batch.py`, its S3 bucket included),
whose jobs take at least the channel's minimum of records: a smaller batch is not sent there."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import openai
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway.admission import balances
from gateway.prices import SHIPPED, batch_price, token_cost
from gateway.routing.catalog import SIMULATOR_KEYS
from gateway.store.tasks import TasksRepository
from gateway_local.serving import GatewayApp
from gateway_local.simulators import bedrock, bedrock_batch, content, gemini_batch
from gateway_local.template import read_template
from tests.conftest import load_function, serve_asgi, use_environment
from tests.integration.tasks_support import ledger_of

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with serve_asgi(Starlette(routes=[Mount("/content", app=content.app), Mount("/bedrock", app=bedrock.app)])) as url:
        yield url


@pytest.fixture(scope="module")
def batches_url(aws) -> Iterator[str]:
    """The batches function behind the local runner's API Gateway, over real HTTP."""
    handler = load_function("batches").lambda_handler
    with serve_asgi(GatewayApp(read_template("template.yaml"), {"BatchesFunction": handler}, {},
                               log=lambda line: None)) as url:
        yield url


@pytest.fixture
def gemini(tasks_env, upstream_url, clock, tmp_path, monkeypatch) -> Iterator[None]:
    """Only a content channel (Gemini's API, a key) serves every model; its batches on the test's clock."""
    monkeypatch.setattr(gemini_batch, "clock", clock)
    path = tmp_path / "channels.json"
    path.write_text(json.dumps({"channels": [{"name": "gemini", "protocol": "content", "models": ["*"],
                                              "model_map": {"m-small": "g-small"},
                                              "base_url": upstream_url + "/content", "api_key": "g-key"}]}))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path))
    yield
    use_environment(**saved)


def client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=30)


def jsonl(*texts: str) -> bytes:
    return "".join(json.dumps({"custom_id": f"req-{n}", "method": "POST", "url": CHAT, "body": {
        "model": "m-small", "messages": [{"role": "user", "content": text}], "max_tokens": 12}}) + "\n"
        for n, text in enumerate(texts)).encode()


def lines(sdk: openai.OpenAI, file_id: str | None) -> list[dict]:
    assert file_id is not None
    return [json.loads(raw) for raw in sdk.files.content(file_id).text.splitlines()]


def priced(output: list[dict]) -> int:
    """Each line at the batch price of the usage the upstream reported, rounded once per line."""
    price = batch_price(SHIPPED["m-small"])
    return sum(token_cost(price, input_tokens=line["response"]["body"]["usage"]["prompt_tokens"],
                          output_tokens=line["response"]["body"]["usage"]["completion_tokens"]) for line in output)


def test_a_four_line_batch_runs_on_gemini_batch_mode_billed_once_at_the_batch_price(
        gemini, batches_url, queues, demo, accounts, clock, lambda_context):
    sdk = client(batches_url, demo["key"])
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl("one", "two", "three", "four"))),
                                purpose="batch")
    before = balances.get_user(1)["quota"]
    batch = sdk.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h")
    assert batch.status == "validating" and batch.request_counts is not None and batch.request_counts.total == 4
    task = TasksRepository().get(batch.id)
    assert task is not None and task.channel == "gemini" and task.upstream_task_id.startswith("batches/")
    request = gemini_batch.BATCHES[task.upstream_task_id]
    assert request["model"] == "models/g-small"  # the channel's upstream model
    assert [entry["metadata"]["key"] for entry in request["_requests"]] == ["l1", "l2", "l3", "l4"]
    queues.polls(lambda_context, rounds=1)
    assert sdk.batches.retrieve(batch.id).status == "in_progress"
    clock.advance()
    queues.polls(lambda_context)
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "completed" and done.error_file_id is None, done
    assert done.request_counts is not None and (done.request_counts.completed, done.request_counts.failed) == (4, 0)
    output = lines(sdk, done.output_file_id)
    by_id = {line["custom_id"]: line for line in output}
    assert sorted(by_id) == ["req-0", "req-1", "req-2", "req-3"]
    assert by_id["req-2"]["response"]["body"]["choices"][0]["message"]["content"] == "You said: three"
    assert all(line["response"]["status_code"] == 200 and line["response"]["body"]["object"] == "chat.completion"
               and line["response"]["body"]["model"] == "m-small" for line in output)
    (entry,) = ledger_of(accounts, batch.id)
    assert entry["outcome"] == "settled" and entry["units"] == priced(output) > 0
    assert balances.get_user(1)["quota"] == before - priced(output)
    for _ in range(20):
        sdk.batches.retrieve(batch.id)
    queues.polls(lambda_context)
    assert len(ledger_of(accounts, batch.id)) == 1 and balances.get_user(1)["quota"] == before - priced(output)
    assert "batches/" not in json.dumps(done.model_dump()) + json.dumps(output)

    accounts.users.create_user(username="gina", quota=10_000_000, user_id=2)
    other = client(batches_url, accounts.keys.create_key(2, name="gina")[0])
    for call in (lambda: other.batches.retrieve(batch.id), lambda: other.batches.cancel(batch.id),
                 lambda: other.files.content(done.output_file_id or ""), lambda: other.files.retrieve(uploaded.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert [b.id for b in other.batches.list()] == []


def test_a_cancelled_gemini_batch_pays_only_for_its_completed_lines(
        gemini, batches_url, queues, demo, accounts, clock, lambda_context):
    sdk = client(batches_url, demo["key"])
    data = jsonl("one", "#fault=429 two", "#batch=stall three", "four")
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    before = balances.get_user(1)["quota"]
    batch = sdk.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h")
    queues.polls(lambda_context, rounds=1)
    clock.advance()
    queues.polls(lambda_context, rounds=1)
    assert sdk.batches.retrieve(batch.id).status == "in_progress"
    assert sdk.batches.cancel(batch.id).status == "cancelling"
    queues.polls(lambda_context)
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "cancelled" and done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (4, 1, 3)
    output = lines(sdk, done.output_file_id)
    assert [line["custom_id"] for line in output] == ["req-0"]
    errors = {line["custom_id"]: line for line in lines(sdk, done.error_file_id)}
    # The refused line keeps its status (a google.rpc.Status RESOURCE_EXHAUSTED is a 429); the
    # lines never run say the batch was cancelled; neither is billed.
    assert errors["req-1"]["response"]["status_code"] == 429 and errors["req-1"]["error"] is None
    assert [(errors[i]["response"], errors[i]["error"]["code"]) for i in ("req-2", "req-3")] == [
        (None, "batch_cancelled"), (None, "batch_cancelled")]
    (entry,) = ledger_of(accounts, batch.id)
    assert entry["outcome"] == "settled" and entry["units"] == priced(output) > 0
    assert entry["detail"]["batch_status"] == "cancelled" and entry["detail"]["completed"] == 1
    assert balances.get_user(1)["quota"] == before - priced(output)


@pytest.fixture
def bedrock_channel(tasks_env, upstream_url, clock, tmp_path, monkeypatch) -> Iterator[None]:
    """Only a bedrock channel (an IAM user's keys) serves every model, its batches in the simulator's
    bucket; the account's minimum of records per job (and the channel's) is 4."""
    monkeypatch.setattr(bedrock_batch, "clock", clock)
    monkeypatch.setattr(bedrock_batch, "MIN_RECORDS", 4)
    path = tmp_path / "channels.json"
    path.write_text(json.dumps({"channels": [{
        "name": "aws", "protocol": "bedrock", "models": ["*"], "model_map": {"m-small": "amazon.nova-micro-v1:0"},
        "base_url": upstream_url + "/bedrock", "api_key": SIMULATOR_KEYS["bedrock"],
        "batch": {"s3_uri": "s3://gateway-batches/jobs", "role_arn": "arn:aws:iam::123456789012:role/batch",
                  "min_records": 4, "s3_endpoint": upstream_url + "/bedrock/s3"}}]}))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path))
    yield
    use_environment(**saved)


def test_a_four_record_batch_runs_on_bedrock_batch_inference_billed_once_at_the_batch_price(
        bedrock_channel, batches_url, queues, demo, accounts, clock, lambda_context):
    sdk = client(batches_url, demo["key"])
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl("one", "two", "three", "four"))),
                                purpose="batch")
    before = balances.get_user(1)["quota"]
    batch = sdk.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h")
    assert batch.status == "validating"
    task = TasksRepository().get(batch.id)
    assert task is not None and task.channel == "aws" and ":model-invocation-job/" in task.upstream_task_id
    job = bedrock_batch.JOBS[task.upstream_task_id.rsplit("/", 1)[-1]]
    assert (job["modelId"], job["modelInvocationType"], job["clientRequestToken"]) == (
        "amazon.nova-micro-v1:0", "Converse", batch.id.replace("_", "-"))
    # The records in the operator's bucket: recordIds of 11 characters, Converse bodies.
    assert [(r["recordId"], r["modelInput"]["messages"][0]["content"]) for r in job["_records"]][:2] == [
        ("L0000000001", [{"text": "one"}]), ("L0000000002", [{"text": "two"}])]
    queues.polls(lambda_context, rounds=1)
    assert sdk.batches.retrieve(batch.id).status == "in_progress"
    clock.advance()
    queues.polls(lambda_context)
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "completed" and done.error_file_id is None, done
    assert done.request_counts is not None and (done.request_counts.completed, done.request_counts.failed) == (4, 0)
    by_id = {line["custom_id"]: line for line in lines(sdk, done.output_file_id)}
    assert sorted(by_id) == ["req-0", "req-1", "req-2", "req-3"]
    assert by_id["req-2"]["response"]["body"]["choices"][0]["message"]["content"] == "You said: three"
    assert all(line["response"]["body"]["model"] == "m-small" for line in by_id.values())
    (entry,) = ledger_of(accounts, batch.id)
    assert entry["outcome"] == "settled" and entry["units"] == priced(list(by_id.values())) > 0
    for _ in range(20):
        sdk.batches.retrieve(batch.id)
    queues.polls(lambda_context)
    assert len(ledger_of(accounts, batch.id)) == 1
    assert balances.get_user(1)["quota"] == before - priced(list(by_id.values()))
    assert "model-invocation-job" not in json.dumps(done.model_dump())


def test_a_batch_below_the_bedrock_channels_minimum_is_not_sent_there(
        bedrock_channel, batches_url, demo, accounts):
    sdk = client(batches_url, demo["key"])
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl("one", "two", "three"))), purpose="batch")
    before, jobs = balances.get_user(1)["quota"], len(bedrock_batch.JOBS)
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h")
    assert refused.value.code == "model_not_batchable" and "at least 4 requests (this file has 3)" in str(refused.value)
    assert len(bedrock_batch.JOBS) == jobs and balances.get_user(1)["quota"] == before


def test_a_stopped_bedrock_job_pays_only_for_its_completed_records(
        bedrock_channel, batches_url, queues, demo, accounts, clock, lambda_context):
    sdk = client(batches_url, demo["key"])
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl("one", "#fault=429 two", "#batch=stall three",
                                                                   "four"))), purpose="batch")
    before = balances.get_user(1)["quota"]
    batch = sdk.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h")
    queues.polls(lambda_context, rounds=1)
    clock.advance()
    queues.polls(lambda_context, rounds=1)
    assert sdk.batches.retrieve(batch.id).status == "in_progress"
    assert sdk.batches.cancel(batch.id).status == "cancelling"
    queues.polls(lambda_context)
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "cancelled" and done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (4, 1, 3)
    output = lines(sdk, done.output_file_id)
    assert [line["custom_id"] for line in output] == ["req-0"]
    errors = {line["custom_id"]: line for line in lines(sdk, done.error_file_id)}
    # The throttled record keeps its errorCode; the records never run say the batch was cancelled.
    assert errors["req-1"]["response"]["status_code"] == 429
    assert [errors[i]["error"]["code"] for i in ("req-2", "req-3")] == ["batch_cancelled", "batch_cancelled"]
    (entry,) = ledger_of(accounts, batch.id)
    assert entry["units"] == priced(output) > 0 and entry["detail"]["batch_status"] == "cancelled"
    assert balances.get_user(1)["quota"] == before - priced(output)
