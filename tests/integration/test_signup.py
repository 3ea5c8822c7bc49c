"""Sign-up, email verification and password reset for the public (functions/commerce): the operator's
switches, codes that work once, the critical limit raised before any work, no enumeration by answer
or work, invitations counted (never rewarded) at sign-up, mail through SES or the local outbox."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter

import pytest

from gateway import options
from gateway.admission import balances
from gateway.commerce import signup
from gateway.errors import RateLimited
from gateway.store.aws import client
from gateway.store.options import OptionsRepository
from tests.conftest import api_event, use_environment


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


def call(fn, ctx, method, path, *, body=None, query=None, headers=None, ip="198.51.100.7"):
    event = api_event(method, path, headers=headers, query=query, body=None if body is None else json.dumps(body))
    event["requestContext"]["identity"]["sourceIp"] = ip
    answer = fn.lambda_handler(event, ctx)
    headers_ = {**(answer.get("headers") or {}),
                **{name: values[-1] for name, values in (answer.get("multiValueHeaders") or {}).items()}}
    return answer["statusCode"], json.loads(answer["body"]), headers_


def mails(folder) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def code_in(message: dict) -> str:
    return re.search(r"code is (\d{6})", message["text"]).group(1)


def test_open_sign_up_makes_an_account_that_signs_in_and_records_the_sign_in(
        commerce_fn, account_fn, lambda_context, outbox, accounts):
    set_option("QuotaForNewUser", "250000")
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                           body={"username": "newbie", "password": "a long password", "email": "N@Example.com"})
    assert status == 200 and body["success"] is True
    user_id = body["data"]["id"]
    profile = accounts.users.raw_user(user_id, consistent=True)
    assert profile["quota"] == 250_000 and profile["email"] == "n@example.com" and profile["inviter_id"] == 0
    status, _, _ = call(account_fn, lambda_context, "POST", "/api/user/login",
                        body={"username": "newbie", "password": "a long password"}, ip="203.0.113.9")
    assert status == 200
    profile = accounts.users.raw_user(user_id, consistent=True)
    assert profile["last_login_ip"] == "203.0.113.9" and profile["last_login_at"] > 0


@pytest.mark.parametrize(("body", "param"), [
    ({"username": "x", "password": "short"}, "password"),
    ({"username": "bad name!", "password": "a long password"}, "username"),
    ({"username": "x", "password": "a long password", "password2": "another one"}, "password2"),
    ({"username": "x", "password": "a long password", "email": "not-an-address"}, "email"),
])
def test_a_bad_sign_up_is_a_400_naming_the_field_and_makes_nothing(commerce_fn, lambda_context, outbox, accounts,
                                                                   body, param):
    status, answer, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register", body=body)
    assert status == 400 and param in answer["message"]
    assert answer["errors"][0]["param"] == param  # where the form shows it (a model's own rule too)
    assert accounts.sign_in.user_id_for_username(body["username"]) is None


def test_closed_sign_up_is_refused(commerce_fn, lambda_context, outbox, accounts):
    set_option("RegisterEnabled", "false")
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                           body={"username": "late", "password": "a long password"})
    assert status == 403 and "closed" in body["message"] and accounts.sign_in.user_id_for_username("late") is None


def test_with_verification_the_emailed_code_is_needed_once(commerce_fn, lambda_context, outbox, accounts):
    set_option("EmailVerificationEnabled", "true")
    register = {"username": "verified", "password": "a long password", "email": "v@example.com"}
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                           body={**register, "verification_code": "000000"})
    assert status == 400 and "verification_code" in body["message"]
    status, _, _ = call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "v@example.com"})
    assert status == 200
    (message,) = mails(outbox)
    assert message["to"] == "v@example.com"
    assert "It is valid for 10 minutes." in message["text"]  # new-api's VerificationValidMinutes
    code = code_in(message)
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                           body={**register, "verification_code": code})
    assert status == 200
    # Once: a second account with the same code (or address) is refused.
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                           body={**register, "username": "again", "verification_code": code})
    assert status == 400 and accounts.sign_in.user_id_for_username("again") is None
    # and the address is the new account's: a new code request is told it is taken
    status, _, _ = call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "v@example.com"})
    assert status == 200 and "already has an account" in mails(outbox)[-1]["text"]


def test_a_sign_up_refused_for_a_taken_name_keeps_the_code_for_the_next_try(commerce_fn, lambda_context, outbox,
                                                                             accounts):
    """A code is spent only by the sign-up it completes (issue 45, item 2): the person fixes the
    name and submits the same code again."""
    set_option("EmailVerificationEnabled", "true")
    taken = accounts.users.create_user(username="taken")
    accounts.sign_in.set_password(int(taken["id"]), "x")
    assert call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "t@example.com"})[0] == 200
    code = code_in(mails(outbox)[-1])
    body = {"username": "taken", "password": "a long password", "email": "t@example.com", "verification_code": code}
    status, answer, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register", body=body)
    assert status == 409 and answer["message"].startswith("username:")
    status, answer, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                             body={**body, "username": "not-taken"})
    assert status == 200, answer


def test_five_wrong_codes_burn_the_code(outbox, store):
    signup.send_code("w@example.com", "192.0.2.1")
    code = code_in(mails(outbox)[0])
    wrong = "111111" if code != "111111" else "222222"
    for _ in range(5):
        assert signup.consume_code(signup.REGISTER, "w@example.com", wrong) is False
    assert signup.consume_code(signup.REGISTER, "w@example.com", code) is False
    # and four wrong tries still leave the code to its owner
    signup.send_code("w4@example.com", "192.0.2.1")
    code = code_in(mails(outbox)[-1])
    wrong = "111111" if code != "111111" else "222222"
    for _ in range(4):
        assert signup.consume_code(signup.REGISTER, "w4@example.com", wrong) is False
    assert signup.consume_code(signup.REGISTER, "w4@example.com", code) is True


def test_a_code_whose_burning_was_lost_is_burned_at_the_next_wrong_try(outbox, store, monkeypatch):
    """The fifth wrong try counts, then its delete of the code fails (a throttle or an error below
    the gateway: the caller sees a 500): the next wrong try, the sixth, burns the code, and the right
    code no longer works. Tries never stop counting past the limit."""
    signup.send_code("lost@example.com", "192.0.2.1")
    code = code_in(mails(outbox)[0])
    wrong = "111111" if code != "111111" else "222222"
    for _ in range(4):
        assert signup.consume_code(signup.REGISTER, "lost@example.com", wrong) is False
    real = signup._db()

    class DeleteLost:
        def __getattr__(self, name):
            return getattr(real, name)

        def delete_item(self, **kwargs):
            if "ConditionExpression" not in kwargs:  # the burn, not the right code's consume
                raise RuntimeError("the burn's delete was lost")
            return real.delete_item(**kwargs)

    monkeypatch.setattr(signup, "_db", DeleteLost)
    with pytest.raises(RuntimeError):
        signup.consume_code(signup.REGISTER, "lost@example.com", wrong)
    monkeypatch.undo()
    assert signup.consume_code(signup.REGISTER, "lost@example.com", wrong) is False  # the sixth burns it
    assert signup.consume_code(signup.REGISTER, "lost@example.com", code) is False


def test_a_verified_sign_up_that_loses_its_name_to_a_race_gives_its_address_back(
        commerce_fn, lambda_context, outbox, accounts, monkeypatch):
    """Another sign-up takes the name between this one's check and its claim of the name: a 409, and
    the address this one had claimed is free again, for a sign-up under another name."""
    set_option("EmailVerificationEnabled", "true")
    from gateway.store.signin import SignInRepository

    other = accounts.users.create_user(username="raced")  # the other sign-up's account, its name claimed
    accounts.sign_in.set_password(int(other["id"]), "x")

    def new_code() -> str:
        assert call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "r@example.com"})[0] == 200
        return code_in(mails(outbox)[-1])

    real = SignInRepository.user_id_for_username
    monkeypatch.setattr(SignInRepository, "user_id_for_username",  # read before the other one's claim
                        lambda self, name: None if name == "raced" else real(self, name))
    body = {"username": "raced", "password": "a long password", "email": "r@example.com"}
    status, answer, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                             body={**body, "verification_code": new_code()})
    assert status == 409 and "username" in answer["message"], answer
    assert signup._email_owner("r@example.com") is None
    first = code_in(mails(outbox)[-1])  # no sign-up completed with it: it is still the address's code
    status, answer, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                             body={**body, "username": "second-choice", "verification_code": first})
    assert status == 200, answer
    assert signup._email_owner("r@example.com") == answer["data"]["id"]


def stored_codes() -> int:
    from gateway.settings import get_settings

    items = client("dynamodb").scan(TableName=get_settings().accounts_table)["Items"]
    return sum(1 for item in items if item["pk"]["S"].startswith("VERIFY#"))


def test_a_critical_limit_counter_is_kept_two_windows_then_left_to_the_ttl(store):
    set_option("CriticalRateLimitDurationSeconds", "1200")
    signup.limit("addr:192.0.2.9", now=1_000_000.5)
    start = 1_000_000 // 1200 * 1200
    item = client("dynamodb").get_item(TableName=signup._table(), ConsistentRead=True, Key={
        "pk": {"S": "CRIT#addr:192.0.2.9"}, "sk": {"S": str(start)}})["Item"]
    # counted once, and deleted by DynamoDB's TTL once its window and the next are over
    assert (item["n"]["N"], item["expires_ttl"]["N"]) == ("1", str(start + 2 * 1200))
    # and past the limit, the refusal names the kind of subject, never the subject itself
    set_option("CriticalRateLimitNum", "1")
    with pytest.raises(RateLimited, match="from this address; try again in 799 s"):
        signup.limit("addr:192.0.2.9", now=1_000_001)


def test_a_code_is_kept_until_it_expires_then_left_to_the_ttl(outbox, store):
    # two moments, the second sharing bits with 600 (there a sum and a bitwise xor differ)
    for n, now in enumerate((2_000_000, 1_764_000_024)):
        signup.send_code(f"ttl{n}@example.com", "192.0.2.1", now=now)
        item = client("dynamodb").get_item(TableName=signup._table(), ConsistentRead=True, Key={
            "pk": {"S": f"VERIFY#register#ttl{n}@example.com"}, "sk": {"S": "VERIFY"}})["Item"]
        assert item["expires_at"]["N"] == item["expires_ttl"]["N"] == str(now + 600)  # 10 minutes


def test_a_code_is_drawn_from_all_six_digits(outbox, store, monkeypatch):
    """A code is one of the million from 000000 to 999999: with the draw at its highest, the
    mail says 999999 (a smaller range would make it guessable in fewer than five tries a code)."""
    draws: list[int] = []

    def highest(bound: int) -> int:
        draws.append(bound)
        return bound - 1

    monkeypatch.setattr(signup.secrets, "randbelow", highest)
    signup.send_code("six@example.com", "192.0.2.1")
    assert draws == [10**6] and code_in(mails(outbox)[-1]) == "999999"


@pytest.mark.parametrize(("length", "status"), [(254, 200), (255, 400)])
def test_an_address_is_at_most_254_characters(commerce_fn, lambda_context, outbox, length, status):
    """RFC 5321's limit on a path (256 octets with its angle brackets): the longest address that
    can be mailed to is 254 characters, and one longer is a 400 naming `email`."""
    local = "a" * 64  # RFC 5321's limit on the local part
    domain = ".".join(["b" * 62] * 4)
    domain = domain[:length - len(local) - 1 - len(".com")] + ".com"
    address = f"{local}@{domain}"
    assert len(address) == length
    answer, body, _ = call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": address})
    assert answer == status, body
    if status == 400:
        assert body["errors"][0]["param"] == "email" and not mails(outbox)


def test_a_code_or_reset_request_says_and_does_the_same_for_a_taken_address(commerce_fn, lambda_context, outbox,
                                                                            accounts):
    """No enumeration: one code stored and one message sent either way, the same answer; only the
    message (read by the address's owner) differs."""
    set_option("EmailVerificationEnabled", "true")
    call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "taken@example.com"})
    code = code_in(mails(outbox)[0])
    call(commerce_fn, lambda_context, "POST", "/api/user/register", body={
        "username": "owner", "password": "a long password", "email": "taken@example.com", "verification_code": code})
    for path in ("/api/verification", "/api/reset_password"):
        answers, work = [], []
        for email in ("taken@example.com", "free@example.com"):
            before = (len(mails(outbox)), stored_codes())
            status, body, _ = call(commerce_fn, lambda_context, "GET", path, query={"email": email},
                                   ip=f"10.9.{len(work)}.1")
            answers.append((status, body))
            work.append((len(mails(outbox)) - before[0], stored_codes() - before[1]))
        assert answers[0] == answers[1] == (200, {"success": True, "message": ""}), path
        assert work[0] == work[1] == (1, 1), path


