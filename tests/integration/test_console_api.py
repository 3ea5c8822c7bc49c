"""The console's JSON API: sign-in with a password, the session cookie and its CSRF guard (the
sign-in limits: test_sign_in.py), the password change, the spend per day, and the operator's routes."""

import json
from datetime import UTC, datetime

import pytest

from gateway.admission import balances, billing
from gateway.api import session
from gateway.auth import authenticate
from gateway.passwords import hash_password, verify_password
from gateway.store import holds
from tests.conftest import api_event, use_environment

PASSWORD = "correct horse battery"


@pytest.fixture
def people(demo, accounts):
    """The demo user (1, role 100 as under make run) and ann (2, a user), each with a password."""
    ann = accounts.users.create_user(username="ann", quota=5_000_000, access_token="ann-access-token")
    session.set_password(1, PASSWORD, accounts.sign_in)
    session.set_password(int(ann["id"]), PASSWORD, accounts.sign_in)
    return {"demo": 1, "ann": int(ann["id"])}


def call(fn, ctx, method, path, *, headers=None, body=None, query=None, resource=None, source_ip="10.0.0.1"):
    event = api_event(method, path, resource=resource or path, headers=headers, query=query,
                      body=None if body is None else json.dumps(body))
    event["requestContext"]["identity"]["sourceIp"] = source_ip
    answer = fn.lambda_handler(event, ctx)
    headers_ = {**(answer.get("headers") or {}),
                **{name: values[-1] for name, values in (answer.get("multiValueHeaders") or {}).items()}}
    return answer["statusCode"], json.loads(answer["body"]), headers_


def sign_in(fn, ctx, username, password=PASSWORD, **kwargs):
    return call(fn, ctx, "POST", "/api/user/login", body={"username": username, "password": password}, **kwargs)


def cookie_of(headers):
    return headers["Set-Cookie"].split(";")[0]


def test_a_password_is_a_salted_slow_hash_never_the_password():
    first, second = hash_password(PASSWORD), hash_password(PASSWORD)
    assert first != second and PASSWORD not in first and first.startswith("scrypt$16384$8$1$")
    assert verify_password(PASSWORD, first) and not verify_password("wrong", first)
    assert not verify_password(PASSWORD, None) and not verify_password(PASSWORD, "plain")


def test_sign_in_opens_a_session_in_an_httponly_samesite_cookie_that_needs_x_api_user(
        account_fn, people, lambda_context, accounts):
    status, body, headers = sign_in(account_fn, lambda_context, "ann")
    assert status == 200 and body["success"] is True and body["data"]["username"] == "ann"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # the local runner is plain http
    assert "password_hash" not in json.dumps(body)
    jar = cookie_of(headers)
    status, me, _ = call(account_fn, lambda_context, "GET", "/api/user/self",
                         headers={"Cookie": jar, "X-Api-User": str(people["ann"])})
    assert status == 200 and me["data"]["username"] == "ann" and me["data"]["access_token"] is None
    # Without X-Api-User (what a cross-site form could send with the cookie), or naming another user: 401.
    for headers_ in ({"Cookie": jar}, {"Cookie": jar, "X-Api-User": "1"}):
        status, refused, _ = call(account_fn, lambda_context, "GET", "/api/user/self", headers=headers_)
        assert status == 401 and refused["success"] is False


def test_over_https_the_cookie_is_secure(account_fn, people, lambda_context):
    _, _, headers = sign_in(account_fn, lambda_context, "ann", headers={"X-Forwarded-Proto": "https"})
    assert "; Secure" in headers["Set-Cookie"]


def test_sign_out_ends_the_session_for_good(account_fn, people, lambda_context):
    _, _, headers = sign_in(account_fn, lambda_context, "ann")
    jar, who = cookie_of(headers), {"X-Api-User": str(people["ann"])}
    status, _, _ = call(account_fn, lambda_context, "POST", "/api/user/logout", headers={"Cookie": jar}, body={})
    assert status == 401  # no other site ends a session: the cookie alone is not enough
    status, _, out = call(account_fn, lambda_context, "POST", "/api/user/logout", headers={"Cookie": jar, **who},
                          body={})
    assert status == 200 and "Max-Age=0" in out["Set-Cookie"]
    status, _, _ = call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": jar, **who})
    assert status == 401


# A wrong password or name, and the sign-in limits: tests/integration/test_sign_in.py.


def test_a_disabled_user_cannot_sign_in_and_its_session_stops(account_fn, people, lambda_context, accounts):
    _, _, headers = sign_in(account_fn, lambda_context, "ann")
    accounts.users.set_user_enabled(people["ann"], False)
    status, _, _ = call(account_fn, lambda_context, "GET", "/api/user/self",
                        headers={"Cookie": cookie_of(headers), "X-Api-User": str(people["ann"])})
    assert status == 401
    assert sign_in(account_fn, lambda_context, "ann")[0] == 401


