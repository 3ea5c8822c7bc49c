"""Account endpoints: exact fields and units, moving by exactly the ledger's amounts."""

import json
import time
from datetime import UTC

import pytest

from gateway.admission import balances, billing
from gateway.auth import authenticate
from tests.conftest import api_event


def get(fn, ctx, path, headers=None, query=None):
    answer = fn.lambda_handler(api_event("GET", path, headers=headers, query=query), ctx)
    return answer["statusCode"], json.loads(answer["body"])


def charge(principal, units, request_id):
    reservation = billing.reserve(principal, units * 2, model="m-small", route="test", reservation_id=request_id)
    billing.settle(reservation, units)


def test_usage_is_the_ledger_sum_in_cents_within_the_dates(account_fn, demo, lambda_context):
    auth = {"Authorization": f"Bearer {demo['key']}"}
    principal = authenticate(auth)
    assert get(account_fn, lambda_context, "/v1/dashboard/billing/usage", auth) == (
        200, {"object": "list", "total_usage": 0})
    charge(principal, 12_345, "a")  # 0.02469 USD = 2.469 cents
    charge(principal, 500_000, "b")  # 1 USD = 100 cents
    status, body = get(account_fn, lambda_context, "/v1/dashboard/billing/usage", auth)
    assert status == 200 and body == {"object": "list", "total_usage": 102.469}
    now_ms = int(time.time() * 1000)
    _, later = get(account_fn, lambda_context, "/v1/dashboard/billing/usage", auth,
                   {"start_date": str(now_ms + 60_000), "end_date": str(now_ms + 120_000)})
    assert later["total_usage"] == 0
    _, window = get(account_fn, lambda_context, "/v1/dashboard/billing/usage", auth,
                    {"start_date": str(now_ms - 60_000), "end_date": str(now_ms + 60_000)})
    assert window["total_usage"] == 102.469


def test_both_usage_dates_are_inclusive_to_the_millisecond_and_to_the_day(account_fn, demo, accounts,
                                                                         lambda_context):
    from datetime import datetime

    auth = {"Authorization": f"Bearer {demo['key']}"}
    charge(authenticate(auth), 500_000, "edge")  # 100 cents
    (entry,) = accounts.usage.ledger(1)
    at = str(entry["at"])  # the entry's own millisecond
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    for query in ({"start_date": at, "end_date": at}, {"end_date": today}, {"start_date": today, "end_date": today}):
        _, body = get(account_fn, lambda_context, "/v1/dashboard/billing/usage", auth, query)
        assert body["total_usage"] == 100, query


@pytest.mark.parametrize("query,field", [
    ({"start_date": "yesterday"}, "start_date"), ({"end_date": "12-11-2026"}, "end_date"),
    ({"start_date": "2000", "end_date": "1000"}, "start_date"),
])
def test_bad_dates_get_400_naming_the_field(account_fn, demo, lambda_context, query, field):
    status, body = get(account_fn, lambda_context, "/v1/dashboard/billing/usage",
                       {"Authorization": f"Bearer {demo['key']}"}, query)
    assert status == 400 and body["error"]["param"] == field and field in body["error"]["message"]


def test_subscription_reports_the_keys_authorized_quota(account_fn, demo, accounts, lambda_context):
    status, body = get(account_fn, lambda_context, "/v1/dashboard/billing/subscription",
                       {"Authorization": f"Bearer {demo['key']}"})
    assert status == 200 and body == {
        "object": "billing_subscription", "has_payment_method": False, "soft_limit_usd": 100000000,
        "hard_limit_usd": 100000000, "system_hard_limit_usd": 100000000, "access_until": 0}
    expires = int(time.time()) + 3600
    key, record = accounts.keys.create_key(1, name="limited", quota=5_000_000, expires_at=expires)  # 10 USD
    charge(authenticate({"x-api-key": key}), 1_000_000, "c")
    accounts.keys.add_key_quota(record["key_id"], 2_500_000)  # accumulates: 12 USD authorized in all
    _, body = get(account_fn, lambda_context, "/v1/dashboard/billing/subscription", {"Authorization": f"Bearer {key}"})
    assert (body["hard_limit_usd"], body["soft_limit_usd"], body["access_until"]) == (15, 15, expires)