def test_the_critical_limit_counts_before_any_work_even_in_parallel(commerce_fn, lambda_context, outbox):
    set_option("CriticalRateLimitNum", "20")
    outcomes: list[int] = []
    lock = threading.Lock()

    def ask(n: int) -> None:
        status, _, headers = call(commerce_fn, lambda_context, "GET", "/api/verification",
                                  query={"email": f"flood{n}@example.com"})
        with lock:
            outcomes.append(status if status != 429 or int(headers.get("Retry-After", 0)) > 0 else -1)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(outcomes) == {200: 20, 429: 30}
    assert len(mails(outbox)) == 20  # a refused request sent nothing
    # Another address is not held up by this one.
    status, _, _ = call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "x@example.com"},
                        ip="192.0.2.200")
    assert status == 200


def test_an_invitation_code_counts_the_invitee_and_rewards_nothing_yet(commerce_fn, lambda_context, outbox, demo,
                                                                      accounts):
    set_option("QuotaForNewUser", "250000")
    set_option("QuotaForInvitee", "100000")
    set_option("QuotaForInviter", "900000")
    inviter = accounts.users.raw_user(1, consistent=True)
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register", body={
        "username": "invited", "password": "a long password", "aff_code": inviter["aff_code"]})
    assert status == 200
    invitee = accounts.users.raw_user(body["data"]["id"], consistent=True)
    assert invitee["inviter_id"] == 1 and invitee["quota"] == 250_000 + 100_000  # a new user's, and an invitee's
    after = accounts.users.raw_user(1, consistent=True)
    assert after["aff_count"] == inviter["aff_count"] + 1 and after["aff_quota"] == inviter["aff_quota"]
    # An unknown code is ignored, as new-api does (no enumeration of codes either).
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register", body={
        "username": "stray", "password": "a long password", "aff_code": "nosuchcode"})
    assert status == 200 and accounts.users.raw_user(body["data"]["id"], consistent=True)["inviter_id"] == 0