def test_the_user_changes_its_password_with_the_current_one(account_fn, people, lambda_context):
    who = {"Authorization": "ann-access-token", "X-Api-User": str(people["ann"])}
    status, body, _ = call(account_fn, lambda_context, "PUT", "/api/user/self", headers=who,
                           body={"original_password": "not it", "password": "a new password"})
    assert status == 400 and body["message"].startswith("original_password:")
    status, body, _ = call(account_fn, lambda_context, "PUT", "/api/user/self", headers=who,
                           body={"original_password": PASSWORD, "password": "short"})
    assert status == 400 and body["message"].startswith("password:")
    status, _, _ = call(account_fn, lambda_context, "PUT", "/api/user/self", headers=who,
                        body={"original_password": PASSWORD, "password": "a new password"})
    assert status == 200
    assert sign_in(account_fn, lambda_context, "ann")[0] == 401
    assert sign_in(account_fn, lambda_context, "ann", "a new password")[0] == 200


@pytest.mark.parametrize("body", [None, "[]", {"username": "ann"}, {"username": "ann", "password": 5},
                                  {"username": "a b", "password": "x"}, {"username": "ann", "password": "x" * 257},
                                  {"username": "ann", "password": "x", "extra": 1}])
def test_a_broken_sign_in_is_a_400_naming_the_field(account_fn, people, lambda_context, body):
    event_body = body if body is None or isinstance(body, str) else body
    status, answer, _ = call(account_fn, lambda_context, "POST", "/api/user/login", body=event_body)
    assert status == 400 and answer["success"] is False and answer["message"]


def test_the_spend_per_day_and_model_comes_from_the_day_totals(account_fn, people, lambda_context, accounts):
    from gateway.store.usage import day_total_updates

    now = datetime.now(UTC)
    for model, units in (("m-small", 300), ("m-small", 200), ("m-large", 1000)):
        accounts.usage._db.transact_write_items(TransactItems=day_total_updates(
            accounts.usage.table, user_id=people["ann"], key_id="k1", model=model, units=units, at=now))
    who = {"Authorization": "ann-access-token", "X-Api-User": str(people["ann"])}
    status, body, _ = call(account_fn, lambda_context, "GET", "/api/data/self", headers=who, query={"days": "7"})
    assert status == 200
    rows = {(r["day"], r["model_name"]): (r["quota"], r["count"]) for r in body["data"]["rows"]}
    today = now.date().isoformat()
    assert rows == {(today, "m-small"): (500, 2), (today, "m-large"): (1000, 1)}
    assert body["data"]["end_day"] == today
    status, body, _ = call(account_fn, lambda_context, "GET", "/api/data/self", headers=who, query={"days": "8"})
    assert status == 400 and body["message"].startswith("days:")


def test_only_an_operator_reaches_the_admin_routes(account_fn, people, lambda_context):
    ann = {"Authorization": "ann-access-token", "X-Api-User": str(people["ann"])}
    for method, path, resource in (("GET", "/api/admin/users", None), ("GET", "/api/admin/channels", None),
                                   ("GET", "/api/admin/spend", None),
                                   ("POST", "/api/admin/users/1/quota", "/api/admin/users/{id}/quota")):
        status, body, _ = call(account_fn, lambda_context, method, path, headers=ann, resource=resource,
                               body={"quota": 1} if method == "POST" else None)
        assert status == 403 and body["success"] is False, path
    status, _, _ = call(account_fn, lambda_context, "GET", "/api/admin/users")
    assert status == 401