def test_user_self_returns_the_account_record(account_fn, demo, lambda_context):
    principal = authenticate({"Authorization": f"Bearer {demo['key']}"})
    charge(principal, 1_000, "d")
    status, body = get(account_fn, lambda_context, "/api/user/self",
                       {"Authorization": demo["access_token"], "X-Api-User": "1"})
    assert status == 200 and body["success"] is True and body["message"] == ""
    record = body["data"]
    assert record["id"] == 1 and record["username"] == "demo"
    assert (record["password"], record["verification_code"]) == ("", "")
    assert record["access_token"] is None and record["deleted_at"] is None
    assert (record["quota"], record["used_quota"], record["request_count"]) == (500_000_000 - 1_000, 1_000, 1)
    assert set(record) >= {"github_id", "wechat_id", "oidc_id", "google_id", "aff_code", "group_ratio", "topup_ratio"}
    assert (record["aff_count"], record["aff_quota"], record["aff_history_quota"]) == (0, 0, 0)  # none invited yet


def test_a_new_access_token_replaces_the_old_whichever_hash_sorts_first(account_fn, demo, lambda_context, accounts):
    from gateway import keys

    # Given two tokens, their hashes in a known order (the table keys on the hash)
    low, high = sorted(["replacing-token-one", "replacing-token-two", "replacing-token-three"],
                       key=keys.hash_secret)[:2]
    for old, new in ((low, high), (high, low)):
        accounts.users.set_access_token(1, old)
        accounts.users.set_access_token(1, new)
        # Then the old one says it was replaced, the new one works
        status, body = get(account_fn, lambda_context, "/api/user/self", {"Authorization": old, "X-Api-User": "1"})
        assert status == 401 and "replaced by a newer one" in body["message"]
        status, _ = get(account_fn, lambda_context, "/api/user/self", {"Authorization": new, "X-Api-User": "1"})
        assert status == 200
    # and setting the same token again keeps it working
    accounts.users.set_access_token(1, low)
    status, _ = get(account_fn, lambda_context, "/api/user/self", {"Authorization": low, "X-Api-User": "1"})
    assert status == 200


@pytest.mark.parametrize("headers", [
    {"Authorization": "demo-access-token"}, {"Authorization": "demo-access-token", "X-Api-User": "2"},
    {"Authorization": "wrong", "X-Api-User": "1"}, {"X-Api-User": "1"},
    {"Authorization": "Bearer " + "sk-" + "d" * 48, "X-Api-User": "1"},
])
def test_user_self_needs_the_token_and_user_to_match(account_fn, demo, lambda_context, headers):
    status, body = get(account_fn, lambda_context, "/api/user/self", headers)
    assert status == 401 and body["success"] is False and body["data"] is None


def test_account_routes_need_a_key(account_fn, store, lambda_context):
    status, body = get(account_fn, lambda_context, "/v1/dashboard/billing/usage")
    assert status == 401 and body["error"]["type"] == "authentication_error"


def test_open_reservations_are_indexed_under_every_shard_the_sweeper_reads_and_no_other():
    from gateway.store.holds import HOLD_SHARDS, hold_index_keys, hold_shard

    shards = {hold_index_keys(f"r{n}", 1_800_000_000)["gsi1pk"] for n in range(200)}
    assert shards == {hold_shard(number) for number in range(HOLD_SHARDS)}


def test_a_keys_balances_are_read_strongly_consistent(demo, accounts, stale_replica):
    """What users read as a key's quota (its record and its open leases) is never a replica's
    stale view: each read of the record is consistent."""
    from gateway import keys

    stale_replica("KEY")
    key = balances.get_key(keys.hash_secret(demo["key"]))
    assert key is not None and key["user_id"] == 1


def test_a_users_quota_is_read_strongly_consistent_after_an_operators_credit(demo, accounts, stale_replica):
    """The quota an operator's credit answers (and the demo account's start decides on) is the
    profile as written, never a replica's stale view: the profile is read consistently."""
    user = accounts.users.create_user(username="credited", quota=100)
    stale_replica("PROFILE")
    assert balances.add_user_quota(int(user["id"]), 50) == 150
    assert balances.get_user(int(user["id"]))["quota"] == 150


def test_an_invitation_code_is_found_by_a_strongly_consistent_read(demo, accounts, stale_replica):
    """A code handed out a moment ago (the inviter's page, then the sign-up) finds its user even
    where a replica has not caught up: the code's pointer is read consistently."""
    user = accounts.users.create_user(username="inviter", quota=0)
    code = balances.get_user(int(user["id"]))["aff_code"]
    stale_replica("AFF")
    assert accounts.users.user_id_for_aff_code(code) == int(user["id"])
