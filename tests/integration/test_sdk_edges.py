"""The edges SDK users and operators touch first, against the emulator and the simulators: the
model list in three shapes, count_tokens, the video list, JSON output and stop sequences through
a channel of another dialect, /health, and a bad channels document failing the start."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio
import httpx
import pytest

from gateway.api import count_tokens, text, video
from gateway.auth import authenticate
from gateway.errors import InvalidRequest, NotFound
from gateway.routing.channel import ChannelsConfigError
from gateway.routing.channels import check_at_start
from gateway.store.tasks import Task, TasksRepository
from gateway.store.usage import UsageRepository
from gateway_local.server import simulators_app
from tests.conftest import ROOT, use_environment
from tests.integration.test_text import channel, inbound, quota, run

KEY = "x-api-key"


def get(app, path: str, headers: dict[str, str], **params: str) -> httpx.Response:
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
            return await client.get(path, headers=headers, params=params)

    return anyio.run(scenario)


# ---- models ----

def test_every_sdk_finds_image_and_video_models_in_its_own_shape(demo, catalog, app):
    catalog([channel("chat"), channel("epsilon")])
    key = {KEY: demo["key"]}
    openai_list = get(app, "/v1/models", key).json()
    owners = {m["id"]: m["owned_by"] for m in openai_list["data"]}
    assert owners["iota-image-1"] == "iota" and owners["epsilon-2"] == "epsilon" and owners["m-small"] == "gateway"
    assert "zeta-video-1-0-pro-250528" not in owners  # no zeta channel
    anthropic_list = get(app, "/v1/models", {**key, "anthropic-version": "2023-06-01"}, limit="3").json()
    assert set(anthropic_list) == {"data", "has_more", "first_id", "last_id"} and anthropic_list["has_more"]
    assert anthropic_list["data"][0]["type"] == "model" and len(anthropic_list["data"]) == 3
    google_list = get(app, "/v1beta/models", {"x-goog-api-key": demo["key"]}).json()
    assert "models/iota-image-1" in [m["name"] for m in google_list["models"]]


def test_one_model_is_found_or_a_404_in_the_asking_sdks_envelope(demo, catalog, app, accounts):
    catalog([channel("chat")])
    limited, _ = accounts.keys.create_key(1, name="small", allowed_models=["m-small"])
    assert get(app, "/v1/models/m-small", {KEY: limited}).json()["id"] == "m-small"
    assert get(app, "/v1beta/models/m-small", {KEY: limited}).json()["name"] == "models/m-small"
    forbidden = get(app, "/v1/models/m-large", {KEY: limited})
    assert forbidden.status_code == 404 and forbidden.json()["error"]["code"] == "model_not_found"
    anthropic = get(app, "/v1/models/nope", {KEY: limited, "anthropic-version": "2023-06-01"})
    assert anthropic.status_code == 404 and anthropic.json()["type"] == "error"
    google = get(app, "/v1beta/models/nope", {KEY: limited})
    assert google.status_code == 404 and google.json()["error"]["status"] == "NOT_FOUND"
    assert get(app, "/v1/models", {}).status_code == 401


def test_health_needs_no_key_and_calls_nothing(app, monkeypatch):
    monkeypatch.setattr(text, "http_client", lambda: pytest.fail("no upstream call"))
    answer = get(app, "/health", {})
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


# ---- count_tokens ----

def count(key: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, str], dict[str, Any], str]:
    request_id = uuid.uuid4().hex
    request = text.Inbound(path="/v1/messages/count_tokens", headers={KEY: key}, query={},
                           body=json.dumps(body or {"model": "m-small", "messages": [
                               {"role": "user", "content": "Hello there, how are you"}]}).encode(),
                           request_id=request_id)

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            answer = await count_tokens.count_tokens(request, http=http)
            chunks: list[bytes] = []

            async def send(chunk: bytes) -> None:
                chunks.append(chunk)

            await answer.send_to(send)
            return answer.status, answer.headers, json.loads(b"".join(chunks))

    status, headers, body = anyio.run(scenario)
    return status, headers, body, request_id


@pytest.mark.parametrize("protocol, source", [("messages", "upstream"), ("content", "upstream"), ("chat", "estimate")])
def test_count_tokens_is_free_through_any_text_channel_and_says_where_the_count_came_from(
        demo, catalog, protocol, source):
    catalog([channel(protocol)])
    before = quota()
    status, headers, body, request_id = count(demo["key"])
    assert status == 200 and body["input_tokens"] > 0
    assert headers["x-gateway-token-count"] == source
    assert quota() == before
    entry = next(e for e in UsageRepository().ledger(1) if e["request_id"] == request_id)
    assert entry["units"] == 0 and entry["route"] == "/v1/messages/count_tokens"
    assert entry["detail"]["count_source"] == source and entry["detail"]["counted_tokens"] == body["input_tokens"]


def test_count_tokens_moves_on_from_a_failing_channel_and_refuses_bad_input(demo, catalog):
    catalog([channel("messages", fault="503", priority=1), channel("chat", priority=0)])
    _, headers, _, _ = count(demo["key"])
    assert headers["x-gateway-token-count"] == "estimate"
    with pytest.raises(InvalidRequest) as caught:
        count(demo["key"], {"model": "m-small", "messages": "nope"})
    assert caught.value.param.startswith("messages")


# ---- JSON output and stop sequences through another dialect's channel ----

def test_a_json_schema_chat_request_to_a_messages_channel_comes_back_as_json(demo, catalog):
    catalog([channel("messages")])
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    body = {"model": "m-small", "messages": [{"role": "user", "content": "Hello there"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "echo", "schema": schema}}}
    for stream in (False, True):
        status, _, data = run("chat", inbound("chat", demo["key"], body={**body, "stream": stream}))
        if stream:
            chunks = [json.loads(line[6:]) for line in data.decode().splitlines()
                      if line.startswith("data: {")]
            content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
        else:
            content = json.loads(data)["choices"][0]["message"]["content"]
        assert status == 200 and json.loads(content) == {"text": "Hello there"}


def test_json_output_with_tools_to_a_messages_channel_is_a_400_and_costs_nothing(demo, catalog):
    catalog([channel("messages")])
    before = quota()
    body = {"model": "m-small", "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_object"},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    with pytest.raises(InvalidRequest) as caught:
        run("chat", inbound("chat", demo["key"], body=body))
    assert caught.value.param == "response_format" and quota() == before


def test_a_messages_stop_sequence_served_by_a_chat_channel_is_reported(demo, catalog):
    catalog([channel("chat")])
    body = {"model": "m-small", "max_tokens": 100, "stop_sequences": ["there"],
            "messages": [{"role": "user", "content": "Hello there friend"}]}
    _, _, data = run("messages", inbound("messages", demo["key"], body=body))
    answer = json.loads(data)
    assert (answer["stop_reason"], answer["stop_sequence"]) == ("stop_sequence", "there")
    assert answer["content"][0]["text"] == "You said: Hello "
    _, _, streamed = run("messages", inbound("messages", demo["key"], body={**body, "stream": True}, stream=True))
    assert '"stop_reason":"stop_sequence","stop_sequence":"there"' in streamed.decode().replace(" ", "")


# ---- GET /v1/videos ----

def put_video(owner: int, created_at: int, family: str = "epsilon") -> str:
    task_id = f"video_{uuid.uuid4().hex}"
    TasksRepository().put(Task(task_id=task_id, owner_id=str(owner), family=family, model="epsilon-2",
                               channel="simulator-epsilon", upstream_task_id=f"up_{task_id}", reservation={},
                               status="queued", created_at=created_at, updated_at=created_at,
                               public={"seconds": "4", "size": "720x1280"}))
    return task_id


def test_the_video_list_is_the_callers_own_newest_first_in_pages(demo, accounts):
    principal = authenticate({KEY: demo["key"]})
    now = int(time.time())
    mine = [put_video(1, now - 10 + i // 2) for i in range(7)]  # pairs share a second
    put_video(1, now, family="delta")  # not a video object
    put_video(2, now)  # somebody else's
    expected = sorted(mine, key=lambda t: (now - 10 + mine.index(t) // 2, t), reverse=True)
    seen, after = [], None
    while True:
        page = video.list_videos(principal, {"limit": "3", **({"after": after} if after else {})})
        seen += [v["id"] for v in page["data"]]
        assert all(v["object"] == "video" for v in page["data"])
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen == expected
    oldest_first = video.list_videos(principal, {"order": "asc", "limit": "100"})
    assert [v["id"] for v in oldest_first["data"]] == expected[::-1] and oldest_first["has_more"] is False


def test_the_video_list_refuses_bad_paging_and_foreign_cursors(demo):
    principal = authenticate({KEY: demo["key"]})
    with pytest.raises(InvalidRequest):
        video.list_videos(principal, {"limit": "101"})
    with pytest.raises(InvalidRequest):
        video.list_videos(principal, {"order": "sideways"})
    with pytest.raises(NotFound):
        video.list_videos(principal, {"after": put_video(2, int(time.time()))})
    assert video.list_videos(principal, {}) == {"object": "list", "data": [], "first_id": None, "last_id": None,
                                                "has_more": False}


# ---- a bad channels document ----

BAD_DOCUMENT = "channels:\n  - name: up\n    protocol: smoke-signals\n    base_url: http://up\n    models: ['*']\n"


def test_a_bad_channels_document_fails_the_cold_start_naming_the_file_and_field(tmp_path):
    path = tmp_path / "channels.yaml"
    path.write_text(BAD_DOCUMENT)
    saved = use_environment(GATEWAY_CHANNELS_FILE=str(path))
    try:
        with pytest.raises(ChannelsConfigError) as caught:
            check_at_start()
        assert str(path) in str(caught.value) and "channels[0].protocol" in str(caught.value)
    finally:
        use_environment(**saved)


def test_a_bad_channels_document_stops_the_local_gateway_at_once(tmp_path):
    path = tmp_path / "channels.yaml"
    path.write_text(BAD_DOCUMENT)
    env = {"PATH": "/usr/bin:/bin", "GATEWAY_CHANNELS_FILE": str(path), "PORT": "0", "GATEWAY_SIMULATOR_PORT": "0",
           "GATEWAY_LOCAL_ENDPOINT_FILE": str(tmp_path / "gateway.json"),
           "PYTHONPATH": f"{ROOT / 'layers' / 'gateway'}:{ROOT / 'local'}"}
    done = subprocess.run([sys.executable, "-m", "gateway_local"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert f"{path}: channels[0].protocol" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "gateway.json").exists()
