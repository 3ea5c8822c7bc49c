"""Prices people can read and usage people can act on, through the account function: the pricing
page's data after the caller's group ratio (anonymous only while the operator allows), tokens
per day and model for the user and for the operator, and the request log of a range as CSV."""

from __future__ import annotations

import csv
import io
import json
import time

import pytest

from gateway import options
from gateway.admission import billing
from gateway.api import pricing
from gateway.auth import authenticate
from gateway.prices import SHIPPED
from tests.conftest import api_event
from tests.integration.money_support import put_in_group
from tests.integration.test_text import channel, inbound, run

OPERATOR = {"Authorization": "Bearer demo-access-token", "X-Api-User": "1"}


@pytest.fixture
def shop(catalog, monkeypatch):
    """The `catalog` fixture, read by the pricing page too."""
    def use(*args, **kwargs):
        built = catalog(*args, **kwargs)
        monkeypatch.setattr(pricing, "get_catalog", lambda: built)
        return built
    return use


@pytest.fixture(autouse=True)
def fresh_options():
    options.forget()
    yield
    options.forget()


def call(fn, ctx, path: str, *, headers=None, query=None, method="GET", body=None):
    event = api_event(method, path, resource=path, headers=headers, query=query,
                      body=None if body is None else json.dumps(body))
    answer = fn.lambda_handler(event, ctx)
    headers = {k: v[-1] for k, v in (answer.get("multiValueHeaders") or {}).items()}
    headers.update(answer.get("headers") or {})
    return answer["statusCode"], headers, answer["body"]


def call_json(fn, ctx, path: str, **kwargs):
    status, _, body = call(fn, ctx, path, **kwargs)
    return status, json.loads(body)


@pytest.fixture
def ann(demo, accounts):
    user = accounts.users.create_user(username="ann", quota=250_000_000, access_token="ann-access-token")
    key, _ = accounts.keys.create_key(int(user["id"]), name="=cmd|' /C calc'!A0")  # a name a spreadsheet would run
    return {"id": int(user["id"]), "key": key,
            "headers": {"Authorization": "Bearer ann-access-token", "X-Api-User": str(user["id"])}}


# --- pricing --------------------------------------------------------------------------------------

def test_the_pricing_page_shows_the_callers_prices_after_its_group_ratio(account_fn, lambda_context, accounts,
                                                                        ann, shop):
    shop([channel("chat", models=["m-small", "m-large", "iota-image-1"])])
    # Given ann in a group priced at 0.5
    put_in_group(accounts, ann["id"], "half", {"default": 1, "half": 0.5})
    status, answer = call_json(account_fn, lambda_context, "/api/pricing", headers=ann["headers"])
    assert status == 200 and (answer["group"], answer["group_ratio"]) == ("half", 0.5)
    rows = {row["model_name"]: row for row in answer["data"]}
    assert set(rows) == {"m-small", "m-large", "iota-image-1"}
    large = SHIPPED["m-large"]
    # Then every rate is half the table's, the cache rates included
    assert rows["m-large"] == {
        "model_name": "m-large", "kind": "text", "family": "gateway",
        "input_per_million": float(large.input_per_million) / 2,
        "output_per_million": float(large.output_per_million) / 2,
        "cached_input_per_million": float(large.cached_input_per_million) / 2,
        "cache_write_per_million": float(large.cache_write_per_million) / 2,
        "cache_write_1h_per_million": float(large.cache_write_1h_per_million) / 2,
        # a batch's line pays half of that again by default (docs/batches.md)
        "batch_ratio": 0.5, "batch_input_per_million": float(large.input_per_million) / 4,
        "batch_output_per_million": float(large.output_per_million) / 4}
    assert rows["iota-image-1"]["per_image"] == 0.02 and rows["iota-image-1"]["kind"] == "image"
    assert "output_per_million" not in rows["iota-image-1"]
    # And an anonymous caller sees the default group's (full) prices
    status, anonymous = call_json(account_fn, lambda_context, "/api/pricing")
    assert status == 200 and anonymous["group"] == "default"
    assert {r["model_name"]: r for r in anonymous["data"]}["m-large"]["input_per_million"] == 3.0


