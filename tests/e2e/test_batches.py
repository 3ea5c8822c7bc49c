"""The Files and Batch APIs through the openai SDK on the local gateway (what `make run` starts):
a chat batch uploaded, run on the chat simulator's Batch API, its output read by custom_id, its
price half the synchronous price (each line rounded once), nothing more for retrieving it, and
another user's key seeing none of it; a cancelled batch pays only for its completed lines."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import openai
import pytest

from gateway.prices import SHIPPED, batch_price, token_cost
from tests.e2e.conftest import account, closed_reservation
from tests.e2e.test_video_tasks import wait_for

pytestmark = pytest.mark.e2e

PRICE = SHIPPED["m-small"]


def _sync_units(usage) -> Decimal:
    """A synchronous m-small request's exact price in units, before its rounding."""
    return (Decimal(usage.prompt_tokens) * PRICE.input_per_million
            + Decimal(usage.completion_tokens) * PRICE.output_per_million) / 2  # 500,000 units per USD / 1M


def _jsonl(bodies: list[dict]) -> bytes:
    return "".join(json.dumps({"custom_id": f"req-{n}", "method": "POST", "url": "/v1/chat/completions",
                               "body": body}) + "\n" for n, body in enumerate(bodies)).encode()


def _other_client(gateway, gateway_url, name: str) -> openai.OpenAI:
    other = gateway.admin("create-user", "--username", name, "--quota-usd", "100")
    key = gateway.admin("issue-key", "--user", str(other["user_id"]), "--name", name)["key"]
    return openai.OpenAI(api_key=key, base_url=f"{gateway_url}/v1", max_retries=0, timeout=60)


