"""Text generation against the emulator: the layer (and the ASGI app) with the real billing, and
the simulated upstreams behind an `httpx.ASGITransport` (no sockets).

Every served request leaves one ledger entry whose units are `token_cost` of the usage it was
settled to; a failure before the first byte refunds everything; a cut stream is billed for what
was relayed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import httpx
import pytest

from gateway.api import text
from gateway.errors import GatewayError, InvalidRequest, NotFound, RateLimited, UpstreamFailed, UpstreamTimeout
from gateway.formats import usage_of_response
from gateway.prices import SHIPPED, token_cost
from gateway.sse import SSEParser
from gateway.store.usage import UsageRepository
from gateway.upstreams.base import Timeouts
from gateway_local.server import simulators_app
from tests.integration.money_support import open_reservations

PRICE = SHIPPED["m-small"]
ROUTES = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses",
          "content": "/v1beta/models/m-small:generateContent"}


def body_for(dialect: str, prompt: str = "Hello there", stream: bool = False) -> dict[str, Any]:
    if dialect == "chat":
        return {"model": "m-small", "messages": [{"role": "user", "content": prompt}], "stream": stream}
    if dialect == "messages":
        return {"model": "m-small", "max_tokens": 200, "messages": [{"role": "user", "content": prompt}],
                "stream": stream}
    if dialect == "responses":
        return {"model": "m-small", "input": prompt, "stream": stream}
    return {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}


def inbound(dialect: str, key: str, prompt: str = "Hello there", *, stream: bool = False,
            body: dict[str, Any] | None = None) -> text.Inbound:
    path, proxy, query = ROUTES[dialect], None, {}
    if dialect == "content":
        proxy = "m-small:streamGenerateContent" if stream else "m-small:generateContent"
        path, query = f"/v1beta/models/{proxy}", {"alt": "sse"} if stream else {}
    return text.Inbound(path=path, headers={"authorization": f"Bearer {key}"}, query=query,
                        body=json.dumps(body or body_for(dialect, prompt, stream)).encode(),
                        request_id=uuid.uuid4().hex, proxy=proxy)


ENTRY = {"chat": text.chat_completions, "messages": text.messages, "responses": text.responses,
         "content": text.content}


def channel(protocol: str, *, name: str | None = None, fault: str | None = None, priority: int = 0,
            models: list[str] | None = None) -> dict[str, Any]:
    base = f"http://sim/{protocol}" + (f"/fault/{fault}" if fault else "")
    return {"name": name or f"{protocol}-{fault or 'ok'}-{priority}", "protocol": protocol, "base_url": base,
            "api_key": "sk-upstream", "models": models or ["*"], "priority": priority}


def run(dialect: str, request: text.Inbound, **options: Any) -> tuple[int, dict[str, str], bytes]:
    """Serves one request the way the app does; the whole body, or the GatewayError raised."""
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            answer = await ENTRY[dialect](request, http=http, **options)
            chunks: list[bytes] = []

            async def send(chunk: bytes) -> None:
                chunks.append(chunk)

            await answer.send_to(send)
            return answer.status, answer.headers, b"".join(chunks)

    return anyio.run(scenario)


def ledger(request_id: str) -> dict[str, Any]:
    entries = [e for e in UsageRepository().ledger(1) if e["request_id"] == request_id]
    assert len(entries) == 1, entries
    return entries[0]


DEMO_QUOTA = 500_000_000  # the demo fixture's


def quota() -> int:
    from gateway.admission import balances

    return int(balances.get_user(1)["quota"])


def events_of(data: bytes) -> list[tuple[str | None, Any]]:
    return [(e.event, e.data if e.is_done else json.loads(e.data)) for e in SSEParser().feed(data)]


def units_of(entry: dict[str, Any]) -> int:
    detail = entry["detail"]
    return token_cost(PRICE, input_tokens=int(detail["input_tokens"]), output_tokens=int(detail["output_tokens"]),
                      cached_input_tokens=int(detail["cached_input_tokens"]),
                      cache_write_tokens=int(detail.get("cache_write_tokens", 0)),
                      cache_write_1h_tokens=int(detail.get("cache_write_1h_tokens", 0)))


# --- every dialect through every protocol ----------------------------------------------------------

@pytest.mark.parametrize("protocol", ["chat", "messages", "content"])
@pytest.mark.parametrize("dialect", ["chat", "messages", "responses", "content"])
def test_each_dialect_through_each_protocol_costs_its_usage_streamed_or_not(demo, catalog, dialect, protocol):
    catalog([channel(protocol)])
    plain = inbound(dialect, demo["key"])
    status, headers, data = run(dialect, plain)
    answer = json.loads(data)
    assert status == 200 and headers["content-type"] == "application/json"
    usage = usage_of_response(answer, dialect)
    entry = ledger(plain.request_id)
    assert entry["outcome"] == "settled" and entry["detail"]["channel"] == f"{protocol}-ok-0"
    assert int(entry["units"]) == token_cost(PRICE, input_tokens=usage.input_tokens,
                                             output_tokens=usage.output_tokens) > 0

    streamed = inbound(dialect, demo["key"], stream=True)
    status, headers, data = run(dialect, streamed)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert len(events_of(data)) > 5
    stream_entry = ledger(streamed.request_id)
    assert stream_entry["detail"]["outcome"] == "completed"
    assert int(stream_entry["units"]) == int(entry["units"]) == units_of(stream_entry)


def test_a_chat_stream_asks_the_upstream_for_usage_but_relays_it_only_when_asked(demo, catalog):
    catalog([channel("chat")])
    _, _, data = run("chat", inbound("chat", demo["key"], stream=True))
    events = events_of(data)
    assert events[-1] == (None, "[DONE]") and all("usage" not in d for _, d in events[:-1])
    asked = body_for("chat", stream=True) | {"stream_options": {"include_usage": True}}
    _, _, data = run("chat", inbound("chat", demo["key"], body=asked))
    last_chunk = events_of(data)[-2][1]
    assert last_chunk["choices"] == [] and last_chunk["usage"]["completion_tokens"] > 0


def test_model_map_sends_the_upstream_name_and_shows_the_client_its_own(demo, catalog):
    built = catalog([channel("chat") | {"model_map": {"m-small": "upstream-small"}}])
    assert built.channels[0].upstream_model("m-small") == "upstream-small"
    _, _, data = run("chat", inbound("chat", demo["key"]))
    assert json.loads(data)["model"] == "m-small"


# --- channels, failover, refunds ---------------------------------------------------------------------

def test_a_failing_channel_is_passed_over_for_the_next_before_the_first_byte(demo, catalog):
    catalog([channel("chat", fault="500", priority=2), channel("chat", fault="429", priority=1),
             channel("messages", priority=0)])
    for stream in (False, True):
        request = inbound("chat", demo["key"], stream=stream)
        status, _, data = run("chat", request)
        assert status == 200 and b"You" in data
        assert ledger(request.request_id)["detail"]["channel"] == "messages-ok-0"


def test_every_channel_rate_limited_is_a_429_with_retry_after_and_a_full_refund(demo, catalog):
    catalog([channel("chat", fault="429"), channel("content", fault="429")])
    before = quota()
    request = inbound("messages", demo["key"], stream=True)
    with pytest.raises(RateLimited) as caught:
        run("messages", request)
    assert caught.value.headers == {"Retry-After": "1"}
    entry = ledger(request.request_id)
    assert entry["outcome"] == "refunded" and int(entry["units"]) == 0 and quota() == before


def test_an_upstream_refusal_is_relayed_and_not_retried(demo, catalog):
    catalog([channel("chat", fault="400", priority=1), channel("chat", priority=0)])
    request = inbound("chat", demo["key"])
    with pytest.raises(InvalidRequest) as caught:
        run("chat", request)
    assert caught.value.status == 400 and "upstream answered 400" in caught.value.message
    assert ledger(request.request_id)["outcome"] == "refunded"


def test_a_5xx_on_the_only_channel_is_a_502_and_refunded(demo, catalog):
    catalog([channel("content", fault="503")])
    before = quota()
    request = inbound("content", demo["key"], stream=True)
    with pytest.raises(UpstreamFailed):
        run("content", request)
    assert quota() == before and ledger(request.request_id)["outcome"] == "refunded"
    assert open_reservations(1) == []


@pytest.mark.parametrize("dialect", ["chat", "messages", "content"])
def test_a_plain_answer_not_started_within_the_first_byte_time_is_a_504_and_refunded(demo, catalog, monkeypatch,
                                                                                       dialect):
    # Given a channel whose upstream answers only after 2 s, and a first-byte time of 0.3 s
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "2")
    catalog([channel("chat", fault="slow")])
    before = quota()
    request = inbound(dialect, demo["key"])
    # When a non-streamed request is served, then it is a 504 and the hold is refunded
    with pytest.raises(UpstreamTimeout):
        run(dialect, request, timeouts=Timeouts(first_byte=0.3))
    assert quota() == before and ledger(request.request_id)["outcome"] == "refunded"
    assert open_reservations(1) == []


@pytest.mark.parametrize("dialect", ["chat", "messages", "content"])
def test_a_plain_answer_that_fails_after_its_keep_alive_began_ends_in_the_dialects_envelope_refunded(
        demo, catalog, monkeypatch, dialect):
    # Given an upstream that answers after 2 s, a keep-alive after 0.2 s, a first-byte time of 1 s
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "2")
    monkeypatch.setenv("GATEWAY_BUFFERED_KEEPALIVE_SECONDS", "0.2")
    from gateway.settings import reload_settings
    reload_settings()
    catalog([channel("chat", fault="slow")])
    before = quota()
    request = inbound(dialect, demo["key"])
    try:
        status, headers, data = run(dialect, request, timeouts=Timeouts(first_byte=1.0))
    finally:
        monkeypatch.delenv("GATEWAY_BUFFERED_KEEPALIVE_SECONDS")
        reload_settings()
    # Then the answer was committed (200, JSON) and kept alive with spaces, and its body is the
    # dialect's error envelope, which the SDK's JSON parser reads past the spaces
    assert status == 200 and headers["content-type"] == "application/json" and data.startswith(b"  ")
    error = json.loads(data)
    assert {"chat": lambda e: e["error"]["code"] == "upstream_timeout", "messages": lambda e: e["type"] == "error",
            "content": lambda e: e["error"]["code"] == 504}[dialect](error), error
    # And nothing was billed
    assert quota() == before and ledger(request.request_id)["outcome"] == "refunded"
    assert open_reservations(1) == []


def test_a_model_no_channel_serves_is_a_404_naming_it_and_nothing_is_reserved(demo, catalog):
    catalog([channel("chat", models=["m-large"])])
    request = inbound("chat", demo["key"])
    with pytest.raises(NotFound) as caught:
        run("chat", request)
    assert "m-small" in caught.value.message
    assert not UsageRepository().ledger(1)
    assert open_reservations(1) == [] and quota() == DEMO_QUOTA


def test_a_model_with_no_price_is_refused_never_served_free(demo, catalog):
    catalog([channel("chat")])
    request = inbound("chat", demo["key"], body=body_for("chat") | {"model": "m-unpriced"})
    with pytest.raises(InvalidRequest) as caught:
        run("chat", request)
    assert caught.value.code == "model_not_priced" and not UsageRepository().ledger(1)
    assert open_reservations(1) == [] and quota() == DEMO_QUOTA


def test_prices_of_the_channels_document_override_the_shipped_table(demo, catalog):
    catalog([channel("chat")], prices={"m-small": {"input_per_million": 1000, "output_per_million": 2000}})
    request = inbound("chat", demo["key"])
    _, _, data = run("chat", request)
    usage = json.loads(data)["usage"]
    expected = (usage["prompt_tokens"] * 1000 + usage["completion_tokens"] * 2000) * 500_000 // 1_000_000
    assert int(ledger(request.request_id)["units"]) == expected


def test_a_key_outside_its_model_allowlist_gets_a_404(demo, catalog, accounts):
    catalog([channel("chat")])
    key, _ = accounts.keys.create_key(1, name="large only", allowed_models=["m-large"])
    with pytest.raises(NotFound):
        run("chat", inbound("chat", key))


def test_a_key_without_enough_quota_is_refused_before_any_upstream_call(demo, catalog, accounts):
    catalog([channel("chat")])
    key, _ = accounts.keys.create_key(1, name="tiny", quota=1)
    with pytest.raises(GatewayError) as caught:
        run("chat", inbound("chat", key))
    assert caught.value.status == 403 and caught.value.code == "insufficient_quota"


def test_bad_input_is_refused_before_any_charge(demo, catalog):
    catalog([channel("chat")])
    bad = body_for("messages") | {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    with pytest.raises(InvalidRequest) as caught:
        run("messages", inbound("messages", demo["key"], body=bad))
    assert caught.value.param == "thinking.budget_tokens"
    assert not UsageRepository().ledger(1)
    assert open_reservations(1) == [] and quota() == DEMO_QUOTA


# --- cut streams and clients that go away -------------------------------------------------------------

@pytest.mark.parametrize("dialect", ["chat", "messages", "responses", "content"])
def test_a_cut_stream_ends_in_the_dialect_error_event_and_is_billed_for_what_was_relayed(demo, catalog, dialect):
    catalog([channel("chat" if dialect == "responses" else "messages")])
    prompt = "one two three four five six seven eight"
    whole = inbound(dialect, demo["key"], prompt, stream=True)
    run(dialect, whole)
    cut = inbound(dialect, demo["key"], prompt + " #fault=cut", stream=True)
    status, _, data = run(dialect, cut)
    last_name, last = events_of(data)[-1]
    assert status == 200
    if dialect == "messages":
        assert last_name == "error" and last["error"]["message"]
    elif dialect == "responses":
        assert last_name == "response.failed"
    else:
        assert "error" in last
    entry = ledger(cut.request_id)
    assert entry["detail"]["outcome"] == "cut" and int(entry["units"]) == units_of(entry)
    assert 0 < int(entry["detail"]["output_tokens"]) < int(ledger(whole.request_id)["detail"]["output_tokens"])


def test_a_client_that_goes_away_stops_the_relay_and_is_billed_once_for_what_it_got(demo, catalog):
    catalog([channel("chat")])
    request = inbound("chat", demo["key"], "one two three four five six seven eight nine ten", stream=True)

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            answer = await text.chat_completions(request, http=http)
            sent: list[bytes] = []

            async def send(chunk: bytes) -> None:
                if len(sent) == 3:
                    raise OSError("the client went away")
                sent.append(chunk)

            with pytest.raises(OSError):
                await answer.send_to(send)
            return answer

    answer = anyio.run(scenario)
    assert answer.upcoming.events._closed  # the upstream read stopped
    entry = ledger(request.request_id)
    assert entry["detail"]["outcome"] == "client_gone"
    assert int(entry["detail"]["output_tokens"]) < 10


# --- the ASGI app ---------------------------------------------------------------------------------------

def test_the_app_answers_errors_in_each_route_dialect_envelope(demo, catalog, app):
    catalog([channel("chat")])

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
            key = {"authorization": f"Bearer {demo['key']}"}
            chat = await client.post("/v1/chat/completions", headers=key, json={"model": "m-small"})
            messages = await client.post("/v1/messages", headers=key, content=b"{not json")
            content = await client.post("/v1beta/models/m-small:embedSomething", headers=key, json={})
            nokey = await client.post("/v1/responses", json={"model": "m-small", "input": "hi"})
            return chat, messages, content, nokey

    chat, messages, content, nokey = anyio.run(scenario)
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "messages"
    assert messages.status_code == 400 and messages.json()["type"] == "error"
    assert content.status_code == 404 and content.json()["error"]["status"] == "NOT_FOUND"
    assert nokey.status_code == 401 and nokey.json()["error"]["code"] == "missing_api_key"


def test_the_app_stops_the_upstream_when_the_client_disconnects_and_settles_once(demo, catalog, app, monkeypatch):
    catalog([channel("chat")])
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "20")
    sent: list[dict] = []

    async def scenario():
        body = json.dumps(body_for("chat", "one two three four five six seven eight nine ten", stream=True)).encode()
        gone = anyio.Event()
        delivered = False

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if sum(1 for m in sent if m.get("body")) == 3:
                gone.set()
            await anyio.sleep(0)  # a socket write lets other tasks run

        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            monkeypatch.setattr(text, "http_client", lambda: http)
            scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
                     "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"",
                     "query_string": b"", "root_path": "", "server": ("gw", 80), "client": ("127.0.0.1", 1),
                     "headers": [(b"authorization", f"Bearer {demo['key']}".encode()),
                                 (b"content-type", b"application/json")]}
            await app(scope, receive, send)

    anyio.run(scenario)
    assert sent[0]["status"] == 200
    assert not any(m.get("more_body") is False for m in sent[1:])  # no normal end after the client left
    entries = UsageRepository().ledger(1)
    assert len(entries) == 1 and entries[0]["detail"]["outcome"] == "client_gone"


def test_the_model_list_holds_the_priced_text_models_the_key_may_use(demo, catalog, accounts, app):
    catalog([channel("chat", models=["m-small", "m-large", "m-unpriced"]), channel("content", models=["m-embed"])])
    key, _ = accounts.keys.create_key(1, name="two", allowed_models=["m-small", "m-embed"])

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
            return await client.get("/v1/models", headers={"x-api-key": key})

    answer = anyio.run(scenario)
    assert answer.status_code == 200 and answer.json()["object"] == "list"
    assert [m["id"] for m in answer.json()["data"]] == ["m-embed", "m-small"]


def test_the_sample_event_is_served_as_the_web_adapter_would_hand_it_over(demo, catalog, app):
    from tests.conftest import EVENTS

    catalog([channel("chat")])
    event = json.loads((EVENTS / "text_chat_stream.json").read_text())

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()), base_url="http://sim") as sim:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(text, "http_client", lambda: sim)
                async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
                    return await client.request(event["httpMethod"], event["path"], headers=event["headers"],
                                                content=event["body"])

    answer = anyio.run(scenario)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    assert answer.text.endswith("data: [DONE]\n\n")


def test_content_embeddings_are_billed_on_the_input_estimate_and_counting_is_free(demo, catalog):
    from gateway.tokens import estimate_value_tokens

    catalog([channel("content")])
    body = {"requests": [{"model": "models/m-embed", "content": {"parts": [{"text": "Hello there"}]}}]}
    embed = text.Inbound(path="/v1beta/models/m-embed:batchEmbedContents", headers={"x-goog-api-key": demo["key"]},
                         query={}, body=json.dumps(body).encode(), proxy="m-embed:batchEmbedContents")
    status, _, data = run("content", embed)
    assert status == 200 and len(json.loads(data)["embeddings"]) == 1
    assert int(ledger(embed.request_id)["units"]) == token_cost(
        SHIPPED["m-embed"], input_tokens=estimate_value_tokens(body), output_tokens=0)
    count = text.Inbound(path="/v1beta/models/m-small:countTokens", headers={"x-goog-api-key": demo["key"]}, query={},
                         body=json.dumps({"contents": body_for("content")["contents"]}).encode(),
                         proxy="m-small:countTokens")
    status, _, data = run("content", count)
    assert json.loads(data)["totalTokens"] > 0 and int(ledger(count.request_id)["units"]) == 0


@pytest.mark.parametrize("dialect", ["chat", "messages", "responses", "content"])
def test_a_silent_upstream_stream_is_kept_alive_with_sse_comments_then_completes(demo, catalog, monkeypatch, dialect):
    # Given an upstream that accepts the stream at once, then thinks before its first event
    # (longer than the keep-alive interval, which a test shortens from its default)
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "1.5")
    monkeypatch.setenv("GATEWAY_STREAM_KEEPALIVE_SECONDS", "0.2")
    from gateway.settings import reload_settings
    reload_settings()
    catalog([channel({"responses": "chat"}.get(dialect, dialect))])
    try:
        # When a client streams through it
        request = inbound(dialect, demo["key"], "one two three #fault=think", stream=True)
        status, _, data = run(dialect, request)
    finally:
        monkeypatch.delenv("GATEWAY_STREAM_KEEPALIVE_SECONDS")
        reload_settings()
    # Then the silence was filled with comment lines, before any event, and the stream completed
    assert status == 200
    # (a content-generation client gets bare newlines: its SDK reads every other line as JSON)
    keep_alive = b"\n" if dialect == "content" else b": keep-alive\n\n"
    assert data.startswith(keep_alive * 2)
    assert len(events_of(data)) >= 3
    # and it was billed once, as completed
    assert ledger(request.request_id)["detail"]["outcome"] == "completed"