def test_a_video_model_priced_by_its_tokens_is_a_video_without_an_input_price(account_fn, lambda_context, demo,
                                                                              shop):
    # zeta's Seedance is priced per million output (video) tokens only (prices.py, Ark's rates)
    shop([channel("zeta", models=["zeta-video-1-0-pro-250528"])])
    _, answer = call_json(account_fn, lambda_context, "/api/pricing", headers=OPERATOR)
    (row,) = answer["data"]
    assert row["kind"] == "video" and row["family"] == "zeta"
    assert row["output_per_million"] == 2.5 and "input_per_million" not in row


def test_a_rate_left_unset_is_shown_at_the_rate_a_bill_falls_back_to(account_fn, lambda_context, demo, shop):
    shop([channel("chat", models=["m-odd"])], prices={"m-odd": {"input_per_million": 2, "output_per_million": 4}})
    _, answer = call_json(account_fn, lambda_context, "/api/pricing", headers=OPERATOR)
    (row,) = answer["data"]
    assert (row["cached_input_per_million"], row["cache_write_per_million"], row["cache_write_1h_per_million"]) == \
        (2.0, 2.0, 2.0)


def test_anonymous_pricing_follows_the_operators_option(account_fn, commerce_fn, lambda_context, demo, ann, shop):
    shop([channel("chat")])
    status, _ = call_json(commerce_fn, lambda_context, "/api/option", method="PUT", headers=OPERATOR,
                          body={"key": "PricingAnonymous", "value": False})
    assert status == 200
    options.forget()
    status, answer = call_json(account_fn, lambda_context, "/api/pricing")
    assert status == 401 and answer["success"] is False
    status, _ = call_json(account_fn, lambda_context, "/api/pricing", headers=ann["headers"])
    assert status == 200
    # A wrong credential is a 401, never the anonymous answer
    status, _ = call_json(account_fn, lambda_context, "/api/pricing",
                          headers={"Authorization": "Bearer wrong", "X-Api-User": "1"})
    assert status == 401


def test_a_channel_of_another_group_adds_nothing_to_the_pricing_page(account_fn, lambda_context, ann, shop):
    shop([{**channel("chat", models=["m-small"])},
             {**channel("chat", name="vip-only", models=["m-large"]), "groups": ["vip"]}])
    _, answer = call_json(account_fn, lambda_context, "/api/pricing", headers=ann["headers"])
    assert [r["model_name"] for r in answer["data"]] == ["m-small"]


# --- usage ----------------------------------------------------------------------------------------

def test_tokens_per_day_and_model_for_the_user_and_for_the_operator(account_fn, lambda_context, accounts, demo,
                                                                   ann, catalog):
    catalog([channel("chat")])
    for key in (ann["key"], ann["key"], demo["key"]):
        assert run("chat", inbound("chat", key, "count my tokens"))[0] == 200
    # and one request of ann's that failed (its hold refunded): not served, so not counted
    failed = billing.reserve(authenticate({"x-api-key": ann["key"]}), 1000, model="m-small", route="chat",
                             reservation_id="failed-1")
    billing.refund(failed, reason="the upstream failed")
    entries = [e for e in accounts.usage.ledger(ann["id"]) if e.get("detail", {}).get("input_tokens")]
    prompt = sum(int(e["detail"]["input_tokens"]) for e in entries)
    completion = sum(int(e["detail"]["output_tokens"]) for e in entries)
    status, mine = call_json(account_fn, lambda_context, "/api/data/self", headers=ann["headers"])
    assert status == 200
    (row,) = mine["data"]["rows"]
    assert (row["model_name"], row["count"], row["prompt_tokens"], row["completion_tokens"]) == \
        ("m-small", 2, prompt, completion) and row["token_used"] == prompt + completion and prompt > 0
    assert row["quota"] == sum(int(e["units"]) for e in entries)
    # The Dashboard's Requests card and its chart count the same requests (issue 45, 8)
    _, me = call_json(account_fn, lambda_context, "/api/user/self", headers=ann["headers"])
    assert me["data"]["request_count"] == row["count"] == 2
    # The operator's view adds everyone up; a user may not read it
    status, everyone = call_json(account_fn, lambda_context, "/api/data", headers=OPERATOR, query={"days": "7"})
    assert status == 200 and everyone["data"]["rows"][0]["count"] == 3
    assert everyone["data"]["rows"][0]["prompt_tokens"] > prompt
    assert call_json(account_fn, lambda_context, "/api/data", headers=ann["headers"])[0] == 403


