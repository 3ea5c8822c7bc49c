"""What an attacker and a careless operator found on the account routes (issue 43), each through the
public routes: names taken once, sessions ended by a password change, the operators' roles, the
option, channel, key and sign-out rules."""

from __future__ import annotations

import json
import re

import pytest

from gateway import options
from gateway.api import session
from gateway.passwords import hash_password
from gateway.store.options import OptionsRepository
from gateway.store.users import UsersRepository
from tests.conftest import use_environment
from tests.integration.test_console_api import PASSWORD, call, cookie_of, sign_in

ROOT = {"Authorization": "demo-access-token", "X-Api-User": "1"}


@pytest.fixture
def outbox(tmp_path, store):
    folder = tmp_path / "outbox"
    saved = use_environment(GATEWAY_MAIL_OUTBOX=str(folder))
    options.forget()
    yield folder
    use_environment(**saved)
    options.forget()


def set_option(key: str, value: str) -> None:
    OptionsRepository().put_option(key, value, by=1, at=0)
    options.forget()


def mails(folder) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def register(commerce_fn, ctx, username, password="a long password", **more):
    return call(commerce_fn, ctx, "POST", "/api/user/register",
                body={"username": username, "password": password, **more})[:2]


# --- 1: a name is taken once, with or without a password, in any case -----------------------------

def test_sign_up_cannot_take_the_name_of_an_account_without_a_password_in_any_case(
        commerce_fn, lambda_context, outbox, demo, accounts):
    accounts.users.create_user(username="OpsAdmin")  # `create-user`: no password yet
    for name in ("demo", "DEMO", "Demo", "opsadmin", "OPSADMIN"):
        status, body = register(commerce_fn, lambda_context, name)
        assert status == 409 and "username" in body["message"], (name, body)
    # The operator's set-password still works for both (nobody else holds the names).
    session.set_password(1, "a long passphrase", accounts.sign_in)
    assert accounts.sign_in.user_id_for_username("DEMO") == 1


def test_a_crash_right_after_the_profile_leaves_an_account_that_signs_in(
        commerce_fn, account_fn, lambda_context, outbox, accounts, monkeypatch):
    def crash(self, user_id, code):
        raise RuntimeError("the instance died after the profile was written")

    monkeypatch.setattr(UsersRepository, "claim_aff_code", crash)
    status, _ = register(commerce_fn, lambda_context, "crashy")
    assert status == 500
    monkeypatch.undo()
    status, body, _ = sign_in(account_fn, lambda_context, "crashy", "a long password")
    assert status == 200, body
    assert register(commerce_fn, lambda_context, "Crashy")[0] == 409  # and its name is its own


# --- 2: a password change or reset ends every other session ---------------------------------------------

@pytest.fixture
def ann(demo, accounts):
    user = accounts.users.create_user(username="ann", email="ann@example.com", quota=0,
                                      access_token="ann-access-token", password_hash=hash_password(PASSWORD),
                                      claim_email=True)
    return int(user["id"])


def test_a_password_change_ends_every_other_session_and_keeps_its_own(account_fn, lambda_context, ann):
    who = {"X-Api-User": str(ann)}
    mine = cookie_of(sign_in(account_fn, lambda_context, "ann")[2])
    other = cookie_of(sign_in(account_fn, lambda_context, "ann")[2])
    status, body, _ = call(account_fn, lambda_context, "PUT", "/api/user/self", headers={"Cookie": mine, **who},
                           body={"original_password": PASSWORD, "password": "a brand new password"})
    assert status == 200, body
    assert call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": other, **who})[0] == 401
    assert call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": mine, **who})[0] == 200
    # A session opened with the new password lives.
    fresh = cookie_of(sign_in(account_fn, lambda_context, "ann", "a brand new password")[2])
    assert call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": fresh, **who})[0] == 200


def test_a_password_reset_ends_every_session(commerce_fn, account_fn, lambda_context, outbox, ann):
    who = {"X-Api-User": str(ann)}
    jar = cookie_of(sign_in(account_fn, lambda_context, "ann")[2])
    assert call(commerce_fn, lambda_context, "GET", "/api/reset_password", query={"email": "ann@example.com"})[0] == 200
    token = re.search(r"token=([0-9a-f]{32})", mails(outbox)[-1]["text"]).group(1)
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/reset",
                           body={"email": "ann@example.com", "token": token})
    assert status == 200, body
    assert call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": jar, **who})[0] == 401


# --- 3: an option nested deeper than a body may be ---------------------------------------------------------

@pytest.mark.parametrize("depth", [100, 100_000])
@pytest.mark.parametrize("key", ["GroupRatio", "ModelPrice"])
def test_a_deeply_nested_option_is_a_400_naming_the_key(commerce_fn, lambda_context, demo, key, depth):
    value = "[" * depth + "]" * depth
    status, body, _ = call(commerce_fn, lambda_context, "PUT", "/api/option", headers=ROOT,
                           body={"key": key, "value": value})
    assert status == 400 and key in body["message"] and "deeper" in body["message"], body
    assert key not in OptionsRepository().options()


# --- 4: new-api's roles --------------------------------------------------------------------------------

