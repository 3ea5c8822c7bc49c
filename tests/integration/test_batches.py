"""The Files and Batch APIs through their function in-process (the emulator's tables, queues and
files bucket; the chat simulator's Batch API on 127.0.0.1): a batch held at submit, settled once
to its lines' usage at the batch price, one ledger entry with its line counts; retrieves bill
nothing; a cancelled batch pays its completed lines; another user sees none of it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from gateway.admission import balances
from gateway.prices import SHIPPED, Price, batch_price, token_cost
from gateway.store.tasks import TasksRepository
from gateway_local.simulators import anthropic_batch, azure, chat, messages, openai_batch
from tests.conftest import api_event, load_function, serve_asgi, use_environment
from tests.integration.tasks_support import auth, call, ledger_of, status_and_json

CHAT = "/v1/chat/completions"
BOUNDARY = "batchboundary"


@pytest.fixture(scope="module")
def batches_fn(aws):
    return load_function("batches")


@pytest.fixture(scope="module")
def chat_url() -> Iterator[str]:
    with serve_asgi(Starlette(routes=[Mount("/chat", app=chat.app), Mount("/messages", app=messages.app),
                                      Mount("/azure", app=azure.app)])) as url:
        yield url


@pytest.fixture
def sim_clock(tasks_env, chat_url, clock, monkeypatch):
    """The task environment, every model routed to this chat simulator, its batches on the test's clock."""
    monkeypatch.setattr(openai_batch, "clock", clock)
    saved = use_environment(GATEWAY_SIMULATOR_URL=chat_url)
    yield clock
    use_environment(**saved)


