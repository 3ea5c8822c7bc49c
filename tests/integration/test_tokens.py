"""Self-service keys (/api/token/): new-api's shape, and the ownership rules a user cannot get around."""

import json
import time

import pytest

from gateway.admission import balances
from gateway.auth import authenticate
from gateway.errors import AuthenticationFailed
from tests.conftest import api_event


@pytest.fixture
def users(demo, accounts):
    """User 1 (the demo, 1000 USD) and user 2 (10 USD, rpm 60, a daily budget of 2 USD), each with an access token."""
    accounts.users.create_user(username="other", user_id=2, quota=5_000_000, access_token="other-access-token")
    accounts.users.set_limits(user_id=2, limits={"rpm": 60, "max_parallel": 4, "budget_units": 1_000_000,
                                           "budget_period": "daily"})
    return {1: {"Authorization": demo["access_token"], "X-Api-User": "1"},
            2: {"Authorization": "other-access-token", "X-Api-User": "2"}}


def call(fn, ctx, method, path, headers, body=None, query=None):
    resource = "/api/token/{id}" if path.rstrip("/").count("/") == 3 else "/api/token"
    answer = fn.lambda_handler(api_event(method, path, resource=resource, headers=headers, query=query,
                                         body=None if body is None else json.dumps(body)), ctx)
    return answer["statusCode"], json.loads(answer["body"])


def test_a_created_key_is_shown_once_and_listed_newest_first_in_new_apis_shape(account_fn, users, lambda_context):
    status, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {
        "name": "laptop", "expired_time": -1, "remain_quota": 1000, "unlimited_quota": False, "rpm": 10})
    assert status == 200 and created["success"] is True
    token = created["data"]
    assert token["key"].startswith("sk-") and len(token["key"]) == 51
    assert (token["name"], token["remain_quota"], token["rpm"], token["user_id"], token["status"]) == (
        "laptop", 1000, 10, 2, 1)
    call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "second"})
    status, listed = call(account_fn, lambda_context, "GET", "/api/token/", users[2], query={"p": "0", "size": "1"})
    assert status == 200 and listed["success"] is True
    page = listed["data"]
    assert (page["total"], page["page"], page["page_size"], len(page["items"])) == (2, 0, 1, 1)
    _, second_page = call(account_fn, lambda_context, "GET", "/api/token/", users[2], query={"p": "1", "size": "1"})
    (first,) = second_page["data"]["items"]
    assert first["id"] == token["id"] and first["key"] != token["key"] and token["key"].endswith(first["key"][-4:])
    # The key works as an API key at once.
    assert authenticate({"Authorization": f"Bearer {token['key']}"}).user_id == 2


@pytest.mark.parametrize("owner,intruder", [(2, 1), (1, 2)])  # a key of a higher user id, and of a lower one
def test_a_user_never_sees_or_touches_another_users_key(account_fn, users, lambda_context, owner, intruder):
    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[owner], {"name": "mine"})
    theirs = created["data"]["id"]
    _, listed = call(account_fn, lambda_context, "GET", "/api/token/", users[intruder])
    assert theirs not in [t["id"] for t in listed["data"]["items"]]
    for method, path, body, query in (
            ("PUT", "/api/token/", {"id": theirs, "name": "stolen"}, None),
            ("PUT", "/api/token/", {"id": theirs, "status": 2}, {"status_only": "true"}),
            ("DELETE", f"/api/token/{theirs}", None, None)):
        status, answer = call(account_fn, lambda_context, method, path, users[intruder], body, query)
        assert status == 404 and answer["success"] is False and "no key" in answer["message"], (method, answer)
    _, mine = call(account_fn, lambda_context, "GET", "/api/token/", users[owner])
    assert [(t["name"], t["status"]) for t in mine["data"]["items"] if t["id"] == theirs] == [("mine", 1)]


@pytest.mark.parametrize("body,field", [
    ({"rpm": 61}, "rpm"), ({"max_parallel": 5}, "max_parallel"), ({"budget_usd": 3, "budget_period": "daily"},
                                                                   "budget_usd"),
    ({"remain_quota": 5_000_001}, "remain_quota"), ({"model_limits_enabled": True, "model_limits": "no-such-model"},
                                                    "model_limits"),
    ({"model_limits_enabled": True, "model_limits": " , "}, "model_limits"),
    ({"expired_time": 0}, "expired_time"), ({"expired_time": 1000}, "expired_time"),
    ({"budget_usd": 1}, "budget_period"), ({"rpm": -1}, "rpm"), ({"rpm": "5"}, "rpm"), ({"quota": 1}, "quota"),
    ({"used_quota": 0}, "used_quota"), ({"user_id": 1}, "user_id"), ({"name": "n" * 51}, "name"),
    ({"budget_usd": 1, "budget_period": "hourly"}, "budget_period"),
])
def test_a_key_never_allows_more_than_its_user_and_bad_fields_are_named(account_fn, users, accounts, lambda_context,
                                                                         body, field):
    status, answer = call(account_fn, lambda_context, "POST", "/api/token/", users[2], body)
    assert status == 400 and answer["success"] is False and field in answer["message"], answer
    assert balances.list_keys(2) == []


