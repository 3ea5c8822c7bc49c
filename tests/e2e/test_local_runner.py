"""The local runner as users run it: Lambda's isolation under concurrency, data kept across restarts."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import httpx
import pytest

from gateway.store.usage import ledger_pks
from tests.e2e.conftest import DEMO_KEY, LocalGateway

pytestmark = pytest.mark.e2e
KINDS = ("chat", "image", "plant", "bad_plant", "subscription")


def _ledger(gateway: LocalGateway, user_id: int) -> list[dict]:
    db = boto3.client("dynamodb", endpoint_url=gateway.emulator_url, region_name="us-east-1",
                      aws_access_key_id="local", aws_secret_access_key="local")
    items = [item for pk in ledger_pks(user_id)  # the user's ledger shards
             for item in db.query(TableName="AccountsTable", ConsistentRead=True,
                                  KeyConditionExpression="pk = :pk AND begins_with(sk, :usage)",
                                  ExpressionAttributeValues={":pk": {"S": pk}, ":usage": {"S": "USAGE#"}})["Items"]]
    return [{"request_id": i["request_id"]["S"], "model": i["model"]["S"], "units": int(i["units"]["N"]),
             "outcome": i["outcome"]["S"]} for i in items]


def _send(url: str, key: str, number: int, kind: str) -> tuple[int, str, httpx.Response]:
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, timeout=60) as http:
        if kind == "chat":
            answer = http.post("/v1/chat/completions", headers=auth, json={
                "model": "m-small", "messages": [{"role": "user", "content": f"request {number}"}]})
        elif kind == "image":
            answer = http.post("/v1/images/generations", headers=auth,
                               json={"model": "theta-3", "prompt": f"picture {number}"})
        elif kind == "plant":
            answer = http.post("/plants", headers=auth, json={"id": 10_000 + number, "name": f"plant {number}"})
        elif kind == "bad_plant":
            answer = http.post("/plants", headers=auth, json={"id": f"not a number {number}", "name": "x"})
        else:
            answer = http.get("/v1/dashboard/billing/subscription", headers=auth)
    return number, kind, answer


def test_fifty_mixed_parallel_requests_from_two_users_each_get_their_own_answer(gateway):
    # Given a second user with a key of its own, beside the demo user
    other = gateway.admin("create-user", "--username", "isolation", "--quota-usd", "100")
    other_key = gateway.admin("issue-key", "--user", str(other["user_id"]), "--name", "isolation")["key"]
    users = [(1, DEMO_KEY), (other["user_id"], other_key)]
    before = {user_id: {e["request_id"] for e in _ledger(gateway, user_id)} for user_id, _ in users}
    # When 50 requests of five kinds, alternating users, are sent all at once
    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(lambda n: _send(gateway.url, users[n % 2][1], n, KINDS[(n // 2) % 5]), range(50)))
    # Then each answer is its own request's, in its route's envelope
    image_ids: dict[int, set[str]] = {1: set(), other["user_id"]: set()}
    chat_ids: dict[int, set[str]] = {1: set(), other["user_id"]: set()}
    request_ids = []
    for number, kind, answer in answers:
        body, user_id = answer.json(), users[number % 2][0]
        if kind == "chat":
            assert answer.status_code == 200, body
            assert body["object"] == "chat.completion"
            assert body["choices"][0]["message"]["content"] == f"You said: request {number}"
            chat_ids[user_id].add(answer.headers["x-request-id"])
        elif kind == "image":
            assert answer.status_code == 200, body
            assert [d["revised_prompt"] for d in body["data"]] == [f"A detailed picture of picture {number}"]
            image_ids[user_id].add(answer.headers["x-request-id"])
        elif kind == "plant":
            assert (answer.status_code, body) == (200, {"name": f"plant {number}"})
        elif kind == "bad_plant":
            assert answer.status_code == 400 and body["error"] == 400 and "id" in body["message"], body
        else:
            assert answer.status_code == 200 and body["object"] == "billing_subscription", body
        request_ids.append(answer.headers["x-request-id"])
    assert len(set(request_ids)) == len(request_ids) == 50
    # And each user's ledger holds exactly their own requests, each settled once
    for user_id, _ in users:
        new = [e for e in _ledger(gateway, user_id) if e["request_id"] not in before[user_id]]
        assert all(e["outcome"] == "settled" for e in new), new
        assert {e["request_id"] for e in new if e["model"] == "theta-3"} == image_ids[user_id]
        assert {e["request_id"] for e in new if e["model"] == "m-small"} == chat_ids[user_id]
        assert len(chat_ids[user_id]) == len(image_ids[user_id]) == 5
        assert len(new) == 10


def test_a_restarted_gateway_keeps_its_keys_and_a_fresh_one_forgets_them(tmp_path):
    state = {"GATEWAY_LOCAL_STATE_DIR": str(tmp_path), "GATEWAY_LOCAL_SAVE_SECONDS": "3600"}
    # Given a key issued while the gateway ran, and a plant stored with it
    first = LocalGateway(state)
    try:
        user = first.admin("create-user", "--username", "kept", "--quota-usd", "5")
        key = first.admin("issue-key", "--user", str(user["user_id"]), "--name", "kept")["key"]
        plant = httpx.post(f"{first.url}/plants", headers={"Authorization": f"Bearer {key}"},
                           json={"id": 77, "name": "kept fern"})
        assert plant.status_code == 200
    finally:
        assert first.stop() == 0
    # When it is started again, Then the key still works and the plant is still there
    second = LocalGateway(state)
    try:
        again = httpx.post(f"{second.url}/plants", headers={"Authorization": f"Bearer {key}"},
                           json={"id": 77, "name": "second fern"})
        assert again.status_code == 409  # the first plant was kept, and the key was accepted
    finally:
        assert second.stop() == 0
    # When it is started with FRESH, Then the key is unknown
    fresh = LocalGateway({**state, "GATEWAY_LOCAL_FRESH": "1"})
    try:
        forgotten = httpx.post(f"{fresh.url}/plants", headers={"Authorization": f"Bearer {key}"},
                               json={"id": 78, "name": "fern"})
        assert forgotten.status_code == 401
    finally:
        assert fresh.stop() == 0


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has exited; whoever adopted it reaps it


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def test_a_runner_killed_without_a_word_leaves_its_data_saved_by_the_emulator(tmp_path):
    state = {"GATEWAY_LOCAL_STATE_DIR": str(tmp_path), "GATEWAY_LOCAL_SAVE_SECONDS": "3600"}
    # Given a key issued and a plant stored, and no autosave due for an hour
    first = LocalGateway(state)
    user = first.admin("create-user", "--username", "survivor", "--quota-usd", "5")
    key = first.admin("issue-key", "--user", str(user["user_id"]), "--name", "survivor")["key"]
    assert httpx.post(f"{first.url}/plants", headers={"Authorization": f"Bearer {key}"},
                      json={"id": 91, "name": "hardy fern"}).status_code == 200
    emulators = _children(first.process.pid)
    assert emulators, "the AWS emulator runs in a process of its own"
    # When the runner is killed outright (no signal it could catch)
    first.process.kill()
    first.process.wait()
    # Then its emulator saves the data and exits by itself
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in emulators) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in emulators)
    assert "hardy fern" in (tmp_path / "emulator.jsonl").read_text()
    # And a runner started again takes the key and knows the plant
    second = LocalGateway(state)
    try:
        again = httpx.post(f"{second.url}/plants", headers={"Authorization": f"Bearer {key}"},
                           json={"id": 91, "name": "other fern"})
        assert again.status_code == 409
    finally:
        assert second.stop() == 0