def jsonl(*texts: str, model: str = "m-small") -> bytes:
    return "".join(json.dumps({"custom_id": f"req-{n}", "method": "POST", "url": CHAT, "body": {
        "model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 12}}) + "\n"
        for n, text in enumerate(texts)).encode()


def upload(fn, ctx, key: str, data: bytes, purpose: str = "batch") -> tuple[int, dict]:
    body = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n"
            f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
            f"Content-Type: application/jsonl\r\n\r\n").encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()
    event = api_event("POST", "/v1/files", body=base64.b64encode(body).decode(), base64=True,
                      headers={**auth(key), "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
    return status_and_json(fn.lambda_handler(event, ctx))


def route(fn, ctx, method: str, path: str, key: str, *, body=None, query=None, **params: str) -> dict:
    resource = path
    for name, value in params.items():
        resource = resource.replace(value, "{" + name + "}")
    return call(fn, ctx, method, path, key, body=body, query=query, resource=resource, path_parameters=params or None)


def create(fn, ctx, key: str, file_id: str) -> tuple[int, dict]:
    return status_and_json(route(fn, ctx, "POST", "/v1/batches", key, body={
        "input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h", "metadata": {"run": "1"}}))


def retrieve(fn, ctx, key: str, batch_id: str) -> tuple[int, dict]:
    return status_and_json(route(fn, ctx, "GET", f"/v1/batches/{batch_id}", key, batch_id=batch_id))


def lines_of(fn, ctx, key: str, file_id: str) -> list[dict]:
    answer = route(fn, ctx, "GET", f"/v1/files/{file_id}/content", key, file_id=file_id)
    assert answer["statusCode"] == 302
    return [json.loads(raw) for raw in httpx.get(answer["multiValueHeaders"]["Location"][0]).text.splitlines()]


def priced(lines: list[dict]) -> int:
    price = batch_price(SHIPPED["m-small"])
    return sum(token_cost(price, input_tokens=line["response"]["body"]["usage"]["prompt_tokens"],
                          output_tokens=line["response"]["body"]["usage"]["completion_tokens"]) for line in lines)


def test_a_batch_is_held_run_upstream_and_settled_once_to_its_lines(
        tasks_env, batches_fn, queues, demo, accounts, lambda_context, sim_clock):
    key = demo["key"]
    status, uploaded = upload(batches_fn, lambda_context, key, jsonl("one", "two", "three", "four"))
    assert status == 200 and uploaded["object"] == "file" and uploaded["purpose"] == "batch", uploaded
    before = balances.get_user(1)["quota"]
    status, batch = create(batches_fn, lambda_context, key, uploaded["id"])
    assert status == 200 and batch["status"] == "validating" and batch["request_counts"]["total"] == 4, batch
    held = before - balances.get_user(1)["quota"]
    assert held > 0
    # The upstream's ids stay in the store: the answer names the gateway's own only
    task = TasksRepository().get(batch["id"])
    assert task is not None and task.upstream_task_id not in json.dumps(batch)
    queues.polls(lambda_context, rounds=1)
    assert retrieve(batches_fn, lambda_context, key, batch["id"])[1]["status"] == "in_progress"
    sim_clock.advance()
    queues.polls(lambda_context)
    status, done = retrieve(batches_fn, lambda_context, key, batch["id"])
    assert status == 200 and done["status"] == "completed", done
    assert done["request_counts"] == {"total": 4, "completed": 4, "failed": 0} and done["metadata"] == {"run": "1"}
    assert done["completed_at"] and done["in_progress_at"] and done["error_file_id"] is None
    output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
    assert sorted(line["custom_id"] for line in output) == ["req-0", "req-1", "req-2", "req-3"]
    assert all(line["id"].startswith("batch_req_") and line["response"]["status_code"] == 200 for line in output)
    assert task.upstream_task_id not in json.dumps(done) + json.dumps(output)
    # One ledger entry for the batch, its lines counted; the rest of the hold given back
    (entry,) = ledger_of(accounts, batch["id"])
    assert entry["outcome"] == "settled" and entry["units"] == priced(output) < held
    assert (entry["detail"]["lines"], entry["detail"]["completed"], entry["detail"]["price"]) == (4, 4, "batch")
    assert balances.get_user(1)["quota"] == before - priced(output)
    # A thousand retrieves and the list bill nothing more
    for _ in range(1000):
        retrieve(batches_fn, lambda_context, key, batch["id"])
    queues.polls(lambda_context)
    assert len(ledger_of(accounts, batch["id"])) == 1 and balances.get_user(1)["quota"] == before - priced(output)
    listed = status_and_json(route(batches_fn, lambda_context, "GET", "/v1/batches", key))[1]
    assert [b["id"] for b in listed["data"]] == [batch["id"]] and listed["has_more"] is False
    files = status_and_json(route(batches_fn, lambda_context, "GET", "/v1/files", key))[1]
    assert {f["id"] for f in files["data"]} == {uploaded["id"], done["output_file_id"]}

    # Another user: a 404 for every id, and nothing in its lists
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    for file_id in (uploaded["id"], done["output_file_id"]):
        for method, path in (("GET", f"/v1/files/{file_id}"), ("GET", f"/v1/files/{file_id}/content"),
                             ("DELETE", f"/v1/files/{file_id}")):
            answer = route(batches_fn, lambda_context, method, path, other, file_id=file_id)
            assert answer["statusCode"] == 404 and "No such File object" in answer["body"], (method, path)
    assert retrieve(batches_fn, lambda_context, other, batch["id"])[0] == 404
    assert route(batches_fn, lambda_context, "POST", f"/v1/batches/{batch['id']}/cancel", other,
                 batch_id=batch["id"])["statusCode"] == 404
    assert create(batches_fn, lambda_context, other, uploaded["id"])[0] == 404
    for path in ("/v1/batches", "/v1/files"):
        assert status_and_json(route(batches_fn, lambda_context, "GET", path, other))[1]["data"] == []
    # The owner deletes a file: gone from the store and its list
    deleted = status_and_json(route(batches_fn, lambda_context, "DELETE", f"/v1/files/{uploaded['id']}", key,
                                    file_id=uploaded["id"]))[1]
    assert deleted == {"id": uploaded["id"], "object": "file", "deleted": True}
    assert route(batches_fn, lambda_context, "GET", f"/v1/files/{uploaded['id']}", key,
                 file_id=uploaded["id"])["statusCode"] == 404


def test_a_cancelled_batch_pays_only_for_its_completed_lines(
        tasks_env, batches_fn, queues, demo, accounts, lambda_context, sim_clock):
    key = demo["key"]
    _, uploaded = upload(batches_fn, lambda_context, key, jsonl("one", "two", "#batch=stall three", "four"))
    before = balances.get_user(1)["quota"]
    _, batch = create(batches_fn, lambda_context, key, uploaded["id"])
    queues.polls(lambda_context, rounds=1)
    sim_clock.advance()
    queues.polls(lambda_context, rounds=1)
    assert retrieve(batches_fn, lambda_context, key, batch["id"])[1]["status"] == "in_progress"
    status, cancelling = status_and_json(route(batches_fn, lambda_context, "POST",
                                               f"/v1/batches/{batch['id']}/cancel", key, batch_id=batch["id"]))
    assert status == 200 and cancelling["status"] == "cancelling" and cancelling["cancelling_at"]
    queues.polls(lambda_context)
    _, done = retrieve(batches_fn, lambda_context, key, batch["id"])
    assert done["status"] == "cancelled" and done["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
    errors = lines_of(batches_fn, lambda_context, key, done["error_file_id"])
    assert sorted(line["custom_id"] for line in output) == ["req-0", "req-1"]
    assert [(line["custom_id"], line["response"], line["error"]["code"]) for line in errors] == [
        ("req-2", None, "batch_cancelled"), ("req-3", None, "batch_cancelled")]
    (entry,) = ledger_of(accounts, batch["id"])
    assert entry["outcome"] == "settled" and entry["units"] == priced(output) > 0
    assert balances.get_user(1)["quota"] == before - priced(output)


def test_bad_files_and_batches_are_refused_naming_the_field(
        tasks_env, batches_fn, demo, lambda_context, sim_clock):
    key = demo["key"]
    status, refused = upload(batches_fn, lambda_context, key, jsonl("one") + b'{"custom_id": "x"}\n')
    assert status == 400 and refused["error"]["param"] == "file"
    assert refused["error"]["message"].startswith("line 2: method is required")
    assert refused["error"]["code"] == "missing_required_parameter"
    status, refused = upload(batches_fn, lambda_context, key, b"x", purpose="fine-tune")
    assert status == 400 and refused["error"]["param"] == "purpose"
    _, kept = upload(batches_fn, lambda_context, key, b"notes", purpose="user_data")
    assert create(batches_fn, lambda_context, key, kept["id"])[1]["error"]["param"] == "input_file_id"
    _, good = upload(batches_fn, lambda_context, key, jsonl("one"))
    for body, param in (({"input_file_id": good["id"], "endpoint": "/v1/embeddings", "completion_window": "24h"},
                         "endpoint"),
                        ({"input_file_id": good["id"], "endpoint": CHAT, "completion_window": "1h"},
                         "completion_window"),
                        ({"input_file_id": good["id"], "endpoint": CHAT, "completion_window": "24h",
                          "metadata": {str(n): "v" for n in range(17)}}, "metadata")):
        status, answer = status_and_json(route(batches_fn, lambda_context, "POST", "/v1/batches", key, body=body))
        assert status == 400 and answer["error"]["param"] == param, answer


def test_a_batch_on_a_messages_channel_runs_on_message_batches_and_answers_in_the_chat_dialect(
        tasks_env, batches_fn, queues, demo, accounts, lambda_context, sim_clock, chat_url, tmp_path, monkeypatch):
    # Given only a messages channel: the lines go to Anthropic's Message Batches, converted
    monkeypatch.setattr(anthropic_batch, "clock", sim_clock)
    path = tmp_path / "channels.json"
    path.write_text(json.dumps({"channels": [{"name": "anthropic", "protocol": "messages", "models": ["*"],
                                              "base_url": chat_url + "/messages", "api_key": "k",
                                              "poll_hosts": [chat_url]}]}))
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path))
    try:
        key = demo["key"]
        _, uploaded = upload(batches_fn, lambda_context, key, jsonl("one", "two", "#batch=stall three"))
        before = balances.get_user(1)["quota"]
        status, batch = create(batches_fn, lambda_context, key, uploaded["id"])
        assert status == 200, batch
        assert TasksRepository().get(batch["id"]).upstream_task_id.startswith("msgbatch_")
        queues.polls(lambda_context, rounds=1)
        assert retrieve(batches_fn, lambda_context, key, batch["id"])[1]["status"] == "in_progress"
        route(batches_fn, lambda_context, "POST", f"/v1/batches/{batch['id']}/cancel", key, batch_id=batch["id"])
        queues.polls(lambda_context)
        _, done = retrieve(batches_fn, lambda_context, key, batch["id"])
        assert done["status"] == "cancelled" and done["request_counts"] == {"total": 3, "completed": 2, "failed": 1}
        output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
        assert sorted(line["custom_id"] for line in output) == ["req-0", "req-1"]
        assert all(line["response"]["body"]["object"] == "chat.completion" and
                   line["response"]["body"]["model"] == "m-small" for line in output)
        errors = lines_of(batches_fn, lambda_context, key, done["error_file_id"])
        assert [(line["custom_id"], line["error"]["code"]) for line in errors] == [("req-2", "batch_cancelled")]
        (entry,) = ledger_of(accounts, batch["id"])
        assert entry["outcome"] == "settled" and entry["units"] == priced(output) > 0
        assert balances.get_user(1)["quota"] == before - priced(output)
        assert "msgbatch_" not in json.dumps(done) + json.dumps(output)
    finally:
        use_environment(**saved)


def presigned(fn, ctx, key: str, data: bytes, purpose: str = "batch", declared: int | None = None) -> dict:
    status, answer = status_and_json(route(fn, ctx, "POST", "/v1/files/uploads", key, body={
        "filename": "big.jsonl", "purpose": purpose, "bytes": len(data) if declared is None else declared}))
    assert status == 200 and answer["status"] == "uploaded" and answer["object"] == "file", answer
    return answer


def post_form(upload: dict, data: bytes) -> httpx.Response:
    """What a user does with the answer: the fields, then the file, as a form to the url."""
    return httpx.post(upload["url"], data=upload["fields"], files={"file": ("big.jsonl", data)})


def test_a_file_beyond_a_request_goes_by_a_presigned_upload_and_is_checked_on_arrival(
        tasks_env, batches_fn, queues, demo, accounts, lambda_context, sim_clock, monkeypatch):
    from gateway.api import uploads
    from gateway.multipart import MAX_REQUEST_BYTES

    key = demo["key"]
    # The 413 of a body a Lambda request cannot carry names the way
    status, refused = upload(batches_fn, lambda_context, key, b" " * (MAX_REQUEST_BYTES + 1))
    assert status == 413 and "POST /v1/files/uploads" in refused["error"]["message"], refused
    # A file larger than that, by the presigned POST; nothing usable until it is checked
    big = jsonl(*(f"line {n} " + "x" * 400 for n in range(11_000)))
    assert len(big) > MAX_REQUEST_BYTES
    answer = presigned(batches_fn, lambda_context, key, big)
    form = answer["upload"]
    assert answer["bytes"] == len(big) and form["expires_at"] > answer["created_at"]
    policy = json.loads(base64.b64decode(form["fields"]["policy"]))
    assert ["content-length-range", len(big), len(big)] in policy["conditions"]
    assert {"x-amz-server-side-encryption": "AES256"} in policy["conditions"]
    assert form["fields"]["key"] == f"files/1/{answer['id']}"
    status, early = create(batches_fn, lambda_context, key, answer["id"])
    assert status == 400 and early["error"]["code"] == "file_not_ready", early
    assert post_form(form, big).status_code in (200, 201, 204)
    status, got = status_and_json(route(batches_fn, lambda_context, "GET", f"/v1/files/{answer['id']}", key,
                                        file_id=answer["id"]))
    assert status == 200 and got["status"] == "processed" and got["status_details"] is None, got
    assert "upload" not in got
    # Another user: the same 404 as a missing file
    accounts.users.create_user(username="eve", quota=10_000_000, user_id=2)
    other, _ = accounts.keys.create_key(2, name="eve")
    assert route(batches_fn, lambda_context, "GET", f"/v1/files/{answer['id']}", other,
                 file_id=answer["id"])["statusCode"] == 404
    # It runs as a batch, held from the summary taken on arrival
    status, batch = create(batches_fn, lambda_context, key, answer["id"])
    assert status == 200 and batch["request_counts"]["total"] == 11_000, batch

    # A bad line is refused by its number, and its bytes are kept nowhere
    bad = jsonl("one", "two") + b'{"custom_id": "req-9", "method": "GET"}\n'
    refused_file = presigned(batches_fn, lambda_context, key, bad)
    post_form(refused_file["upload"], bad)
    got = status_and_json(route(batches_fn, lambda_context, "GET", f"/v1/files/{refused_file['id']}", key,
                                file_id=refused_file["id"]))[1]
    assert got["status"] == "error" and got["status_details"].startswith("line 3: url is required"), got
    status, answer_400 = create(batches_fn, lambda_context, key, refused_file["id"])
    assert status == 400 and answer_400["error"]["code"] == "file_refused"
    assert "line 3" in answer_400["error"]["message"]
    assert route(batches_fn, lambda_context, "GET", f"/v1/files/{refused_file['id']}/content", key,
                 file_id=refused_file["id"])["statusCode"] == 400
    # More bytes than declared (S3 enforces the policy; the emulator does not, the check does)
    short = presigned(batches_fn, lambda_context, key, b"notes", purpose="user_data", declared=3)
    post_form(short["upload"], b"notes")
    got = status_and_json(route(batches_fn, lambda_context, "GET", f"/v1/files/{short['id']}", key,
                                file_id=short["id"]))[1]
    assert got["status"] == "error" and "5 bytes, not the 3" in got["status_details"], got
    # Nothing uploaded before the link expired
    late = presigned(batches_fn, lambda_context, key, b"notes", purpose="user_data")
    monkeypatch.setattr(uploads.time, "time", lambda: late["upload"]["expires_at"] - 1)
    assert status_and_json(route(batches_fn, lambda_context, "GET", f"/v1/files/{late['id']}", key,
                                 file_id=late["id"]))[1]["status"] == "uploaded"
    monkeypatch.setattr(uploads.time, "time", lambda: late["upload"]["expires_at"] + 1)
    got = status_and_json(route(batches_fn, lambda_context, "GET", f"/v1/files/{late['id']}", key,
                                file_id=late["id"]))[1]
    assert got["status"] == "error" and "did not arrive" in got["status_details"], got
    # The upload request itself is checked, naming the field
    for body, param in (({"filename": "a", "purpose": "batch", "bytes": 300 * 1024 * 1024}, "bytes"),
                        ({"filename": "a", "purpose": "fine-tune", "bytes": 3}, "purpose")):
        status, answer_400 = status_and_json(route(batches_fn, lambda_context, "POST", "/v1/files/uploads", key,
                                                   body=body))
        assert status == 400 and answer_400["error"]["param"] == param, answer_400


# ---------------------------------------------------------------------------------------------
# A protocol without a batch API (azure here): the gateway runs the lines itself, a chunk a poll

@pytest.fixture
def self_run(chat_url, tmp_path, monkeypatch):
    """Only an azure channel (its simulator answers as the chat simulator does); two lines a poll."""
    from gateway.tasks.families.batch import local

    monkeypatch.setattr(local, "CHUNK_LINES", 2)

    def configure(prices: dict | None = None) -> None:
        path = tmp_path / "channels.json"
        path.write_text(json.dumps({"prices": prices or {}, "channels": [{
            "name": "azure", "protocol": "azure", "base_url": chat_url + "/azure",
            "api_key": "0123456789abcdef0123456789abcdef", "models": ["*"]}]}))
        saved.update(use_environment(GATEWAY_CHANNELS_FILE=str(path)))

    saved: dict = {}
    yield configure
    use_environment(**saved)


def priced_at(lines: list[dict], price) -> int:
    return sum(token_cost(price, input_tokens=line["response"]["body"]["usage"]["prompt_tokens"],
                          output_tokens=line["response"]["body"]["usage"]["completion_tokens"]) for line in lines)


def test_a_batch_on_a_protocol_without_a_batch_api_is_run_by_the_gateway_at_the_full_price(
        tasks_env, batches_fn, queues, demo, accounts, lambda_context, sim_clock, self_run):
    from gateway.tasks.families.batch.lines import check_file

    self_run()
    key = demo["key"]
    data = jsonl("one", "#fault=400 two", "three", "four")
    _, uploaded = upload(batches_fn, lambda_context, key, data)
    before = balances.get_user(1)["quota"]
    status, batch = create(batches_fn, lambda_context, key, uploaded["id"])
    assert status == 200 and batch["status"] == "in_progress", batch
    # Held at the full price: no upstream discount to pass on
    summary = check_file(data)
    assert before - balances.get_user(1)["quota"] == token_cost(
        SHIPPED["m-small"], input_tokens=summary.input_tokens, output_tokens=summary.output_tokens) + 4
    # A chunk a poll: two lines, then the rest
    queues.polls(lambda_context, rounds=1)
    _, running = retrieve(batches_fn, lambda_context, key, batch["id"])
    assert running["status"] == "in_progress" and TasksRepository().get(batch["id"]).details["next_line"] == 2
    queues.polls(lambda_context)
    _, done = retrieve(batches_fn, lambda_context, key, batch["id"])
    assert done["status"] == "completed" and done["request_counts"] == {"total": 4, "completed": 3, "failed": 1}
    output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
    assert sorted(line["custom_id"] for line in output) == ["req-0", "req-2", "req-3"]
    assert all(line["response"]["body"]["model"] == "m-small" for line in output)
    # The failing line goes to the error file with the upstream's status, and costs nothing
    (failed,) = lines_of(batches_fn, lambda_context, key, done["error_file_id"])
    assert (failed["custom_id"], failed["response"]["status_code"]) == ("req-1", 400)
    (entry,) = ledger_of(accounts, batch["id"])
    units = priced_at(output, SHIPPED["m-small"])
    assert entry["outcome"] == "settled" and entry["units"] == units and entry["detail"]["completed"] == 3
    assert balances.get_user(1)["quota"] == before - units


def test_a_self_run_batch_cancelled_half_way_pays_its_completed_lines_at_the_operators_batch_price(
        tasks_env, batches_fn, queues, demo, accounts, lambda_context, sim_clock, self_run):
    self_run(prices={"m-small": {"input_per_million": 0.5, "output_per_million": 1.5, "batch_ratio": 0.4}})
    key = demo["key"]
    _, uploaded = upload(batches_fn, lambda_context, key, jsonl("one", "two", "three", "four"))
    before = balances.get_user(1)["quota"]
    _, batch = create(batches_fn, lambda_context, key, uploaded["id"])
    queues.polls(lambda_context, rounds=1)
    status, cancelling = status_and_json(route(batches_fn, lambda_context, "POST",
                                               f"/v1/batches/{batch['id']}/cancel", key, batch_id=batch["id"]))
    assert status == 200 and cancelling["status"] == "cancelling"
    queues.polls(lambda_context)
    _, done = retrieve(batches_fn, lambda_context, key, batch["id"])
    assert done["status"] == "cancelled" and done["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
    errors = lines_of(batches_fn, lambda_context, key, done["error_file_id"])
    assert sorted(line["custom_id"] for line in output) == ["req-0", "req-1"]
    assert [(line["custom_id"], line["error"]["code"]) for line in errors] == [
        ("req-2", "batch_cancelled"), ("req-3", "batch_cancelled")]
    price = Price.of(TasksRepository().get(batch["id"]).price)
    assert price.batch_ratio == Decimal("0.4")
    units = priced_at(output, batch_price(price))
    (entry,) = ledger_of(accounts, batch["id"])
    assert entry["outcome"] == "settled" and entry["units"] == units > 0
    assert balances.get_user(1)["quota"] == before - units


def test_a_batch_past_its_maximum_age_is_collected_not_refunded(
        tasks_env, batches_fn, functions, queues, demo, accounts, lambda_context, sim_clock, self_run, monkeypatch):
    from types import SimpleNamespace

    from gateway.tasks import engine
    from tests.conftest import EVENTS

    key = demo["key"]
    sweep_event = json.loads((EVENTS / "task_sweeper.json").read_text())

    def sweep_at(seconds_later: float) -> None:
        """The sweeper function, its clock `seconds_later` than now (a clock, not a sleep)."""
        later = SimpleNamespace(time=lambda: real_time() + seconds_later, monotonic=real_monotonic)
        monkeypatch.setattr(engine, "time", later)
        functions["task_sweeper"].lambda_handler(sweep_event, lambda_context)
        monkeypatch.setattr(engine, "time", real)

    import time as real
    real_time, real_monotonic = real.time, real.monotonic
    # An upstream (chat) batch that ended there while its polls were lost: collected and settled
    _, uploaded = upload(batches_fn, lambda_context, key, jsonl("one", "two"))
    before = balances.get_user(1)["quota"]
    _, upstream_batch = create(batches_fn, lambda_context, key, uploaded["id"])
    queues.polls(lambda_context, rounds=1)
    queues.purge("TaskPollQueue")
    sim_clock.advance()
    sweep_at(27 * 3600)
    _, done = retrieve(batches_fn, lambda_context, key, upstream_batch["id"])
    assert done["status"] == "completed" and done["request_counts"]["completed"] == 2, done
    output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
    (entry,) = ledger_of(accounts, upstream_batch["id"])
    assert entry["outcome"] == "settled" and entry["units"] == priced(output)
    assert balances.get_user(1)["quota"] == before - priced(output)

    # A batch the gateway runs, two of its four lines done: expired, those two billed
    self_run()
    _, uploaded = upload(batches_fn, lambda_context, key, jsonl("one", "two", "three", "four"))
    before = balances.get_user(1)["quota"]
    _, batch = create(batches_fn, lambda_context, key, uploaded["id"])
    queues.polls(lambda_context, rounds=1)
    queues.purge("TaskPollQueue")
    sweep_at(27 * 3600)
    _, done = retrieve(batches_fn, lambda_context, key, batch["id"])
    assert done["status"] == "expired" and done["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    assert done["expired_at"]
    output = lines_of(batches_fn, lambda_context, key, done["output_file_id"])
    errors = lines_of(batches_fn, lambda_context, key, done["error_file_id"])
    assert [line["error"]["code"] for line in errors] == ["batch_expired", "batch_expired"]
    units = priced_at(output, SHIPPED["m-small"])
    (entry,) = ledger_of(accounts, batch["id"])
    assert entry["outcome"] == "settled" and entry["units"] == units > 0
    assert balances.get_user(1)["quota"] == before - units
