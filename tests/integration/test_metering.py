"""Metering that a client cannot cheat, through the text layer and the text function's ASGI app:
the hold covers every choice asked for, the request id is the gateway's, every answer names it,
and a bill is written before the client has the end of its answer."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import anyio
import httpx
import pytest

from gateway.admission import balances
from gateway.api import text
from gateway.errors import InsufficientQuota
from gateway.prices import SHIPPED, token_cost, usd_to_units
from gateway.sse import SSEParser
from gateway.store.usage import UsageRepository
from gateway_local.server import simulators_app
from tests.conftest import Accounts, load_function
from tests.integration.money_support import assert_nothing_held
from tests.integration.test_text import ENTRY, ROUTES, body_for, channel, inbound, run

LARGE = SHIPPED["m-large"]


def _user_with(accounts: Accounts, quota: int, *, key_quota: int | None = None, user_id: int = 20) -> str:
    accounts.users.create_user(username=f"u{user_id}", quota=quota, user_id=user_id)
    return accounts.keys.create_key(user_id, name="k", quota=key_quota)[0]


def test_n_128_on_a_nearly_empty_account_is_refused_and_the_quota_stays_above_zero(store, accounts, catalog):
    # Given a user with 10000 units (2 cents)
    catalog([channel("chat")])
    key = _user_with(accounts, 10_000)
    body = {"model": "m-large", "n": 128, "max_tokens": 60, "messages": [{"role": "user", "content": "hi"}]}
    # When it asks for 128 choices of up to 60 tokens each
    with pytest.raises(InsufficientQuota) as refused:
        run("chat", text.Inbound(path=ROUTES["chat"], headers={"authorization": f"Bearer {key}"}, query={},
                                 body=json.dumps(body).encode()))
    # Then the hold (128 x 60 output tokens) does not fit: refused before any upstream call
    assert refused.value.status == 403
    assert int(balances.get_user(20)["quota"]) == 10_000
    assert accounts.usage.ledger(20) == []
    assert_nothing_held(accounts, 10_000, user_id=20)


def test_candidate_count_100_on_a_limited_key_is_refused_and_the_key_keeps_its_quota(store, accounts, catalog):
    catalog([channel("content")])
    key = _user_with(accounts, 500_000_000, key_quota=20_000)
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"candidateCount": 100, "maxOutputTokens": 60}}
    request = text.Inbound(path="/v1beta/models/m-large:generateContent", headers={"x-goog-api-key": key}, query={},
                           body=json.dumps(body).encode(), proxy="m-large:generateContent")
    with pytest.raises(InsufficientQuota):
        run("content", request)
    key_hash = accounts.keys.key_hash_for_id(balances.list_keys(20)[0]["key_id"])
    assert int(balances.get_key(key_hash)["remain_quota"]) == 20_000


@pytest.mark.parametrize("dialect,body", [
    ("chat", {"model": "m-large", "n": 3, "max_tokens": 50, "messages": [{"role": "user", "content": "one two"}]}),
    ("content", {"contents": [{"role": "user", "parts": [{"text": "one two"}]}],
                 "generationConfig": {"candidateCount": 3, "maxOutputTokens": 50}}),
])
def test_the_hold_covers_every_choice_and_the_settlement_stays_within_it(store, accounts, catalog, dialect, body):
    catalog([channel(dialect)])
    key = _user_with(accounts, 500_000_000)
    proxy = "m-large:generateContent" if dialect == "content" else None
    request = text.Inbound(path=f"/v1beta/models/{proxy}" if proxy else ROUTES[dialect],
                           headers={"authorization": f"Bearer {key}"}, query={}, body=json.dumps(body).encode(),
                           proxy=proxy)
    status, _, data = run(dialect, request)
    assert status == 200
    (entry,) = accounts.usage.ledger(20)
    call = text.parse_call(text.GENERATE, dialect, request)
    assert call.choices == 3
    assert int(entry["reserved_units"]) == token_cost(LARGE, input_tokens=call.input_tokens, output_tokens=150)
    assert 0 < int(entry["units"]) <= int(entry["reserved_units"])


# --- the bill is there when the answer is ---------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("dialect", ["chat", "messages", "responses", "content"])
def test_the_ledger_holds_the_bill_when_the_client_receives_the_end_of_its_answer(demo, catalog, dialect, stream):
    # Given a request of any dialect, streamed or not
    catalog([channel("chat" if dialect == "responses" else dialect)])
    request = inbound(dialect, demo["key"], stream=stream)
    seen_at_end: list[list[dict[str, Any]]] = []

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            answer = await ENTRY[dialect](request, http=http)
            chunks: list[bytes] = []

            async def send(chunk: bytes) -> None:
                chunks.append(chunk)
                # What a client that reads its bill the moment this chunk arrives would see
                seen_at_end.append([e for e in UsageRepository().ledger(1)
                                    if e["request_id"] == request.request_id])

            await answer.send_to(send)

    anyio.run(scenario)
    # Then by the time the last chunk (the body, or the stream's closing event) is sent, the
    # settlement is in the ledger
    assert seen_at_end and len(seen_at_end[-1]) == 1
    assert seen_at_end[-1][0]["outcome"] == "settled" and int(seen_at_end[-1][0]["units"]) > 0


# --- the ASGI app: the gateway's request id, named in every answer ------------------------------------

def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "server": ("gw", 80), "client": ("127.0.0.1", 1), "headers": headers}


def _serve_app(app, monkeypatch, requests: list[tuple[str, dict[str, str], bytes]]) -> list[httpx.Response]:
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()), base_url="http://sim") as sim:
            monkeypatch.setattr(text, "http_client", lambda: sim)
            # A 500 is answered, then re-raised to the server, as uvicorn would log it.
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                answers = []
                for path, headers, body in requests:
                    answers.append(await client.post(path, headers=headers, content=body))
                return answers

    return anyio.run(scenario)


def test_three_requests_with_one_forged_request_context_are_each_billed_under_the_gateways_id(
        demo, catalog, monkeypatch):
    catalog([channel("chat")])
    app = load_function("text").app
    forged = json.dumps({"requestId": "forged-id", "stage": "v1"})
    headers = {"authorization": f"Bearer {demo['key']}", "x-amzn-request-context": forged,
               "content-type": "application/json"}
    body = json.dumps(body_for("chat", stream=True)).encode()
    answers = _serve_app(app, monkeypatch, [("/v1/chat/completions", headers, body)] * 3)
    # Then each was served and billed once, under three ids of the gateway's, none the forged one
    assert [a.status_code for a in answers] == [200, 200, 200]
    ids = [a.headers["x-request-id"] for a in answers]
    assert len(set(ids)) == 3 and "forged-id" not in ids
    entries = UsageRepository().ledger(1)
    assert sorted(e["request_id"] for e in entries) == sorted(ids)
    assert all(e["outcome"] == "settled" and int(e["units"]) > 0 for e in entries)


def test_every_answer_of_the_text_app_names_its_request_id_and_a_500_body_says_it(demo, catalog, monkeypatch):
    catalog([channel("chat")])
    app = load_function("text").app

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    key = {"authorization": f"Bearer {demo['key']}", "content-type": "application/json"}
    ok, bad = _serve_app(app, monkeypatch, [("/v1/chat/completions", key, json.dumps(body_for("chat")).encode()),
                                            ("/v1/chat/completions", key, b"{}")])
    monkeypatch.setattr(text, "parse_call", broken)
    (failed,) = _serve_app(app, monkeypatch, [("/v1/messages", key, json.dumps(body_for("messages")).encode())])
    assert ok.status_code == 200 and len(ok.headers["x-request-id"]) == 32
    assert bad.status_code == 400 and bad.headers["x-request-id"]
    assert failed.status_code == 500 and failed.headers["x-request-id"] in failed.json()["error"]["message"]
    assert failed.json()["type"] == "error"  # the messages envelope


def test_another_users_request_with_the_id_of_an_in_flight_request_is_not_billed_to_the_first(
        demo, catalog, accounts, monkeypatch):
    # Given user A's request in flight under the gateway's id
    from gateway.admission import billing
    from gateway.auth import authenticate

    catalog([channel("chat")])
    a = authenticate({"authorization": f"Bearer {demo['key']}"})
    billing.reserve(a, 100, model="m-small", route="test", reservation_id="a-request",
                    hold_seconds=billing.REQUEST_HOLD_SECONDS)
    key_b = _user_with(accounts, 1_000_000, user_id=21)
    before_a = int(balances.get_user(1)["quota"])
    # When user B's request to the text function carries that id in a forged request context
    headers = {"authorization": f"Bearer {key_b}", "content-type": "application/json",
               "x-amzn-request-context": json.dumps({"requestId": "a-request"})}
    (answer,) = _serve_app(load_function("text").app, monkeypatch,
                           [("/v1/chat/completions", headers, json.dumps(body_for("chat")).encode())])
    # Then B is served and billed under an id of its own, and A's account does not move
    assert answer.status_code == 200
    assert int(balances.get_user(1)["quota"]) == before_a
    assert billing.get_reservation("a-request").status == billing.RESERVED
    assert [e["request_id"] for e in accounts.usage.ledger(21)] == [answer.headers["x-request-id"]]


# --- cache writes, priced at the upstream's cache-write rates ----------------------------------------

def _cached_prompt(ttl: str | None) -> dict[str, Any]:
    """A messages request whose long system prompt is marked for the prompt cache."""
    mark = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return {"model": "m-small", "max_tokens": 50, "stream": True,
            "system": [{"type": "text", "text": "You are a careful assistant. " * 40 + ttl_word(ttl),
                        "cache_control": mark}],
            "messages": [{"role": "user", "content": "Hello there"}]}


def ttl_word(ttl: str | None) -> str:
    return f" (cache kept {ttl or '5m'}, test {uuid.uuid4().hex})"  # a prefix never seen before: a write


@pytest.mark.parametrize("ttl,rate", [(None, "cache_write_per_million"), ("1h", "cache_write_1h_per_million")])
def test_a_messages_stream_reporting_cache_writes_is_billed_at_the_cache_write_rate(demo, catalog, ttl, rate):
    # Given a messages channel that writes the marked prefix to its cache (5 minutes, or an hour)
    catalog([channel("messages")])
    request = inbound("messages", demo["key"], body=_cached_prompt(ttl))
    status, _, data = run("messages", request)
    assert status == 200
    # When the stream reports cache_creation_input_tokens
    start = next(d for e, d in _events(data) if e == "message_start")["message"]["usage"]
    written = start["cache_creation_input_tokens"]
    assert written > 300 and start["cache_creation"]["ephemeral_1h_input_tokens"] == (written if ttl else 0)
    end = next(d for e, d in reversed(_events(data)) if e == "message_delta")["usage"]
    # Then the bill prices the written tokens at that rate, the rest of the prompt at the input rate
    small = SHIPPED["m-small"]
    usd = (Decimal(start["input_tokens"]) * small.input_per_million + Decimal(written) * getattr(small, rate)
           + Decimal(end["output_tokens"]) * small.output_per_million) / 1_000_000
    entry = next(e for e in UsageRepository().ledger(1) if e["request_id"] == request.request_id)
    assert int(entry["units"]) == usd_to_units(usd)
    assert int(entry["detail"]["cache_write_tokens"]) == written
    # and the write rate is what the upstream sells: dearer than the plain input it was billed at before
    assert getattr(small, rate) == small.input_per_million * (Decimal("2") if ttl else Decimal("1.25"))


def _events(data: bytes) -> list[tuple[str | None, Any]]:
    return [(e.event, json.loads(e.data)) for e in SSEParser().feed(data) if not e.is_done]