def test_a_four_line_batch_completes_at_half_price_and_is_its_owners_only(gateway, gateway_url, http,
                                                                          openai_client):
    # Bodies whose synchronous price is an even whole number of units, so half of it is exact
    # (every line is rounded up once, as a synchronous request is: docs/batches.md).
    bodies: list[dict] = []
    for n in range(60):
        body = {"model": "m-small", "messages": [{"role": "user", "content": "count the words " * (1 + n // 8)}],
                "max_tokens": 8 + n % 8}
        usage = openai_client.chat.completions.create(**body).usage
        exact = _sync_units(usage)
        if exact == exact.to_integral_value() and int(exact) % 2 == 0:
            bodies.append(body)
        if len(bodies) == 4:
            break
    assert len(bodies) == 4
    before = account(http)["quota"]
    for body in bodies:
        openai_client.chat.completions.create(**body)
    synchronous = before - account(http)["quota"]

    uploaded = openai_client.files.create(file=("batch.jsonl", io.BytesIO(_jsonl(bodies))), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(_jsonl(bodies))
    before = account(http)["quota"]
    batch = openai_client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                         completion_window="24h", metadata={"job": "four"})
    assert batch.status in ("validating", "in_progress") and batch.request_counts.total == 4
    done = wait_for(lambda: openai_client.batches.retrieve(batch.id),
                    lambda b: b.status not in ("validating", "in_progress", "finalizing"), "the batch")
    assert done.status == "completed", done
    assert done.request_counts.completed == 4 and done.request_counts.failed == 0
    assert done.metadata == {"job": "four"} and done.error_file_id is None
    lines = [json.loads(raw) for raw in openai_client.files.content(done.output_file_id).text.splitlines()]
    by_id = {line["custom_id"]: line for line in lines}
    assert sorted(by_id) == ["req-0", "req-1", "req-2", "req-3"]
    assert all(line["response"]["status_code"] == 200 and line["error"] is None for line in lines)
    assert all(line["response"]["body"]["model"] == "m-small" for line in lines)

    settled = closed_reservation(gateway, batch.id)
    charged = before - account(http)["quota"]
    expected = sum(token_cost(batch_price(PRICE), input_tokens=line["response"]["body"]["usage"]["prompt_tokens"],
                              output_tokens=line["response"]["body"]["usage"]["completion_tokens"]) for line in lines)
    assert settled["status"] == "settled" and charged == expected == int(settled["closed_units"])
    assert charged * 2 == synchronous

    # Retrieving it again and again bills nothing more
    for _ in range(20):
        openai_client.batches.retrieve(batch.id)
    assert before - account(http)["quota"] == charged
    assert batch.id in [b.id for b in openai_client.batches.list()]
    assert uploaded.id in [f.id for f in openai_client.files.list()]
    assert "file-" in done.output_file_id and "upstream" not in json.dumps(done.model_dump())

    # Another user's key: 404 for the file, its content and the batch, and none of them listed
    with _other_client(gateway, gateway_url, "batch-isolation") as other:
        for call in (lambda: other.files.retrieve(uploaded.id), lambda: other.files.content(done.output_file_id),
                     lambda: other.batches.retrieve(batch.id), lambda: other.batches.cancel(batch.id),
                     lambda: other.files.delete(uploaded.id)):
            with pytest.raises(openai.NotFoundError):
                call()
        assert [f.id for f in other.files.list()] == []
        assert [b.id for b in other.batches.list()] == []
        with pytest.raises(openai.NotFoundError):
            other.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")

    # The owner deletes its input file
    assert openai_client.files.delete(uploaded.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        openai_client.files.retrieve(uploaded.id)


def test_a_cancelled_batch_pays_only_for_its_completed_lines(gateway, http, openai_client):
    bodies = [{"model": "m-small", "messages": [{"role": "user", "content": text}], "max_tokens": 10}
              for text in ("first line", "second line", "#batch=stall third line", "fourth line")]
    uploaded = openai_client.files.create(file=("stall.jsonl", io.BytesIO(_jsonl(bodies))), purpose="batch")
    before = account(http)["quota"]
    batch = openai_client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                         completion_window="24h")
    wait_for(lambda: openai_client.batches.retrieve(batch.id), lambda b: b.status == "in_progress", "the batch")
    assert openai_client.batches.cancel(batch.id).status == "cancelling"
    done = wait_for(lambda: openai_client.batches.retrieve(batch.id),
                    lambda b: b.status not in ("validating", "in_progress", "finalizing", "cancelling"), "the cancel")
    assert done.status == "cancelled" and done.cancelling_at is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (4, 2, 2)
    output = [json.loads(raw) for raw in openai_client.files.content(done.output_file_id).text.splitlines()]
    errors = [json.loads(raw) for raw in openai_client.files.content(done.error_file_id).text.splitlines()]
    assert sorted(line["custom_id"] for line in output) == ["req-0", "req-1"]
    assert {line["custom_id"]: line["error"]["code"] for line in errors} == {"req-2": "batch_cancelled",
                                                                             "req-3": "batch_cancelled"}
    settled = closed_reservation(gateway, batch.id)
    expected = sum(token_cost(batch_price(PRICE), input_tokens=line["response"]["body"]["usage"]["prompt_tokens"],
                              output_tokens=line["response"]["body"]["usage"]["completion_tokens"])
                   for line in output)
    assert settled["status"] == "settled" and int(settled["closed_units"]) == expected > 0
    assert before - account(http)["quota"] == expected


def test_a_broken_batch_file_is_refused_naming_its_first_bad_line(openai_client):
    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m-small", "messages": [{"role": "user", "content": "hi"}]}}
    cases = [
        ({**good, "custom_id": "a"}, "line 2: custom_id 'a' is used by an earlier line"),
        ({**good, "custom_id": "b", "url": "/v1/images/generations"}, "line 2: url"),
        ({**good, "custom_id": "b", "body": {**good["body"], "model": "m-large"}}, "line 2: body.model 'm-large'"),
        ({**good, "custom_id": "b", "body": {"model": "m-small"}}, "line 2: body.messages"),
        ({**good, "custom_id": "b", "body": {**good["body"], "stream": True}}, "line 2: body.stream"),
    ]
    for second, message in cases:
        data = (json.dumps(good) + "\n" + json.dumps(second) + "\n").encode()
        with pytest.raises(openai.BadRequestError) as refused:
            openai_client.files.create(file=("bad.jsonl", io.BytesIO(data)), purpose="batch")
        assert refused.value.body["message"].startswith(message), refused.value.body
        assert refused.value.body["param"] == "file"


def test_a_file_sent_by_the_presigned_upload_is_checked_on_arrival(openai_client):
    import httpx

    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m-small", "messages": [{"role": "user", "content": "hi"}]}}
    outcomes = []
    for second in ({**good, "custom_id": "b"}, {**good, "custom_id": "a"}):
        data = (json.dumps(good) + "\n" + json.dumps(second) + "\n").encode()
        # What a user does: ask for the upload, send the bytes straight to its url, wait for the check
        answer = httpx.post(f"{openai_client.base_url}files/uploads", json={
            "filename": "big.jsonl", "purpose": "batch", "bytes": len(data)},
            headers={"Authorization": f"Bearer {openai_client.api_key}"}).json()
        assert answer["status"] == "uploaded", answer
        sent = httpx.post(answer["upload"]["url"], data=answer["upload"]["fields"], files={"file": data})
        assert sent.is_success, sent.text
        outcomes.append(openai_client.files.wait_for_processing(answer["id"], poll_interval=0.2))
    assert outcomes[0].status == "processed" and outcomes[0].bytes > 0
    assert outcomes[1].status == "error" and outcomes[1].status_details.startswith("line 2: custom_id 'a'")