def test_two_sign_ups_racing_for_one_name_make_one_account(commerce_fn, lambda_context, outbox, accounts):
    outcomes: list[int] = []

    def go(n: int) -> None:
        status, _, _ = call(commerce_fn, lambda_context, "POST", "/api/user/register",
                            body={"username": "contested", "password": f"a long password {n}"}, ip=f"10.0.0.{n}")
        outcomes.append(status)

    threads = [threading.Thread(target=go, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [200] + [409] * 5
    users = [u for u in balances.list_users() if u["username"] == "contested"]
    assert len(users) == 1


def test_a_password_reset_by_email_gives_a_new_password_that_signs_in(commerce_fn, account_fn, lambda_context,
                                                                       outbox, accounts):
    set_option("EmailVerificationEnabled", "true")
    call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "r@example.com"})
    code = code_in(mails(outbox)[-1])
    call(commerce_fn, lambda_context, "POST", "/api/user/register", body={
        "username": "forgetful", "password": "a long password", "email": "r@example.com", "verification_code": code})
    status, _, _ = call(commerce_fn, lambda_context, "GET", "/api/reset_password", query={"email": "R@example.com"})
    assert status == 200
    link = mails(outbox)[-1]["text"]
    assert "within 10 minutes." in link  # the reset link lasts as long as a code
    token = re.search(r"token=([0-9a-f]{32})", link).group(1)
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/reset",
                           body={"email": "r@example.com", "token": "0" * 32})
    assert status == 400
    status, body, _ = call(commerce_fn, lambda_context, "POST", "/api/user/reset",
                           body={"email": "r@example.com", "token": token})
    assert status == 200 and body["success"] is True  # new-api's answer: the new password, in `data`
    assert re.fullmatch(r"[A-Za-z0-9_-]{16}", body["data"])  # 96 random bits, URL-safe
    status, _, _ = call(account_fn, lambda_context, "POST", "/api/user/login",
                        body={"username": "forgetful", "password": body["data"]})
    assert status == 200
    status, _, _ = call(commerce_fn, lambda_context, "POST", "/api/user/reset",
                        body={"email": "r@example.com", "token": token})
    assert status == 400  # once


def test_deployed_mail_goes_through_ses_from_the_stacks_sender(commerce_fn, lambda_context, store):
    sender = "no-reply@gateway.example"
    client("sesv2").create_email_identity(EmailIdentity=sender)
    saved = use_environment(GATEWAY_MAIL_OUTBOX=None, GATEWAY_MAIL_FROM=sender)
    try:
        status, _, _ = call(commerce_fn, lambda_context, "GET", "/api/verification", query={"email": "s@example.com"})
        assert status == 200
        sent = client("ses").get_send_statistics()["SendDataPoints"]
        assert sum(point["DeliveryAttempts"] for point in sent) == 1
    finally:
        use_environment(**saved)
