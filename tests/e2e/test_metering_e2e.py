"""Through `make run`'s gateway over real HTTP: request ids are the gateway's and named in every
answer, forged platform headers change nothing, and an unknown route is a 404 in its family's envelope."""

from __future__ import annotations

import json
import random

import pytest

from tests.e2e.conftest import DEMO_KEY

KEY = {"Authorization": f"Bearer {DEMO_KEY}"}


def _ledger_count(http) -> int:
    answer = http.get("/api/user/self", headers={"Authorization": "e2e-access-token", "X-Api-User": "1"})
    return int(answer.json()["data"]["request_count"])


def test_three_streams_with_one_forged_request_context_are_each_billed(http):
    # Given three streamed requests that all carry the same forged API Gateway request context
    forged = {**KEY, "x-amzn-request-context": json.dumps({"requestId": "forged-e2e"})}
    body = {"model": "m-small", "stream": True, "messages": [{"role": "user", "content": "count to three"}]}
    before = _ledger_count(http)
    ids = []
    for _ in range(3):
        with http.stream("POST", "/v1/chat/completions", headers=forged, json=body) as answer:
            assert answer.status_code == 200
            assert answer.read().endswith(b"data: [DONE]\n\n")
            ids.append(answer.headers["x-request-id"])
    # Then each is served under an id of the gateway's own, and each is counted (billed) once
    assert len(set(ids)) == 3 and "forged-e2e" not in ids
    assert _ledger_count(http) == before + 3


@pytest.mark.parametrize("method,path,envelope", [
    ("GET", "/v1/nothing-here", lambda b: b["error"]["code"] == "route_not_found"),
    ("POST", "/v1/messages/nothing", lambda b: b["type"] == "error" and b["error"]["type"] == "not_found_error"),
    ("GET", "/v1beta/nothing", lambda b: b["error"]["status"] == "NOT_FOUND"),
    ("GET", "/plants", lambda b: b["error"] == 404),
    ("DELETE", "/", lambda b: b["error"]["code"] == "route_not_found"),
])
def test_an_unknown_route_is_a_404_in_its_family_envelope_naming_the_request_id(http, method, path, envelope):
    answer = http.request(method, path, headers=KEY)
    assert answer.status_code == 404 and envelope(answer.json())
    assert answer.headers["x-request-id"]


def test_every_kind_of_answer_names_its_request_id(http):
    answers = [
        http.post("/plants", headers=KEY, json={"id": random.randrange(10**6, 10**9), "name": "fern"}),
        http.post("/v1/chat/completions", json={"model": "m-small"}),  # 401 from the text function
        http.get("/v1/dashboard/billing/usage", headers=KEY),
        http.post("/plants", headers=KEY, content=b"x" * (11 * 1024 * 1024)),  # the runner's own 413
    ]
    assert [a.status_code for a in answers[1:]] == [401, 200, 413] and answers[0].status_code < 300
    assert all(a.headers.get("x-request-id") for a in answers)
