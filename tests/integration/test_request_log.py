"""The request log (GET /api/log/self, GET /api/log/token) read from the real ledger in the emulator.

Entries come from real requests where the route matters (plain, streamed and failed text through
the simulators) and from `billing` directly where only the time or the outcome does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gateway.admission import billing
from gateway.api import requestlog
from gateway.auth import authenticate
from gateway.errors import GatewayError
from tests.conftest import api_event
from tests.integration.test_text import channel, inbound, run

BASE = 1_700_000_000  # a fixed moment (2023-11-14), so windows and order are exact


def get(fn, ctx, path, headers, query=None):
    answer = fn.lambda_handler(api_event("GET", path, headers=headers, query=query), ctx)
    return answer["statusCode"], json.loads(answer["body"])


def self_headers(demo):
    return {"Authorization": demo["access_token"], "X-Api-User": str(demo["user_id"])}


def key_headers(key):
    return {"Authorization": f"Bearer {key}"}


def entry_at(monkeypatch, principal, seconds, *, request_id, model="m-small", units=100, kind=2, detail=None):
    """A ledger entry written by billing as if at `seconds` (epoch), settled or refunded."""
    class At(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.fromtimestamp(seconds, tz=UTC)

    monkeypatch.setattr(billing, "datetime", At)
    try:
        reservation = billing.reserve(principal, units * 2, model=model, route="/v1/chat/completions",
                                      reservation_id=request_id)
        if kind == 2:
            billing.settle(reservation, units, detail=detail)
        else:
            billing.refund(reservation, reason="upstream 500" if kind == 5 else "the client went away",
                           error=kind == 5)
    finally:
        monkeypatch.setattr(billing, "datetime", datetime)


@pytest.fixture
def keys(demo, accounts):
    """The demo key, a second key of the same user, and user 2 with its own key."""
    laptop, _ = accounts.keys.create_key(1, name="laptop")
    accounts.users.create_user(username="other", quota=10**9, user_id=2, access_token="other-token")
    other, _ = accounts.keys.create_key(2, name="demo")  # the same name as user 1's key: never mixed up
    return {"demo": authenticate(key_headers(demo["key"])), "laptop": authenticate(key_headers(laptop)),
            "other": authenticate(key_headers(other)), "demo_key": demo["key"], "laptop_key": laptop,
            "other_key": other}


# --- real requests ---------------------------------------------------------------------------------

def test_plain_streamed_and_failed_requests_are_listed_newest_first_with_their_units(
        account_fn, demo, keys, catalog, lambda_context):
    # Given a plain, a streamed and a failed chat request of user 1, and one of user 2
    catalog([channel("chat")])
    plain, streamed = inbound("chat", demo["key"], "plain one"), inbound("chat", demo["key"], "streamed", stream=True)
    run("chat", plain)
    run("chat", streamed)
    catalog([channel("chat", fault="500")])
    failed = inbound("chat", demo["key"], "failing")
    with pytest.raises(GatewayError):
        run("chat", failed)
    catalog([channel("chat")])
    run("chat", inbound("chat", keys["other_key"], "someone else"))

    # When user 1 reads its log
    status, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo))

    # Then it sees its three requests, newest first, each with what happened
    assert status == 200 and body["success"] is True and body["message"] == ""
    data = body["data"]
    assert [i["request_id"] for i in data["items"]] == [failed.request_id, streamed.request_id, plain.request_id]
    assert data["total"] == 3 and data["total_exact"] and data["page"] == 1 and data["page_size"] == 20
    assert data["has_more"] is False and data["next_cursor"] is None
    error, stream, simple = data["items"]
    assert set(simple) == {"id", "created_at", "type", "model_name", "token_name", "quota", "prompt_tokens",
                           "completion_tokens", "use_time", "is_stream", "request_id", "content",
                           "group", "group_ratio", "base_quota", "held_quota", "held_base_quota"}
    assert (simple["group"], simple["group_ratio"], simple["base_quota"]) == ("default", 1.0, simple["quota"])
    ledger = {e["request_id"]: e for e in demo_ledger()}
    assert simple["type"] == 2 and simple["is_stream"] is False and simple["model_name"] == "m-small"
    assert simple["quota"] == int(ledger[plain.request_id]["units"]) > 0
    assert simple["prompt_tokens"] > 0 and simple["completion_tokens"] > 0 and simple["token_name"] == "demo"
    assert stream["type"] == 2 and stream["is_stream"] is True and "streamed" in stream["content"]
    assert error["type"] == 5 and error["quota"] == 0 and "failed" in error["content"]
    assert "upstream" in error["content"]
    assert abs(simple["created_at"] - int(datetime.now(UTC).timestamp())) < 60
    assert all(i["use_time"] >= 0 for i in data["items"])

    # And the demo key's log holds the same; user 2's key sees only its own request
    _, mine = get(account_fn, lambda_context, "/api/log/token", key_headers(demo["key"]))
    assert [i["request_id"] for i in mine["data"]["items"]] == [i["request_id"] for i in data["items"]]
    _, theirs = get(account_fn, lambda_context, "/api/log/token", key_headers(keys["other_key"]))
    assert len(theirs["data"]["items"]) == 1 and theirs["data"]["items"][0]["request_id"] not in ledger


def test_a_request_the_client_abandons_before_the_answer_is_a_refund_not_an_error(
        account_fn, demo, catalog, monkeypatch, lambda_context):
    # Given an upstream that takes the connection and never answers, and a client that gives up
    import socket

    import anyio
    import httpx

    from gateway.api import text

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    catalog([{"name": "silent", "protocol": "chat", "base_url": f"http://127.0.0.1:{silent.getsockname()[1]}",
              "api_key": "sk-upstream", "models": ["*"]}])
    request = inbound("chat", demo["key"], "anyone there?")

    async def abandon():
        async with httpx.AsyncClient() as http:
            with anyio.move_on_after(0.5):
                await text.chat_completions(request, http=http)
                raise AssertionError("the silent upstream answered")

    try:
        anyio.run(abandon)
    finally:
        silent.close()
    # When the log is read
    _, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo))
    # Then the request is there as a refund (type 6), not a failure, with nothing charged
    (item,) = body["data"]["items"]
    assert (item["request_id"], item["type"], item["quota"]) == (request.request_id, 6, 0)
    assert "refunded" in item["content"]


def demo_ledger():
    from gateway.store.usage import UsageRepository

    return UsageRepository().ledger(1)


# --- filters, types and pages ----------------------------------------------------------------------

@pytest.fixture
def history(keys, monkeypatch):
    """User 1: 30 entries, one a second from BASE: every third on the laptop key, every fifth on
    m-large, types cycling consume, consume, error, consume, refund. User 2: 5 entries."""
    made = []
    for i in range(30):
        key = keys["laptop"] if i % 3 == 0 else keys["demo"]
        model = "m-large" if i % 5 == 0 else "m-small"
        kind = {0: 2, 1: 2, 2: 5, 3: 2, 4: 6}[i % 5]
        entry_at(monkeypatch, key, BASE + i, request_id=f"r{i:02d}", model=model, units=10 + i, kind=kind,
                 detail={"input_tokens": i, "output_tokens": 2 * i, "stream": i % 2 == 1})
        made.append({"id": f"r{i:02d}", "key": "laptop" if i % 3 == 0 else "demo", "model": model, "type": kind,
                     "at": BASE + i})
    for i in range(5):
        entry_at(monkeypatch, keys["other"], BASE + i, request_id=f"o{i}", model="m-small")
    return made


def ids(body):
    return [i["request_id"] for i in body["data"]["items"]]


def expected(history, **match):
    rows = [h for h in history if all(h[k] == v for k, v in match.items())]
    return [h["id"] for h in sorted(rows, key=lambda h: -h["at"])]


@pytest.mark.parametrize("query,match", [
    ({}, {}),
    ({"model_name": "m-large"}, {"model": "m-large"}),
    ({"token_name": "laptop"}, {"key": "laptop"}),
    ({"token_name": "laptop", "model_name": "m-large"}, {"key": "laptop", "model": "m-large"}),
    ({"type": "2"}, {"type": 2}),
    ({"type": "5"}, {"type": 5}),
    ({"type": "6"}, {"type": 6}),
    ({"type": "6", "model_name": "m-small"}, {"type": 6, "model": "m-small"}),
    ({"type": "0"}, {}),
])
def test_each_filter_lists_exactly_the_matching_entries_of_the_account(account_fn, demo, history, lambda_context,
                                                                        query, match):
    status, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                       {"page_size": "100", **query})
    assert status == 200
    assert ids(body) == expected(history, **match)
    assert body["data"]["total"] == len(expected(history, **match))
    assert not any(i.startswith("o") for i in ids(body))  # user 2's entries never appear


@pytest.mark.parametrize("query,match", [
    ({}, {}), ({"token_name": "laptop"}, {"key": "laptop"}), ({"type": "2", "model_name": "m-large"},
                                                            {"type": 2, "model": "m-large"})])
def test_the_logs_totals_add_up_the_filtered_rows_spend_and_tokens(account_fn, demo, history, lambda_context,
                                                                    query, match):
    rows = [h for h in history if all(h[k] == v for k, v in match.items())]
    window = {"start_timestamp": str(BASE + 1), "end_timestamp": str(BASE + 28)}
    rows = [h for h in rows if BASE + 1 <= h["at"] <= BASE + 28]
    status, body = get(account_fn, lambda_context, "/api/log/self/stat", self_headers(demo), {**query, **window})
    assert status == 200, body
    i_of = [h["at"] - BASE for h in rows]
    assert body["data"] == {
        "requests": len(rows), "quota": sum(10 + h["at"] - BASE for h in rows if h["type"] == 2),
        "prompt_tokens": sum(i for i, h in zip(i_of, rows, strict=True) if h["type"] == 2),
        "completion_tokens": sum(2 * i for i, h in zip(i_of, rows, strict=True) if h["type"] == 2), "exact": True}
    status, body = get(account_fn, lambda_context, "/api/log/self/stat", self_headers(demo), {"type": "9"})
    assert status == 400 and "type" in body["message"]


def test_the_time_window_is_inclusive_of_both_seconds(account_fn, demo, history, lambda_context):
    _, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                  {"start_timestamp": str(BASE + 10), "end_timestamp": str(BASE + 14)})
    assert ids(body) == ["r14", "r13", "r12", "r11", "r10"]
    assert all(BASE + 10 <= i["created_at"] <= BASE + 14 for i in body["data"]["items"])
    _, one = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                 {"start_timestamp": str(BASE + 7), "end_timestamp": str(BASE + 7)})
    assert ids(one) == ["r07"]
    _, none = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                  {"start_timestamp": str(BASE + 100)})
    assert ids(none) == [] and none["data"]["total"] == 0


def test_pages_split_the_list_at_exact_boundaries(account_fn, demo, history, lambda_context):
    everything = expected(history)
    pages = []
    for p in (1, 2, 3, 4):
        _, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                      {"p": str(p), "page_size": "10"})
        pages.append(body["data"])
    assert [ids({"data": d}) for d in pages] == [everything[:10], everything[10:20], everything[20:30], []]
    assert [d["has_more"] for d in pages] == [True, True, False, False]
    assert all(d["total"] == 30 and d["page_size"] == 10 for d in pages)
    assert [d["page"] for d in pages] == [1, 2, 3, 4]
    # page_size 1 at the last entry, and a page that ends exactly at the last entry
    _, last = get(account_fn, lambda_context, "/api/log/self", self_headers(demo), {"p": "30", "page_size": "1"})
    assert ids(last) == [everything[-1]] and last["data"]["has_more"] is False
    _, default = get(account_fn, lambda_context, "/api/log/self", self_headers(demo))
    assert ids(default) == everything[:20] and default["data"]["page_size"] == 20


def test_a_cursor_continues_right_after_the_previous_page(account_fn, demo, history, lambda_context):
    everything = expected(history, key="demo")
    seen, cursor = [], None
    while True:
        query = {"page_size": "7", "token_name": "demo"} | ({"cursor": cursor} if cursor else {})
        _, body = get(account_fn, lambda_context, "/api/log/token", key_headers(demo["key"]), query)
        seen.extend(ids(body))
        cursor = body["data"]["next_cursor"]
        if not cursor:
            break
        assert body["data"]["has_more"]
    assert seen == everything
    # An item's id is a cursor too: what came before it
    _, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo), {"page_size": "3"})
    _, after = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                   {"page_size": "3", "cursor": body["data"]["items"][0]["id"]})
    assert ids(after) == expected(history)[1:4]


def test_the_key_log_shows_only_the_calling_keys_entries(account_fn, demo, history, keys, lambda_context):
    _, laptop = get(account_fn, lambda_context, "/api/log/token", key_headers(keys["laptop_key"]),
                    {"page_size": "100"})
    assert ids(laptop) == expected(history, key="laptop")
    assert {i["token_name"] for i in laptop["data"]["items"]} == {"laptop"}
    # Asking the key's log for another key's name finds nothing, never that key's entries
    _, other_name = get(account_fn, lambda_context, "/api/log/token", key_headers(keys["laptop_key"]),
                        {"token_name": "demo"})
    assert ids(other_name) == []
    _, theirs = get(account_fn, lambda_context, "/api/log/token", key_headers(keys["other_key"]),
                    {"page_size": "100"})
    assert ids(theirs) == ["o4", "o3", "o2", "o1", "o0"]


def test_another_users_token_name_and_model_never_reach_across_accounts(account_fn, demo, history, keys,
                                                                        lambda_context):
    # User 2 has a key named "demo" too, and entries on m-small
    _, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                  {"token_name": "demo", "model_name": "m-small", "page_size": "100"})
    assert ids(body) == expected(history, key="demo", model="m-small")
    _, two = get(account_fn, lambda_context, "/api/log/self", {"Authorization": "other-token", "X-Api-User": "2"},
                 {"page_size": "100"})
    assert ids(two) == ["o4", "o3", "o2", "o1", "o0"]


def test_a_name_shared_by_two_keys_lists_both(account_fn, demo, history, accounts, keys, monkeypatch,
                                              lambda_context):
    twin, _ = accounts.keys.create_key(1, name="laptop")
    entry_at(monkeypatch, authenticate(key_headers(twin)), BASE + 100, request_id="twin")
    _, body = get(account_fn, lambda_context, "/api/log/self", self_headers(demo),
                  {"token_name": "laptop", "page_size": "100"})
    assert ids(body) == ["twin", *expected(history, key="laptop")]


def test_a_filter_that_matches_little_stops_at_the_read_bound_and_says_where_to_go_on(
        demo, keys, monkeypatch):
    # Given more entries than one read examines, of which only the oldest is an error
    monkeypatch.setattr(requestlog, "MAX_EXAMINED", 12)
    entry_at(monkeypatch, keys["demo"], BASE, request_id="old-error", kind=5)
    for i in range(1, 20):
        entry_at(monkeypatch, keys["demo"], BASE + i, request_id=f"ok{i}")
    query = requestlog.LogQuery({"type": "5", "page_size": "5"})
    # When the errors are asked for
    page = requestlog.read(1, query)
    # Then the read stops at its bound with a short page and a cursor, and the total is a lower bound
    assert page["items"] == [] and page["has_more"] is True and page["next_cursor"]
    assert page["total_exact"] is False
    following = requestlog.read(1, requestlog.LogQuery({"type": "5", "page_size": "5", "cursor": page["next_cursor"]}))
    assert [i["request_id"] for i in following["items"]] == ["old-error"] and following["has_more"] is False


def test_a_read_that_ends_on_the_last_entry_of_every_shard_says_there_is_nothing_more(demo, keys, monkeypatch):
    # Given exactly as many entries as one read examines, spread over the ledger's shards, the
    # oldest an error: the read's bound falls on the account's last entry
    monkeypatch.setattr(requestlog, "MAX_EXAMINED", 12)
    entry_at(monkeypatch, keys["demo"], BASE, request_id="old-error", kind=5)
    for i in range(1, 13):
        entry_at(monkeypatch, keys["demo"], BASE + i, request_id=f"ok{i}")
    # When the errors are asked for
    page = requestlog.read(1, requestlog.LogQuery({"type": "5", "page_size": "5"}))
    # Then every shard ran out within the read: the one error, no cursor, an exact total
    assert [i["request_id"] for i in page["items"]] == ["old-error"]
    assert (page["has_more"], page["next_cursor"], page["total"], page["total_exact"]) == (False, None, 1, True)


# --- authentication and bad input --------------------------------------------------------------------

@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "demo-access-token"}, {"Authorization": "wrong", "X-Api-User": "1"},
    {"Authorization": "demo-access-token", "X-Api-User": "2"},
])
def test_the_account_log_needs_the_users_access_token_and_id(account_fn, demo, lambda_context, headers):
    status, body = get(account_fn, lambda_context, "/api/log/self", headers)
    assert status == 401 and body["success"] is False and body["data"] is None


def test_the_key_log_needs_a_valid_key(account_fn, demo, lambda_context):
    status, body = get(account_fn, lambda_context, "/api/log/token", key_headers("sk-" + "x" * 48))
    assert status == 401 and body["success"] is False


@pytest.mark.parametrize("query,field", [
    ({"p": "0"}, "p"), ({"p": "x"}, "p"), ({"p": "-1"}, "p"), ({"p": "51"}, "p"),
    ({"page_size": "0"}, "page_size"), ({"page_size": "101"}, "page_size"), ({"page_size": "2.5"}, "page_size"),
    ({"start_timestamp": "yesterday"}, "start_timestamp"), ({"end_timestamp": "-5"}, "end_timestamp"),
    ({"start_timestamp": "20", "end_timestamp": "10"}, "start_timestamp"),
    ({"end_timestamp": "99999999999999"}, "end_timestamp"),
    ({"type": "3"}, "type"), ({"type": "consume"}, "type"),
    ({"model_name": "m" * 201}, "model_name"), ({"token_name": "t" * 201}, "token_name"),
    ({"cursor": "not-a-cursor"}, "cursor"), ({"cursor": requestlog.encode_cursor("PROFILE")}, "cursor"),
])
@pytest.mark.parametrize("path", ["/api/log/self", "/api/log/token"])
def test_bad_parameters_get_400_naming_the_parameter(account_fn, demo, lambda_context, query, field, path):
    headers = self_headers(demo) if path == "/api/log/self" else key_headers(demo["key"])
    status, body = get(account_fn, lambda_context, path, headers, query)
    assert status == 400 and body["success"] is False and body["data"] is None
    assert body["message"].startswith(field + ":")


# --- the admin command line ------------------------------------------------------------------------

def test_admin_logs_lists_a_users_entries_by_key_and_since(demo, history, keys, capsys):
    from gateway import admin

    listed = admin.run(["logs", "--user", "1", "--limit", "100"])
    assert [i["request_id"] for i in listed["items"]] == expected(history) and listed["total"] == 30
    by_key = admin.run(["logs", "--user", "1", "--key", keys["laptop"].key_id, "--limit", "100"])
    assert [i["request_id"] for i in by_key["items"]] == expected(history, key="laptop")
    since = admin.run(["logs", "--user", "1", "--since", str(BASE + 25), "--type", "5"])
    assert [i["request_id"] for i in since["items"]] == ["r27"]
    iso = admin.run(["logs", "--user", "1", "--since", "2023-11-14T22:13:48Z", "--until", str(BASE + 29)])
    assert [i["request_id"] for i in iso["items"]] == ["r29", "r28"]
    assert admin.run(["logs", "--user", "1", "--since", "1h"])["items"] == []  # BASE is long ago
    # Another user's key is refused, not listed
    assert admin.main(["logs", "--user", "1", "--key", keys["other"].key_id]) == 1
    with pytest.raises(SystemExit):
        admin.run(["logs", "--user", "1", "--since", "last tuesday"])


def test_a_filtered_read_of_one_models_log_is_one_query(demo, history, keys, monkeypatch):
    """One model's log is one partition: a filtered read of it is a single Query (the account's
    own log spans the ledger's shards and first reads their keys to find where to stop)."""
    from gateway.store.aws import client

    db = client("dynamodb")
    real, indexes = db.query, []

    def counted(**params):
        indexes.append(params.get("IndexName"))
        return real(**params)

    monkeypatch.setattr(db, "query", counted)
    page = requestlog.read(1, requestlog.LogQuery({"model_name": "m-small", "type": "5", "page_size": "100"}))
    assert [i["request_id"] for i in page["items"]] == expected(history, model="m-small", type=5)
    assert indexes == ["gsi2"]


