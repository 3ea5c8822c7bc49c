"""The one exactly-once credit (commerce/credits.py) and the operator's code routes, on the edges
the broader commerce tests pass by: a credit adds units and never takes them (a credit of nothing
is still one entry in the log), its log entry is kept as long as the request log's (the ledger's
retention), an operator's edit of a code answers `success`, and a code's id in a path is at most
18 digits (any id of a code fits: they are counters)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from gateway.admission import balances
from gateway.commerce import credits, redemption
from gateway.commerce.store import CommerceRepository
from gateway.schemas.commerce import NewCodes, Redeem
from gateway.store.table import AccountsTable
from gateway.store.usage import ledger_pk
from tests.conftest import api_event, use_environment

OPERATOR = {"Authorization": "Bearer demo-access-token", "X-Api-User": "1"}


@pytest.fixture
def ann(demo, accounts) -> int:
    return int(accounts.users.create_user(username="ann", quota=0)["id"])


def call(fn, ctx, method, path, *, body=None, query=None, resource=None) -> tuple[int, dict]:
    event = api_event(method, path, resource=resource or path, headers=OPERATOR, query=query,
                      body=None if body is None else json.dumps(body))
    answer = fn.lambda_handler(event, ctx)
    return answer["statusCode"], json.loads(answer["body"])


def top_ups(user_id: int, credit_id: str) -> list[dict]:
    """The log entries (`credited`) of one credit, as stored."""
    table = AccountsTable()
    items = table._query_all({"TableName": table.table, "KeyConditionExpression": "pk = :pk",
                              "ExpressionAttributeValues": {":pk": {"S": ledger_pk(user_id, credit_id)}},
                              "ConsistentRead": True})
    return [item for item in items if item.get("request_id") == credit_id]


def quota(user_id: int) -> int:
    return int(balances.get_user(user_id)["quota"])


def test_a_credit_of_nothing_is_logged_and_one_that_would_take_units_is_refused_writing_nothing(ann):
    # A credit of 0 units (say, a promotion's reward that came to nothing) is still a credit: logged once
    credits.apply(credits.Credit(credit_id="nothing", user_id=ann, units=0, route="redemption"), [])
    assert [int(e["credited_units"]) for e in top_ups(ann, "nothing")] == [0] and quota(ann) == 0
    # One of -1 unit would take from the account: refused before anything is written
    with pytest.raises(ValueError, match="never takes"):
        credits.apply(credits.Credit(credit_id="taking", user_id=ann, units=-1, route="redemption"), [])
    assert top_ups(ann, "taking") == [] and quota(ann) == 0


@pytest.mark.parametrize("days", [30, 1])
def test_a_credits_log_entry_is_kept_as_long_as_the_request_logs(ann, days):
    # Given the request log is kept `days` days (GATEWAY_LEDGER_RETENTION_DAYS)
    repo = CommerceRepository()
    (key,) = redemption.create(NewCodes(name="kept", quota=700), 1, repo)["data"]
    saved = use_environment(GATEWAY_LEDGER_RETENTION_DAYS=str(days))
    try:
        before = int(time.time())
        redemption.redeem(ann, Redeem(key=key), repo)
        after = int(time.time())
    finally:
        use_environment(**saved)
    # Then the code's credit is logged, and DynamoDB deletes its entry that many whole days after it
    (entry,) = top_ups(ann, f"redeem-{repo.code(key)['id']}")
    assert int(entry["credited_units"]) == 700 and quota(ann) == 700
    assert int(entry["expires_ttl"]) == int(entry["at"]) // 1000 + days * 86_400
    assert before + days * 86_400 <= int(entry["expires_ttl"]) <= after + days * 86_400
    # While without a retention the entry is kept for good
    (other,) = redemption.create(NewCodes(name="forever", quota=5), 1, repo)["data"]
    redemption.redeem(ann, Redeem(key=other), repo)
    (kept,) = top_ups(ann, f"redeem-{repo.code(other)['id']}")
    assert "expires_ttl" not in kept


def test_an_operators_edit_of_a_code_answers_success_with_the_code_as_edited(commerce_fn, lambda_context, demo):
    status, made = call(commerce_fn, lambda_context, "POST", "/api/redemption", body={"name": "gift", "quota": 10})
    code_id = CommerceRepository().code(made["data"][0])["id"]
    status, edited = call(commerce_fn, lambda_context, "PUT", "/api/redemption",
                          body={"id": code_id, "name": "more", "quota": 20})
    assert (status, edited["success"]) == (200, True)
    assert (edited["data"]["name"], edited["data"]["quota"]) == ("more", 20)
    status, disabled = call(commerce_fn, lambda_context, "PUT", "/api/redemption", query={"status_only": "true"},
                            body={"id": code_id, "status": 2})
    assert (status, disabled["success"], disabled["data"]["status"]) == (200, True, 2)


@pytest.mark.parametrize(("code_id", "status"), [
    ("9" * 18, 404),  # the longest id read: no such code
    ("1", 404),
    ("1" + "0" * 18, 400),  # 19 digits: not an id, named
    ("12a", 400),
])
def test_a_codes_id_in_a_path_is_up_to_18_digits(commerce_fn, lambda_context, demo, code_id, status):
    for method in ("GET", "DELETE"):
        answered, body = call(commerce_fn, lambda_context, method, f"/api/redemption/{code_id}",
                              resource="/api/redemption/{id}")
        assert answered == status and body["success"] is False, (method, body)
        assert body["message"].startswith("id:")


def test_the_log_entry_of_a_credit_is_dated_at_the_credit(ann):
    """The entry's date is the credit's (`now`), so a top-up lands on its own day in the log."""
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    credits.apply(credits.Credit(credit_id="dated", user_id=ann, units=9, route="stripe"), [], now=at)
    (entry,) = top_ups(ann, "dated")
    assert int(entry["at"]) == int(at.timestamp() * 1000)
