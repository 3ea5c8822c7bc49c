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
    # and shown in the request log as a top-up of 0, spending nothing
    from gateway.api import requestlog

    assert [(e["type"], e["quota"]) for e in requestlog.account_log(ann, {"type": "1"})["data"]["items"]] == [(1, 0)]
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


def _owe(user_id: int, units: int) -> None:
    """What a refund or a dispute does to an account that had spent the units it takes back."""
    from gateway.settings import get_settings
    from gateway.store.aws import client
    from gateway.store.table import PROFILE, user_pk

    client("dynamodb").update_item(
        TableName=get_settings().accounts_table, Key={"pk": {"S": user_pk(user_id)}, "sk": {"S": PROFILE}},
        UpdateExpression="ADD owed_quota :u", ExpressionAttributeValues={":u": {"N": str(units)}})


def _owed(user_id: int) -> int:
    from gateway.store.users import UsersRepository

    return int((UsersRepository().raw_user(user_id, consistent=True) or {}).get("owed_quota") or 0)


def _reversal_before_each_transaction(monkeypatch, user_id: int, times: int) -> list[int]:
    """A reversal moving the account's debt after the credit read it and before its transaction, the
    first `times` transactions; the list counts the transactions asked."""
    from gateway.admission import transactions

    asked: list[int] = []
    real = transactions.transact

    def racing(writes, **kwargs):
        asked.append(1)
        if len(asked) <= times:
            _owe(user_id, 10)
        return real(writes, **kwargs)

    monkeypatch.setattr(transactions, "transact", racing)
    return asked


def test_a_credit_whose_debt_a_reversal_moved_meanwhile_repays_the_debt_as_it_then_is(ann, monkeypatch):
    # Given ann owes 100 units (a refund took back what she had spent)
    _owe(ann, 100)
    # When a dispute adds 10 more to her debt between the credit's read of it and its transaction
    asked = _reversal_before_each_transaction(monkeypatch, ann, times=1)
    credits.apply(credits.Credit(credit_id="raced", user_id=ann, units=300, route="redemption"), [])
    # Then the credit is asked again and repays the 110 she then owes, the rest to her quota, once
    assert len(asked) == 2
    assert _owed(ann) == 0 and quota(ann) == 190
    assert [int(e["credited_units"]) for e in top_ups(ann, "raced")] == [300]


def test_a_credit_whose_debt_keeps_moving_is_asked_five_times_then_refused_writing_nothing(ann, monkeypatch):
    _owe(ann, 100)
    # A debt moved before every transaction: five tries, then ProfileRefused with nothing credited
    asked = _reversal_before_each_transaction(monkeypatch, ann, times=99)
    with pytest.raises(credits.ProfileRefused):
        credits.apply(credits.Credit(credit_id="starved", user_id=ann, units=300, route="redemption"), [])
    assert len(asked) == 5
    assert _owed(ann) == 150 and quota(ann) == 0 and top_ups(ann, "starved") == []


def test_a_second_credit_under_a_logged_credits_id_is_refused_as_a_duplicate_not_as_a_refused_profile(ann):
    from botocore.exceptions import ClientError

    at = datetime(2026, 11, 29, 4, 40, tzinfo=UTC)
    credits.apply(credits.Credit(credit_id="once", user_id=ann, units=40, route="redemption"), [], at)
    # Another credit under the same id and moment (no claim to stop it; the very same transaction again
    # would be DynamoDB's idempotent retry): its log entry's condition refuses it. That is not `ProfileRefused`
    # (which callers answer as a missing or refused account): DynamoDB's own refusal
    with pytest.raises(ClientError) as refused:
        credits.apply(credits.Credit(credit_id="once", user_id=ann, units=41, route="redemption"), [], at)
    assert not isinstance(refused.value, credits.ProfileRefused)
    assert credits.cancellation_reasons(refused.value) == ["None", "ConditionalCheckFailed"]  # profile, log
    assert quota(ann) == 40 and [int(e["credited_units"]) for e in top_ups(ann, "once")] == [40]
