"""A refused key or access token is told the real cause (revoked, deleted, its user disabled,
replaced), enabling a user takes effect at once, and a deleted key's log entries keep its name."""

from __future__ import annotations

import uuid

import pytest

from gateway import admin
from gateway.admission import billing
from gateway.api import account, requestlog
from gateway.auth import authenticate, clear_cache
from gateway.errors import AuthenticationFailed
from tests.conftest import use_environment


def _refusal(key: str) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate({"x-api-key": key})
    return refused.value.message


def test_each_refused_key_names_its_cause(demo):
    revoked = admin.run(["issue-key", "--user", "1", "--name", "r"])
    deleted = admin.run(["issue-key", "--user", "1", "--name", "d"])
    admin.run(["revoke-key", revoked["key_id"]])
    admin.run(["delete-key", deleted["key_id"]])
    assert _refusal(revoked["key"]) == "the API key has been revoked"
    assert _refusal(deleted["key"]) == "the API key has been deleted"
    assert _refusal("sk-" + "n" * 48) == "the API key is not valid"
    other = admin.run(["create-user", "--username", "bo"])
    kept = admin.run(["issue-key", "--user", str(other["user_id"]), "--name", "k"])
    admin.run(["disable-user", "--user", str(other["user_id"])])
    assert _refusal(kept["key"]) == "the API key's user is disabled"


def test_an_enabled_users_key_works_at_once_even_with_the_key_cache(demo):
    saved = use_environment(GATEWAY_KEY_CACHE_SECONDS="30")
    try:
        clear_cache()
        other = admin.run(["create-user", "--username", "bo"])
        key = admin.run(["issue-key", "--user", str(other["user_id"]), "--name", "k"])["key"]
        admin.run(["disable-user", "--user", str(other["user_id"])])
        assert _refusal(key) == "the API key's user is disabled"
        admin.run(["enable-user", "--user", str(other["user_id"])])
        assert authenticate({"x-api-key": key}).user_id == other["user_id"]
    finally:
        use_environment(**saved)
        clear_cache()


def test_a_reservation_of_a_user_disabled_meanwhile_says_so_not_quota(demo):
    principal = authenticate({"x-api-key": demo["key"]})
    admin.run(["disable-user", "--user", "1"])
    admin.run(["enable-user", "--user", "1"])  # the key is active again...
    from gateway.store.table import user_pk  # ...but the profile is disabled now
    from gateway.store.users import UsersRepository
    accounts = UsersRepository()
    accounts._db.update_item(TableName=accounts.table, Key={"pk": {"S": user_pk(1)}, "sk": {"S": "PROFILE"}},
                             UpdateExpression="SET #s = :d", ExpressionAttributeNames={"#s": "status"},
                             ExpressionAttributeValues={":d": {"N": "2"}})
    with pytest.raises(AuthenticationFailed, match="user is disabled"):
        billing.reserve_request(principal, 10, model="m-small", route="/r", request_id=uuid.uuid4().hex)


def test_a_replaced_access_token_says_it_was_replaced(demo):
    old = demo["access_token"]
    fresh = admin.run(["set-access-token", "--user", "1"])["access_token"]
    with pytest.raises(AuthenticationFailed, match="replaced by a newer one"):
        account.access_token_user(old, "1")
    assert account.access_token_user(fresh, "1") == 1
    with pytest.raises(AuthenticationFailed, match="not valid"):
        account.access_token_user("never-issued", "1")
    with pytest.raises(AuthenticationFailed, match="does not belong"):
        account.access_token_user(fresh, "2")


def test_a_deleted_keys_log_entries_keep_its_name(demo):
    issued = admin.run(["issue-key", "--user", "1", "--name", "laptop"])
    held = billing.reserve_request(authenticate({"x-api-key": issued["key"]}), 100, model="m-small", route="/r",
                                   request_id=uuid.uuid4().hex)
    billing.settle(held, 40)
    admin.run(["delete-key", issued["key_id"]])
    items = requestlog.account_log(1, None)["data"]["items"]
    assert [item["token_name"] for item in items] == ["laptop"]
    assert len(requestlog.account_log(1, {"token_name": "laptop"})["data"]["items"]) == 1
    assert issued["key_id"] not in [k["key_id"] for k in admin.run(["list-keys", "--user", "1"])["keys"]]
