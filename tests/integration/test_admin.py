"""The admin command line against the emulator."""

import json

import pytest

from gateway import admin
from gateway.admission import balances
from gateway.auth import authenticate
from gateway.store.users import NameTaken


def test_create_user_issue_key_add_quota_and_revoke(store, capsys):
    user = admin.run(["create-user", "--username", "carla", "--quota-usd", "2"])
    assert user["quota"] == 1_000_000 and user["access_token"]
    issued = admin.run(["issue-key", "--user", str(user["user_id"]), "--name", "ci", "--quota", "300",
                        "--models", "m-small, m-large"])
    assert issued["key"].startswith("sk-") and issued["allowed_models"] == ["m-small", "m-large"]
    principal = authenticate({"Authorization": f"Bearer {issued['key']}"})
    assert principal.user_id == user["user_id"] and principal.may_use("m-large") and not principal.may_use("x")

    # A changed authorized quota accumulates on top of the previous one
    assert admin.run(["add-quota", "--user", str(user["user_id"]), "--usd", "1"])["quota"] == 1_500_000
    assert admin.run(["add-quota", "--key", issued["key_id"], "--units", "200"])["remain_quota"] == 500

    listed = admin.run(["list-keys", "--user", str(user["user_id"])])["keys"]
    assert [k["key_id"] for k in listed] == [issued["key_id"]] and "key" not in listed[0]
    admin.run(["revoke-key", issued["key_id"]])
    assert admin.run(["list-keys", "--user", str(user["user_id"])])["keys"][0]["status"] == "revoked"

    usage = admin.run(["usage", "--user", str(user["user_id"])])
    assert usage["units"] == 0 and usage["quota_left"] == 1_500_000


def test_main_prints_json_and_fails_cleanly_on_unknown_ids(store, capsys):
    assert admin.main(["revoke-key", "nosuchkey"]) == 1
    assert "not found" in capsys.readouterr().err
    assert admin.main(["create-user", "--username", "dee", "--id", "42"]) == 0
    assert json.loads(capsys.readouterr().out)["user_id"] == 42
    assert admin.main(["create-user", "--username", "dee2", "--id", "42"]) == 2


def test_amounts_must_be_valid(store):
    with pytest.raises(SystemExit):
        admin.run(["create-user", "--username", "x", "--quota-usd", "-1"])


@pytest.mark.parametrize("days", ["0", "-3"])
def test_issue_key_refuses_an_expiry_of_no_days_rather_than_issuing_a_key_that_never_expires(accounts, demo, days):
    with pytest.raises(ValueError, match="expires-in-days"):
        admin.run(["issue-key", "--user", "1", "--name", "x", "--expires-in-days", days])
    assert [k["name"] for k in balances.list_keys(1)] == ["demo"]


def test_a_page_of_users_is_at_most_its_limit_by_id_and_says_where_to_go_on(accounts, monkeypatch):
    # Given users 1, 2, 4 and 5 (3 was never created: the walk of ids skips it)
    for user_id in (1, 2, 4, 5):
        accounts.users.create_user(username=f"u{user_id}", user_id=user_id)
    page = accounts.users.users_page

    def ids(found):
        return [int(u["id"]) for u in found[0]], found[1]

    assert ids(page(2)) == ([1, 2], 2)
    assert ids(page(2, after=2)) == ([4, 5], None)  # the last page ends on the highest id: nothing after it
    assert ids(page(3)) == ([1, 2, 4], 4)
    assert ids(page(3, after=4)) == ([5], None)
    assert ids(page(10)) == ([1, 2, 4, 5], None)

    # and a page reads the ids up to the highest one taken, never past it (each key read costs)
    asked: list[str] = []
    db = accounts.users._db
    real = db.batch_get_item

    def batch_get_item(**params):
        asked.extend(k["pk"]["S"] for keys in params["RequestItems"].values() for k in keys["Keys"])
        return real(**params)

    monkeypatch.setattr(db, "batch_get_item", batch_get_item)
    page(10)
    assert asked == [f"USER#{i}" for i in range(1, 6)]


def test_setting_fields_of_a_user_that_does_not_exist_is_user_not_found_and_creates_nothing(accounts):
    from gateway.store.table import UserNotFound

    with pytest.raises(UserNotFound):
        accounts.users.set_user_fields(99, {"display_name": "ghost"})
    assert accounts.users.raw_user(99, consistent=True) is None
    accounts.users.create_user(username="real", user_id=98)
    assert accounts.users.set_user_fields(98, {"display_name": "Real"})["display_name"] == "Real"


def test_a_console_session_is_read_strongly_consistent(accounts, monkeypatch):
    # A session is used the moment sign-in answers (another instance may serve the next request)
    # and must stop the moment sign-out deletes it: an eventually consistent read could miss either.
    reads = []
    real = accounts.sign_in._db.get_item

    def get_item(**params):
        if params["Key"]["pk"]["S"].startswith("SESSION#"):
            reads.append(params.get("ConsistentRead"))
        return real(**params)

    monkeypatch.setattr(accounts.sign_in._db, "get_item", get_item)
    accounts.sign_in.put_session("h" * 64, 1, 2**31)
    assert accounts.sign_in.get_session("h" * 64)["user_id"] == 1
    accounts.sign_in.delete_session("h" * 64)
    assert accounts.sign_in.get_session("h" * 64) is None
    assert reads == [True, True]


def test_a_successful_sign_in_gives_back_exactly_its_own_attempt_to_its_address(accounts):
    from gateway.store.signin import SignInCounter

    counter = SignInCounter("addr:192.0.2.5", 900, 50, 2700)
    for _ in range(3):
        assert accounts.sign_in.admit_sign_in([counter], 1000) is None
    accounts.sign_in.forget_sign_in_attempt("addr:192.0.2.5", 900, reset=False)
    assert int(accounts.sign_in.sign_in_counter("addr:192.0.2.5", 900)["attempts"]) == 2


def test_a_user_enabled_again_is_status_1_as_new_api_shows_it(accounts):
    """new-api's user status (common/constants.go): `UserStatusEnabled = 1 // don't use 0, 0 is the default
    value!`, `UserStatusDisabled = 2`."""
    user = accounts.users.create_user(username="toggled", quota=10)
    user_id = int(user["id"])
    accounts.users.set_user_enabled(user_id, False)
    assert int(accounts.users.raw_user(user_id, consistent=True)["status"]) == 2
    accounts.users.set_user_enabled(user_id, True)
    assert int(accounts.users.raw_user(user_id, consistent=True)["status"]) == 1


def test_a_second_user_of_the_same_name_in_another_case_is_never_made(accounts):
    # A name is taken once, whatever its case, with or without a password (issue 43).
    first = accounts.users.create_user(username="Casey")
    accounts.sign_in.set_password(int(first["id"]), "hash-1")
    with pytest.raises(NameTaken):
        accounts.users.create_user(username="casey")
    assert accounts.users.raw_user(int(first["id"]), consistent=True).get("password_hash") == "hash-1"