@pytest.fixture
def staff(demo, accounts):
    """The root (1, role 100), an operator (role 10), another operator and a user, each with a token."""
    made = {}
    for name, role in (("ops", 10), ("ops2", 10), ("user", 1)):
        made[name] = int(accounts.users.create_user(username=name, role=role, access_token=f"{name}-token")["id"])
    return made


def as_(staff, name):
    return {"Authorization": f"{name}-token", "X-Api-User": str(staff[name])}


def test_an_operator_manages_only_users_below_its_role(account_fn, lambda_context, staff, accounts):
    ops = as_(staff, "ops")
    for target in (1, staff["ops2"]):  # the root, and an operator of its own role
        path = f"/api/admin/users/{target}"
        answers = [
            call(account_fn, lambda_context, "PUT", f"{path}/status", headers=ops, body={"status": 2},
                 resource="/api/admin/users/{user_id}/status"),
            call(account_fn, lambda_context, "POST", f"{path}/quota", headers=ops, body={"quota": 1_000},
                 resource="/api/admin/users/{user_id}/quota"),
            call(account_fn, lambda_context, "PUT", f"{path}/limits", headers=ops, body={"rpm": 1},
                 resource="/api/admin/users/{user_id}/limits"),
            call(account_fn, lambda_context, "PUT", "/api/user", headers=ops, body={"id": target, "group": "vip"}),
        ]
        assert [a[0] for a in answers] == [403] * 4, [a[1] for a in answers]
    root = accounts.users.raw_user(1, consistent=True)
    assert root["status"] == 1 and root["group"] == "default" and "rpm" not in root
    # A user below it: managed.
    status, body, _ = call(account_fn, lambda_context, "PUT", f"/api/admin/users/{staff['user']}/status",
                           headers=ops, body={"status": 2}, resource="/api/admin/users/{user_id}/status")
    assert status == 200, body


def test_only_the_root_makes_operators_and_roots(account_fn, lambda_context, staff):
    ops = as_(staff, "ops")
    for role in (10, 100):
        status, body, _ = call(account_fn, lambda_context, "POST", "/api/admin/users", headers=ops,
                               body={"username": f"made{role}", "password": "a long password", "role": role})
        assert status == 403 and "role" in body["message"], body
    assert call(account_fn, lambda_context, "POST", "/api/admin/users", headers=ops,
                body={"username": "made1", "password": "a long password", "role": 1})[0] == 200
    for role in (10, 100):
        assert call(account_fn, lambda_context, "POST", "/api/admin/users", headers=ROOT,
                    body={"username": f"root-made{role}", "password": "a long password", "role": role})[0] == 200


# --- 8: no code mailed while sign-up is closed --------------------------------------------------------------

def test_with_sign_up_closed_no_verification_code_is_mailed(commerce_fn, lambda_context, outbox):
    set_option("RegisterEnabled", "false")
    status, body, _ = call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "x@example.com"})
    assert status == 403 and "closed" in body["message"]
    assert mails(outbox) == []


# --- 9: key names ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a\rb", "a\nb", "a\x0bb", "\x00", "x" * 51])
def test_a_key_name_is_bounded_and_printable(account_fn, lambda_context, demo, name):
    status, body, _ = call(account_fn, lambda_context, "POST", "/api/token/", headers=ROOT, body={"name": name},
                           resource="/api/token")
    assert status == 400 and "name" in body["message"], body


# --- 10: a key asked for again after a lost answer, sign-out through a GET ---------------------------------

def test_a_key_created_again_after_a_lost_answer_meets_itself_and_succeeds(account_fn, lambda_context, demo,
                                                                           accounts, monkeypatch):
    from gateway.store import keys as keys_store

    real = keys_store.transact

    def applied_then_asked_again(db, writes, **kwargs):
        real(db, writes, **kwargs)
        real(db, writes, **kwargs)  # the first answer was lost: the same transaction asked again

    monkeypatch.setattr(keys_store, "transact", applied_then_asked_again)
    before = len(accounts.keys.raw_keys(1))
    status, body, _ = call(account_fn, lambda_context, "POST", "/api/token/", headers=ROOT, body={"name": "retry"},
                           resource="/api/token")
    assert status == 200, body
    assert len(accounts.keys.raw_keys(1)) == before + 1


def test_sign_out_is_a_post_and_a_get_changes_nothing(account_fn, lambda_context, ann):
    who = {"X-Api-User": str(ann)}
    jar = cookie_of(sign_in(account_fn, lambda_context, "ann")[2])
    status, body, headers = call(account_fn, lambda_context, "GET", "/api/user/logout", headers={"Cookie": jar, **who})
    assert status == 405 and headers.get("Allow") == "POST" and "POST" in body["message"]
    assert call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": jar, **who})[0] == 200
    status, _, headers = call(account_fn, lambda_context, "POST", "/api/user/logout",
                              headers={"Cookie": jar, **who, "Content-Type": "application/json"}, body={})
    assert status == 200 and "Max-Age=0" in headers["Set-Cookie"]
    assert call(account_fn, lambda_context, "GET", "/api/user/self", headers={"Cookie": jar, **who})[0] == 401