def test_updating_a_key_keeps_it_within_the_user_and_never_raises_the_users_quota(account_fn, users, accounts,
                                                                                  lambda_context):
    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "k", "rpm": 5})
    token_id = created["data"]["id"]
    status, answer = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": token_id, "rpm": 61})
    assert status == 400 and "rpm" in answer["message"]
    status, answer = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {
        "id": token_id, "name": "renamed", "remain_quota": 5_000_000, "budget_usd": 1.5, "budget_period": "daily"})
    assert status == 200, answer
    data = answer["data"]
    assert (data["name"], data["rpm"], data["remain_quota"], data["budget_usd"], data["budget_period"]) == (
        "renamed", 5, 5_000_000, 1.5, "daily")
    assert balances.get_user(2)["quota"] == 5_000_000  # the user's own quota never moves
    status, answer = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": token_id, "rpm": 0})
    assert status == 200 and answer["data"]["rpm"] == 0 and "rpm" not in accounts.keys.user_key(2, token_id)


def test_disabling_and_deleting_a_key_refuse_it_once_the_key_cache_has_passed(account_fn, users, lambda_context):
    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "k"})
    token, secret = created["data"]["id"], created["data"]["key"]
    auth = {"Authorization": f"Bearer {secret}"}
    assert authenticate(auth).key_id == token
    status, answer = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": token, "status": 2},
                          {"status_only": "true"})
    assert status == 200 and answer["data"]["status"] == 2
    from gateway import auth as auth_module

    auth_module.clear_cache()  # what the key cache's 5 s do in a warm function
    with pytest.raises(AuthenticationFailed):
        authenticate(auth)
    status, answer = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": token, "status": 1},
                          {"status_only": "true"})
    assert status == 200 and answer["data"]["status"] == 1
    auth_module.clear_cache()
    assert authenticate(auth).key_id == token
    status, answer = call(account_fn, lambda_context, "DELETE", f"/api/token/{token}", users[2])
    assert (status, answer) == (200, {"success": True, "message": ""})
    auth_module.clear_cache()
    with pytest.raises(AuthenticationFailed):
        authenticate(auth)
    assert call(account_fn, lambda_context, "DELETE", f"/api/token/{token}", users[2])[0] == 404


def test_a_key_the_operator_revoked_cannot_be_enabled_by_its_user(account_fn, users, accounts, lambda_context):
    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "k"})
    accounts.keys.revoke_key(created["data"]["id"])
    status, answer = call(account_fn, lambda_context, "PUT", "/api/token/", users[2],
                          {"id": created["data"]["id"], "status": 1}, {"status_only": "true"})
    assert status == 400 and "revoked" in answer["message"]
    assert accounts.keys.user_key(2, created["data"]["id"])["status"] == "revoked"


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "other-access-token"}, {"Authorization": "other-access-token", "X-Api-User": "1"},
    {"Authorization": "Bearer sk-" + "d" * 48, "X-Api-User": "1"},
])
def test_the_token_routes_want_the_users_access_token(account_fn, users, lambda_context, headers):
    for method, path, body in (("GET", "/api/token/", None), ("POST", "/api/token/", {"name": "x"}),
                               ("DELETE", "/api/token/abc", None)):
        status, answer = call(account_fn, lambda_context, method, path, headers, body)
        assert status == 401 and answer["success"] is False


def test_pages_and_expiry_are_checked(account_fn, users, lambda_context):
    for query in ({"p": "-1"}, {"size": "0"}, {"size": "101"}, {"p": "x"}):
        status, answer = call(account_fn, lambda_context, "GET", "/api/token/", users[2], query=query)
        assert status == 400 and list(query)[0] in answer["message"]
    later = int(time.time()) + 3600
    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "k", "expired_time": later})
    assert created["data"]["expired_time"] == later


@pytest.fixture
def key_defaults():
    from tests.conftest import use_environment

    saved = use_environment(GATEWAY_DEFAULT_KEY_RPM="30", GATEWAY_DEFAULT_KEY_MAX_PARALLEL="8",
                            GATEWAY_DEFAULT_KEY_BUDGET_USD="5", GATEWAY_DEFAULT_KEY_BUDGET_PERIOD="weekly")
    yield
    use_environment(**saved)


def test_a_new_key_gets_the_default_limits_capped_by_its_users_own(account_fn, users, lambda_context,
                                                                    key_defaults):
    from gateway import admin

    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "defaults"})
    token = created["data"]
    # User 2 allows rpm 60, max_parallel 4 and 2 USD a day: the defaults above it are cut to it.
    assert (token["rpm"], token["max_parallel"], token["budget_usd"], token["budget_period"]) == (
        30, 4, 2.0, "weekly")
    _, own = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "own", "rpm": 5})
    assert own["data"]["rpm"] == 5 and own["data"]["max_parallel"] == 4
    issued = admin.run(["issue-key", "--user", "1", "--name", "ops"])
    assert issued["limits"] == {"rpm": 30, "tpm": 0, "max_parallel": 8, "budget_usd": 5.0, "budget_period": "weekly"}