def test_an_operator_creates_a_user_adds_quota_sets_limits_and_disables_it(account_fn, people, lambda_context,
                                                                           accounts):
    _, _, headers = sign_in(account_fn, lambda_context, "demo")
    op = {"Cookie": cookie_of(headers), "X-Api-User": "1"}
    status, made, _ = call(account_fn, lambda_context, "POST", "/api/admin/users", headers=op,
                           body={"username": "bob", "password": "bob's password", "quota": 1000})
    assert status == 200 and made["data"]["username"] == "bob" and made["data"]["access_token"]
    bob = made["data"]["id"]
    status, taken, _ = call(account_fn, lambda_context, "POST", "/api/admin/users", headers=op,
                            body={"username": "bob", "password": "another password"})
    assert status == 409 and taken["message"].startswith("username:")
    assert sign_in(account_fn, lambda_context, "bob", "bob's password")[0] == 200

    quota_path, quota_resource = f"/api/admin/users/{bob}/quota", "/api/admin/users/{id}/quota"
    status, added, _ = call(account_fn, lambda_context, "POST", quota_path, resource=quota_resource, headers=op,
                            body={"quota": 2500})
    assert status == 200 and added["data"]["quota"] == 3500 and balances.get_user(bob)["quota"] == 3500
    for wrong in ({"quota": 0}, {"quota": -5}, {"quota": "5"}, {"quota": 1.5}, {"quota": True}, {}):
        status, body, _ = call(account_fn, lambda_context, "POST", quota_path, resource=quota_resource,
                               headers=op, body=wrong)
        assert status == 400 and body["message"].startswith("quota"), wrong
    assert balances.get_user(bob)["quota"] == 3500
    status, _, _ = call(account_fn, lambda_context, "POST", "/api/admin/users/999/quota", resource=quota_resource,
                        headers=op, body={"quota": 5})
    assert status == 404

    status, limited, _ = call(account_fn, lambda_context, "PUT", f"/api/admin/users/{bob}/limits",
                              resource="/api/admin/users/{id}/limits", headers=op,
                              body={"rpm": 30, "budget_usd": 2, "budget_period": "daily"})
    assert status == 200 and (limited["data"]["rpm"], limited["data"]["budget_usd"]) == (30, 2)
    assert balances.get_user(bob)["rpm"] == 30

    status, page, _ = call(account_fn, lambda_context, "GET", "/api/admin/users", headers=op,
                           query={"page_size": "2"})
    assert status == 200 and [u["username"] for u in page["data"]["items"]] == ["demo", "ann"]
    status, rest, _ = call(account_fn, lambda_context, "GET", "/api/admin/users", headers=op,
                           query={"page_size": "2", "after": str(page["data"]["next_after"])})
    assert [u["username"] for u in rest["data"]["items"]] == ["bob"] and rest["data"]["next_after"] is None
    assert rest["data"]["items"][0]["rpm"] == 30

    status_path = f"/api/admin/users/{bob}/status"
    status, _, _ = call(account_fn, lambda_context, "PUT", status_path, resource="/api/admin/users/{id}/status",
                        headers=op, body={"status": 2})
    assert status == 200 and balances.get_user(bob)["status"] == 2
    assert sign_in(account_fn, lambda_context, "bob", "bob's password")[0] == 401
    status, _, _ = call(account_fn, lambda_context, "PUT", status_path, resource="/api/admin/users/{id}/status",
                        headers=op, body={"status": True})
    assert status == 400
    status, body, _ = call(account_fn, lambda_context, "PUT", "/api/admin/users/1/status",
                           resource="/api/admin/users/{id}/status", headers=op, body={"status": 2})
    assert status == 400 and body["message"] == "id: an operator cannot disable its own account"
    assert balances.get_user(1)["status"] == 1


def test_the_operators_users_list_shows_the_balance_and_use_the_users_own_dashboard_shows(
        account_fn, people, lambda_context, demo):
    # Given a request held and settled on the demo user's quota lease, still open (not folded)
    _, _, headers = sign_in(account_fn, lambda_context, "demo")
    op = {"Cookie": cookie_of(headers), "X-Api-User": "1"}
    _, before, _ = call(account_fn, lambda_context, "GET", "/api/user/self", headers=op)
    held = billing.reserve_request(authenticate({"x-api-key": demo["key"]}), 500, model="m-small", route="test",
                                   request_id="operator-sees-it")
    billing.settle(held, 120)
    assert holds.open_leases(1), "the lease is still open"
    # Then the operator's Users page reads the same numbers as the user's own dashboard
    _, me, _ = call(account_fn, lambda_context, "GET", "/api/user/self", headers=op)
    _, page, _ = call(account_fn, lambda_context, "GET", "/api/admin/users", headers=op)
    listed = next(u for u in page["data"]["items"] if u["id"] == 1)
    assert me["data"]["used_quota"] == before["data"]["used_quota"] + 120
    assert me["data"]["request_count"] == before["data"]["request_count"] + 1
    assert {n: listed[n] for n in ("quota", "used_quota", "request_count")} == {
        n: me["data"][n] for n in ("quota", "used_quota", "request_count")}


def test_the_operator_sees_the_channels_without_their_keys_and_spend_across_users(
        account_fn, people, lambda_context, accounts):
    from gateway.store.usage import day_total_updates

    now = datetime.now(UTC)
    for user_id, units in ((1, 100), (people["ann"], 250)):
        accounts.usage._db.transact_write_items(TransactItems=day_total_updates(
            accounts.usage.table, user_id=user_id, key_id="k", model="m-small", units=units, at=now))
    op = {"Authorization": "demo-access-token", "X-Api-User": "1"}
    status, spend, _ = call(account_fn, lambda_context, "GET", "/api/admin/spend", headers=op, query={"days": "30"})
    assert status == 200 and spend["data"]["rows"] == [
        {"day": now.date().isoformat(), "model_name": "m-small", "quota": 350, "count": 2,
         "prompt_tokens": 0, "completion_tokens": 0, "token_used": 0}]
    saved = use_environment(GATEWAY_CHANNELS_FILE=None, GATEWAY_SIMULATOR_URL="http://127.0.0.1:9")
    try:
        status, channels, _ = call(account_fn, lambda_context, "GET", "/api/admin/channels", headers=op)
    finally:
        use_environment(**saved)
    assert status == 200 and {c["protocol"] for c in channels["data"]} >= {"chat", "messages"}
    assert all({"name", "protocol", "base_url", "models", "priority", "weight", "state", "cooling_until",
                "last_error"} <= set(c) and c["state"] == "healthy" and "api_key" not in c for c in channels["data"])