# --- the CSV export -------------------------------------------------------------------------------

def test_the_log_of_a_range_exports_as_csv_newest_first_and_formula_safe(account_fn, lambda_context, accounts, ann,
                                                                        catalog):
    catalog([channel("chat")])
    requests = [inbound("chat", ann["key"], f"request {n}") for n in range(3)]
    for request in requests:
        assert run("chat", request)[0] == 200
    now = int(time.time())
    status, headers, body = call(account_fn, lambda_context, "/api/log/self/export", headers=ann["headers"],
                                 query={"start_timestamp": str(now - 3600), "end_timestamp": str(now + 1)})
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    assert headers["X-Export-Truncated"] == "false" and "attachment" in headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [r["request_id"] for r in rows] == [r.request_id for r in reversed(requests)]
    ledger = {e["request_id"]: e for e in accounts.usage.ledger(ann["id"])}
    for row in rows:
        entry = ledger[row["request_id"]]
        assert (int(row["quota"]), int(row["prompt_tokens"]), row["group"], row["model_name"]) == (
            int(entry["units"]), int(entry["detail"]["input_tokens"]), "default", "m-small")
        assert row["token_name"] == "'=cmd|' /C calc'!A0"  # never a formula in a spreadsheet
    # A range outside the requests exports the header alone
    _, _, empty = call(account_fn, lambda_context, "/api/log/self/export", headers=ann["headers"],
                       query={"start_timestamp": "0", "end_timestamp": "86400"})
    assert empty.strip().split("\r\n") == [",".join(text_header())]


@pytest.mark.parametrize("name", ["\n=1+1", "\x0b=1+1", "\r=1+1", "\t=1+1", " =1+1", "\uff1d1+1", "@SUM(1)",
                                  "-1+1", "+1"])
def test_every_cell_a_spreadsheet_would_evaluate_is_quoted(account_fn, lambda_context, accounts, ann, catalog, name):
    """A key named before names were bounded (stored as it was given) exports as text, whatever it starts with."""
    catalog([channel("chat")])
    key, _ = accounts.keys.create_key(ann["id"], name=name)
    assert run("chat", inbound("chat", key, "hi"))[0] == 200
    now = int(time.time())
    _, _, body = call(account_fn, lambda_context, "/api/log/self/export", headers=ann["headers"],
                      query={"start_timestamp": str(now - 3600), "end_timestamp": str(now + 1)})
    (row,) = list(csv.DictReader(io.StringIO(body)))
    assert row["token_name"] == "'" + name


def text_header() -> list[str]:
    from gateway.api.requestlog import EXPORT_COLUMNS

    return list(EXPORT_COLUMNS)


@pytest.mark.parametrize(("query", "param"), [
    ({}, "start_timestamp"), ({"start_timestamp": "0"}, "end_timestamp"),
    ({"start_timestamp": "0", "end_timestamp": str(94 * 86400)}, "end_timestamp"),
    ({"start_timestamp": "10", "end_timestamp": "5"}, "start_timestamp"),
    ({"start_timestamp": "x", "end_timestamp": "5"}, "start_timestamp"),
])
def test_a_bad_export_range_is_a_400_naming_the_parameter(account_fn, lambda_context, ann, query, param):
    status, answer = call_json(account_fn, lambda_context, "/api/log/self/export", headers=ann["headers"],
                               query=query)
    assert status == 400 and answer["message"].startswith(param), answer


def test_the_export_is_the_callers_alone(account_fn, lambda_context, ann):
    status, _ = call_json(account_fn, lambda_context, "/api/log/self/export",
                          query={"start_timestamp": "0", "end_timestamp": "10"})
    assert status == 401