def test_a_limit_the_operator_set_on_a_key_is_marked_and_its_owner_may_tighten_it_never_loosen_or_clear_it(
        account_fn, users, accounts, lambda_context):
    """Issue 33, row 8: `PUT /api/token/` with rpm 0 and budget 0 cleared an operator's limits."""
    from gateway import admin

    _, created = call(account_fn, lambda_context, "POST", "/api/token/", users[2], {"name": "shared"})
    key_id = created["data"]["id"]
    admin.run(["set-limits", "--key", key_id, "--rpm", "10", "--budget-usd", "1", "--budget-period", "daily"])
    _, listed = call(account_fn, lambda_context, "GET", "/api/token/", users[2])
    (token,) = [t for t in listed["data"]["items"] if t["id"] == key_id]
    assert token["operator_limits"] == {"rpm": 10, "budget_usd": 1.0, "budget_period": "daily"}
    for change, field in (({"rpm": 0}, "rpm"), ({"rpm": 11}, "rpm"), ({"budget_usd": 0}, "budget_usd"),
                          ({"budget_usd": 1.5}, "budget_usd"), ({"budget_period": "weekly"}, "budget_usd")):
        status, body = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": key_id, **change})
        assert status == 400 and body["message"].startswith(f"{field}: the operator set this key's"), change
    record = accounts.keys.user_key(2, key_id)
    assert (record["rpm"], record["budget_units"], record["budget_period"]) == (10, 500_000, "daily")
    # Tighter is fine, and a limit the operator did not set stays the owner's to set and clear.
    status, body = call(account_fn, lambda_context, "PUT", "/api/token/", users[2],
                        {"id": key_id, "rpm": 5, "budget_usd": 0.5, "max_parallel": 2})
    assert status == 200 and (body["data"]["rpm"], body["data"]["budget_usd"], body["data"]["max_parallel"]) == (
        5, 0.5, 2)
    status, body = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": key_id, "max_parallel": 0})
    assert status == 200 and body["data"]["max_parallel"] == 0
    # Back up to the operator's value is within it; past it is not.
    assert call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": key_id, "rpm": 10})[0] == 200
    # The operator clears its rpm: the mark goes, and the owner may clear it too.
    admin.run(["set-limits", "--key", key_id, "--rpm", "0"])
    status, body = call(account_fn, lambda_context, "PUT", "/api/token/", users[2], {"id": key_id, "rpm": 0})
    assert status == 200 and body["data"]["rpm"] == 0
    assert body["data"]["operator_limits"] == {"budget_usd": 1.0, "budget_period": "daily"}


def test_limits_given_to_issue_key_are_the_operators(account_fn, users, accounts, lambda_context):
    from gateway import admin

    issued = admin.run(["issue-key", "--user", "2", "--name", "ops", "--rpm", "20"])
    assert issued["operator_limits"] == {"rpm": 20}
    status, body = call(account_fn, lambda_context, "PUT", "/api/token/", users[2],
                        {"id": issued["key_id"], "rpm": 0})
    assert status == 400 and body["message"].startswith("rpm: the operator set this key's rpm to 20")


def test_an_owners_change_checked_against_an_old_mark_is_not_written(users, accounts, monkeypatch):
    """The owner's PUT reads the key, checks its marks, then writes: an operator's limit set in
    between wins (a 409), never overwritten by a value checked against the marks before it."""
    from gateway import admin
    from gateway.api import tokens
    from gateway.errors import Conflict
    from gateway.schemas.tokens import TokenUpdate

    _, record = accounts.keys.create_key(2, name="raced")
    stale = dict(record)  # what the owner's request read, before the operator's change
    admin.run(["set-limits", "--key", record["key_id"], "--rpm", "10"])
    monkeypatch.setattr(accounts.keys, "user_key", lambda user_id, key_id: stale)
    with pytest.raises(Conflict, match="the operator changed this key's limits meanwhile"):
        tokens.update_token(2, TokenUpdate(id=record["key_id"], rpm=50), accounts.keys)
    monkeypatch.undo()
    assert accounts.keys.user_key(2, record["key_id"])["rpm"] == 10


def test_a_key_limited_after_its_lease_opened_shows_the_quota_it_was_given():
    """An edit makes an unlimited key limited while a lease of it is open: that lease was granted
    from the user's quota, not the key's, so none of it counts in the key's remainder."""
    key = {"pk": "KEY#h", "key_id": "k1", "unlimited": False, "remain_quota": 750_000, "used_quota": 10}
    leases = [{"key_hash": "h", "key_id": "k1", "limited_key": False, "granted": 200_000, "spent": 4},
              {"key_hash": "h", "key_id": "k1", "limited_key": True, "granted": 1_000, "spent": 1}]
    view = balances.key_view(key, leases)
    assert (view["remain_quota"], view["used_quota"]) == (750_999, 15)
