"""The users' room of the accounts table (`gateway.store.users`) on DynamoDB's rules: a new user's
id, name and address each taken once and refused by what is taken, invitation codes that find
exactly one user, an operator's credit to a user that is not there, and what disabling a user
does to its keys. Sign-up and the admin routes reach these through `commerce.signup` and
`functions/admin`; here each refusal is told apart from the others."""

from __future__ import annotations

import pytest

from gateway.store import users as users_store
from gateway.store.table import UserNotFound
from gateway.store.users import EmailTaken, NameTaken


def profile_count(accounts) -> int:
    users, _ = accounts.users.users_page(100)
    return len(users)


@pytest.mark.parametrize("user_id", [0, -1])
def test_a_user_id_is_a_whole_number_from_1(accounts, user_id):
    with pytest.raises(ValueError, match="from 1"):
        accounts.users.create_user(username="nobody", user_id=user_id)
    assert accounts.sign_in.user_id_for_username("nobody") is None


@pytest.mark.parametrize("claim_email", [False, True])
def test_an_id_already_taken_is_refused_as_the_id_never_as_the_name_or_the_address(accounts, claim_email):
    accounts.users.create_user(username="first", user_id=7, email="first@example.com", claim_email=True)
    with pytest.raises(ValueError, match="user 7 already exists") as refused:
        accounts.users.create_user(username="second", user_id=7, email="second@example.com",
                                   claim_email=claim_email)
    assert type(refused.value) is ValueError  # neither NameTaken nor EmailTaken
    # and nothing of the second was written: its name and address are free
    assert accounts.sign_in.user_id_for_username("second") is None
    accounts.users.create_user(username="second", email="second@example.com", claim_email=True)


def test_a_name_taken_in_another_case_is_refused_as_the_name_when_an_address_is_claimed_too(accounts):
    accounts.users.create_user(username="Taken", email="a@example.com", claim_email=True)
    with pytest.raises(NameTaken):
        accounts.users.create_user(username="TAKEN", user_id=50, email="b@example.com", claim_email=True)
    with pytest.raises(NameTaken):  # the next free id, as sign-up makes users
        accounts.users.create_user(username="taken", email="b@example.com", claim_email=True)
    # the address the refused ones would have claimed is still free, and the id too
    made = accounts.users.create_user(username="other", user_id=50, email="b@example.com", claim_email=True)
    assert made["id"] == 50


def test_an_address_taken_is_refused_as_the_address(accounts):
    accounts.users.create_user(username="one", email="same@example.com", claim_email=True)
    before = profile_count(accounts)
    with pytest.raises(EmailTaken):
        accounts.users.create_user(username="two", email="same@example.com", claim_email=True)
    assert profile_count(accounts) == before and accounts.sign_in.user_id_for_username("two") is None


def test_claiming_a_name_another_user_holds_answers_false_and_ones_own_true(accounts):
    holder = accounts.users.create_user(username="holder")
    other = accounts.users.create_user(username="other")
    assert accounts.users.claim_username(int(other["id"]), "holder") is False
    assert accounts.users.claim_username(int(holder["id"]), "holder") is True
    assert accounts.sign_in.user_id_for_username("holder") == int(holder["id"])


def test_an_invitation_code_someone_else_holds_is_replaced_by_a_free_one_on_the_profile(accounts):
    first = accounts.users.create_user(username="first")
    second = accounts.users.create_user(username="second")
    # the highest code there is: any code drawn instead sorts below it
    assert accounts.users.claim_aff_code(int(first["id"]), "zzzzzz") == "zzzzzz"
    assert accounts.users.claim_aff_code(int(first["id"]), "zzzzzz") == "zzzzzz"  # one's own: kept
    code = accounts.users.claim_aff_code(int(second["id"]), "zzzzzz")
    assert code != "zzzzzz"
    assert accounts.users.user_id_for_aff_code(code) == int(second["id"])
    assert accounts.users.user_id_for_aff_code("zzzzzz") == int(first["id"])
    assert accounts.users.raw_user(int(second["id"]), consistent=True)["aff_code"] == code


def test_an_invitation_code_is_looked_for_eight_times_then_refused(accounts, monkeypatch):
    holder = accounts.users.create_user(username="holder")
    accounts.users.claim_aff_code(int(holder["id"]), "busy01")
    other = accounts.users.create_user(username="other")
    draws: list[int] = []

    def always_taken(length: int = 40) -> str:
        draws.append(length)
        return "busy01"

    monkeypatch.setattr(users_store.keys, "new_secret", always_taken)
    with pytest.raises(RuntimeError, match="no free invitation code"):
        accounts.users.claim_aff_code(int(other["id"]), "busy01")
    assert draws == [6] * 8  # the code asked for, then seven drawn, each refused, and one more drawn


def test_an_operators_credit_to_a_user_that_is_not_there_is_refused_and_makes_no_profile(accounts):
    with pytest.raises(UserNotFound):
        accounts.users.add_quota(404, 1_000)
    assert accounts.users.raw_user(404, consistent=True) is None


def test_disabling_a_user_disables_its_active_keys_and_enabling_it_gives_back_those_alone(accounts):
    user = accounts.users.create_user(username="keys")
    uid = int(user["id"])
    _, active = accounts.keys.create_key(uid, name="active")
    _, revoked = accounts.keys.create_key(uid, name="revoked")
    accounts.keys.revoke_key(revoked["key_id"])
    assert accounts.users.set_user_enabled(uid, False) == [active["key_id"]]
    statuses = {key["key_id"]: key["status"] for key in accounts.keys.raw_keys(uid)}
    assert statuses == {active["key_id"]: "disabled", revoked["key_id"]: "revoked"}
    assert accounts.users.set_user_enabled(uid, True) == [active["key_id"]]
    statuses = {key["key_id"]: key["status"] for key in accounts.keys.raw_keys(uid)}
    assert statuses == {active["key_id"]: "active", revoked["key_id"]: "revoked"}
