"""Hostile bodies against the local gateway over HTTP: each gets a 4xx in its route's envelope,
moves no quota and stores nothing (issue 9, item 4)."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway.errors import Dialect, dialect_for_path
from tests.e2e.conftest import DEMO_KEY, account

pytestmark = pytest.mark.e2e

HEADERS = {"Authorization": f"Bearer {DEMO_KEY}", "Content-Type": "application/json"}

# A valid-looking body per route with one place (%s) for a hostile value.
ROUTES = {
    "chat": ("/v1/chat/completions", '{"model":"m-small","messages":[{"role":"user","content":%s}]}'),
    "messages": ("/v1/messages", '{"model":"m-small","max_tokens":10,"messages":[{"role":"user","content":%s}]}'),
    "responses": ("/v1/responses", '{"model":"m-small","input":%s}'),
    "content": ("/v1beta/models/m-small:generateContent", '{"contents":[{"role":"user","parts":[{"text":%s}]}]}'),
    "embeddings": ("/v1/embeddings", '{"model":"m-embed","input":%s}'),
    "embedContent": ("/v1beta/models/m-embed:embedContent", '{"content":{"parts":[{"text":%s}]}}'),
    "images": ("/v1/images/generations", '{"model":"iota-image-1","prompt":%s}'),
    "video": ("/v1/video/generations", '{"model":"zeta-video-1-0-pro-250528","content":[{"type":"text","text":%s}]}'),
    "videos": ("/v1/videos", '{"model":"epsilon-2","prompt":%s}'),
    "plants": ("/plants", '{"id":424242,"name":%s}'),
}
VALUES = {
    "a lone surrogate": '"\\ud800"',
    "NaN": "NaN",
    "Infinity beside the field": '"x", "extra": Infinity',
    "-Infinity deep inside": '"x", "extra": {"a": [1, -Infinity]}',
    "a number that overflows a double": '"x", "extra": 1e400',
    "a lone surrogate in a key": '"x", "\\udfff": 1',
}
DEEP = "[" * 100_000 + "]" * 100_000

CASES = [(f"{route}: {what}", path, template % value)
         for route, (path, template) in ROUTES.items() for what, value in VALUES.items()]
CASES += [(f"{route}: JSON nested 100000 deep", path, DEEP) for route, (path, _) in ROUTES.items()]
CASES += [
    ("chat: 3000-deep unknown field", "/v1/chat/completions",
     '{"model":"m-small","messages":[{"role":"user","content":"hi"}],"x":' + '{"a":' * 3000 + "1" + "}" * 3000 + "}"),
    ("chat: role is a list", "/v1/chat/completions",
     '{"model":"m-small","messages":[{"role":["user"],"content":"hi"}]}'),
    ("chat: role is an object", "/v1/chat/completions", '{"model":"m-small","messages":[{"role":{},"content":"hi"}]}'),
    ("messages: content part type is a list", "/v1/messages",
     '{"model":"m-small","max_tokens":5,"messages":[{"role":"user","content":[{"type":["text"],"text":"a"}]}]}'),
    ("plants: a 500 KB name", "/plants", json.dumps({"id": 424243, "name": "x" * 500_000})),
    ("plants: a 500 KB tag", "/plants", json.dumps({"id": 424244, "name": "fern", "tag": "t" * 500_000})),
    ("batchEmbedContents: requests[].model not a string", "/v1beta/models/m-embed:batchEmbedContents",
     '{"requests":[{"model":5,"content":{"parts":[{"text":"a"}]}}]}'),
    ("responses: input null", "/v1/responses", '{"model":"m-small","input":null}'),
    ("body not UTF-8", "/v1/chat/completions", b'{"model":"\xff\xfe"}'),
    ("images: body not UTF-8", "/v1/images/generations", b'{"model":"\xff\xfe"}'),
]


def _envelope_ok(path: str, status: int, body: dict) -> bool:
    dialect = dialect_for_path(path)
    if dialect is Dialect.MESSAGES:
        return body.get("type") == "error" and isinstance(body["error"].get("message"), str)
    if dialect is Dialect.CONTENT:
        return body["error"]["code"] == status and isinstance(body["error"]["message"], str)
    if dialect is Dialect.PLANTS:
        return body.get("error") == status and isinstance(body.get("message"), str)
    return isinstance(body["error"]["message"], str) and "type" in body["error"]


def _quota(http: httpx.Client) -> int:
    return account(http)["quota"]


@pytest.mark.parametrize(("what", "path", "body"), CASES, ids=[case[0] for case in CASES])
def test_a_hostile_body_is_a_4xx_in_the_route_envelope_and_moves_no_quota(http, what, path, body):
    # Given the demo account's quota
    before = _quota(http)
    # When the hostile body is posted
    answer = http.post(path, content=body, headers=HEADERS)
    # Then it is refused with a 4xx in the route's envelope, short, and nothing was charged
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])
    assert _envelope_ok(path, answer.status_code, answer.json()), answer.text[:300]
    assert len(answer.content) < 2000
    assert _quota(http) == before


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_an_absurd_output_limit_is_a_400_naming_the_field_not_a_quota_error(http, field):
    before = _quota(http)
    answer = http.post("/v1/chat/completions", headers=HEADERS, content=(
        '{"model":"m-small","' + field + '":1000000000000000000000000000000,'
        '"messages":[{"role":"user","content":"hi"}]}'))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == field
    assert _quota(http) == before


def test_an_absurd_output_limit_on_messages_and_content_is_a_400_naming_the_field(http):
    answer = http.post("/v1/messages", headers=HEADERS, content=(
        '{"model":"m-small","max_tokens":1000000000000000000000000000000,"messages":[{"role":"user","content":"hi"}]}'))
    assert answer.status_code == 400 and "max_tokens" in answer.json()["error"]["message"], answer.text
    answer = http.post("/v1beta/models/m-small:generateContent", headers=HEADERS, content=(
        '{"contents":[{"role":"user","parts":[{"text":"hi"}]}],'
        '"generationConfig":{"maxOutputTokens":1000000000000000000000000000000}}'))
    assert answer.status_code == 400 and "maxOutputTokens" in answer.json()["error"]["message"], answer.text


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/chat/completions", {"model": "m" * 200_000, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/messages", {"model": "m" * 200_000, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/embeddings", {"model": "m" * 200_000, "input": "hi"}),
    ("/v1/images/generations", {"model": "m" * 200_000, "prompt": "hi"}),
    ("/v1/video/generations", {"model": "m" * 200_000, "content": [{"type": "text", "text": "hi"}]}),
    ("/v1/videos", {"model": "m" * 200_000, "prompt": "hi"}),
])
def test_a_200_kb_model_name_is_refused_without_being_echoed_whole(http, path, body):
    answer = http.post(path, headers=HEADERS, json=body)
    assert 400 <= answer.status_code < 500
    assert len(answer.content) < 2000, answer.content[:200]


def test_a_rejected_plant_stores_nothing(http):
    # Given a plant refused for its 500 KB name
    refused = http.post("/plants", headers=HEADERS, json={"id": 515151, "name": "x" * 500_000})
    assert refused.status_code == 400 and "name" in refused.json()["message"]
    # When the same id is then created properly, it is new (no 409): nothing was stored before
    created = http.post("/plants", headers=HEADERS, json={"id": 515151, "name": "fern"})
    assert created.status_code == 200, created.text


@pytest.mark.parametrize("authorization,status", [
    (b"Bearer \xff\xfe\xfd", 401),  # not UTF-8
    (b"Bearer " + b"k" * 60_000, 431),  # huge: more header bytes than API Gateway takes
    (b"Basic \x80\x81 nonsense", 401),
])
def test_a_forged_authorization_header_is_a_401(gateway_url, authorization, status):
    for path in ("/v1/chat/completions", "/plants", "/v1/images/generations"):
        with httpx.Client(base_url=gateway_url, timeout=30) as client:
            answer = client.post(path, content=b"{}", headers=[(b"authorization", authorization),
                                                                (b"content-type", b"application/json")])
        assert answer.status_code == status, (path, answer.status_code, answer.text[:200])
        assert answer.json()  # in the route's envelope


@pytest.mark.parametrize("api_user", ["9" * 5000, "\u00b2", "1" * 20, "-1", ""])
def test_an_x_api_user_that_is_no_int64_is_a_401_in_the_account_envelope(http, api_user):
    answer = http.get("/api/user/self", headers=[(b"Authorization", b"e2e-access-token"),
                                                 (b"X-Api-User", api_user.encode("utf-8"))])
    assert answer.status_code == 401, answer.text[:200]
    assert answer.json()["success"] is False


def test_a_thinking_budget_near_the_output_limit_is_not_pushed_past_it_by_the_default_max_tokens(http):
    answer = http.post("/v1/messages", headers=HEADERS, json={
        "model": "m-small", "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "enabled", "budget_tokens": 999_999}})
    # The gateway's own default stays within the limit, so the upstream is not asked for more
    assert answer.status_code == 200, answer.text[:300]