def spy_queries(monkeypatch) -> list[tuple[dict, list[dict]]]:
    """Every Query the store sends from now on: its parameters and the items DynamoDB returned."""
    from gateway.store.aws import client

    db = client("dynamodb")
    real, sent = db.query, []

    def recorded(**params):
        answer = real(**params)
        sent.append((params, answer.get("Items", [])))
        return answer

    monkeypatch.setattr(db, "query", recorded)
    return sent


def test_a_page_reads_at_most_a_page_from_each_shard_and_a_filters_examination_reads_keys_alone(
        demo, history, monkeypatch):
    """Read capacity follows what a page shows, not the account's history: the account's 30 entries
    lie over 8 shards (4 in one, at least), a page of 2 takes at most 3 (the page and one more) from
    each; and where a filter then picks among the newest entries, those are read as sort keys only."""
    from gateway.store.usage import ledger_pks

    sent = spy_queries(monkeypatch)
    page = requestlog.read(1, requestlog.LogQuery({"page_size": "2"}))
    assert [i["request_id"] for i in page["items"]] == expected(history)[:2]
    shards = len(ledger_pks(1))
    assert len(sent) > shards and all(len(items) <= 3 for _, items in sent[:shards])
    sent.clear()
    page = requestlog.read(1, requestlog.LogQuery({"type": "5", "page_size": "100"}))
    assert [i["request_id"] for i in page["items"]] == expected(history, type=5)
    examined = [items for params, items in sent if "FilterExpression" not in params]
    assert len(examined) == shards and sum(map(len, examined)) == 30
    assert all(set(item) == {"sk"} for items in examined for item in items)


def test_entries_stored_under_each_of_the_ledgers_eight_partitions_are_read(demo, keys, monkeypatch):
    """The ledger's layout is stored data: an account's entries lie under `USER#<id>` and
    `USER#<id>#L1` to `#L7` (written by every deployment so far), and a read finds them all."""
    from gateway.settings import get_settings
    from gateway.store.aws import client, to_item

    entry_at(monkeypatch, keys["demo"], BASE, request_id="first")
    (entry,) = demo_ledger()
    for shard in range(8):
        stored = {**entry, "pk": "USER#1" if shard == 0 else f"USER#1#L{shard}", "request_id": f"stored-{shard}",
                  "sk": str(entry["sk"]).replace("#first", f"#stored-{shard}")}
        client("dynamodb").put_item(TableName=get_settings().accounts_table, Item=to_item(stored))
    page = requestlog.read(1, requestlog.LogQuery({"page_size": "100"}))
    assert sorted(i["request_id"] for i in page["items"]) == ["first"] + [f"stored-{n}" for n in range(8)]
