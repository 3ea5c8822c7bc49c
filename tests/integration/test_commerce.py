"""The people-and-money routes (functions/commerce): the site's status and options, redemption codes
made by an operator and redeemed by users, exactly once, whatever the race."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest

from gateway import options
from gateway.admission import balances
from gateway.commerce import credits, redemption
from gateway.commerce.store import CommerceRepository
from gateway.schemas.commerce import CODE_USED, CodeUpdate, NewCodes, Redeem
from gateway.store.options import OptionsRepository
from tests.conftest import ROOT, api_event


@pytest.fixture(autouse=True)
def fresh_options():
    options.forget()
    yield
    options.forget()


@pytest.fixture
def people(demo, accounts):
    """The demo user (1, role 100, an operator) and ann (a user), each with an access token."""
    ann = accounts.users.create_user(username="ann", quota=0, access_token="ann-access-token")
    return {"demo": 1, "ann": int(ann["id"])}


def as_user(user_id: int, token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Api-User": str(user_id)}


OPERATOR = as_user(1, "demo-access-token")


def call(fn, ctx, method, path, *, headers=None, body=None, query=None, resource=None):
    event = api_event(method, path, resource=resource or path, headers=headers, query=query,
                      body=None if body is None else json.dumps(body))
    answer = fn.lambda_handler(event, ctx)
    return answer["statusCode"], json.loads(answer["body"])


def quota(accounts, user_id: int) -> int:
    return int(balances.get_user(user_id)["quota"])


# --- status and options ---------------------------------------------------------------------------------

def test_status_is_public_and_shows_the_defaults(commerce_fn, lambda_context, store):
    status, body = call(commerce_fn, lambda_context, "GET", "/api/status")
    assert status == 200 and body["success"] is True
    data = body["data"]
    assert data["register_enabled"] is True and data["email_verification"] is False
    assert data["quota_per_unit"] == 500_000 and data["system_name"] == "Unified AI Gateway"


def test_an_operator_sets_an_option_and_status_shows_it(commerce_fn, lambda_context, people):
    status, body = call(commerce_fn, lambda_context, "PUT", "/api/option", headers=OPERATOR,
                        body={"key": "RegisterEnabled", "value": False})
    assert (status, body["success"]) == (200, True)
    _, shown = call(commerce_fn, lambda_context, "GET", "/api/status")
    assert shown["data"]["register_enabled"] is False
    _, listed = call(commerce_fn, lambda_context, "GET", "/api/option", headers=OPERATOR)
    assert {"key": "RegisterEnabled", "value": "false"} in [
        {"key": o["key"], "value": o["value"]} for o in listed["data"]]
    # new-api's clients send numbers as text: the same rule.
    status, _ = call(commerce_fn, lambda_context, "PUT", "/api/option", headers=OPERATOR,
                     body={"key": "QuotaForNewUser", "value": "250000"})
    assert status == 200 and options.current("QuotaForNewUser") == 250_000


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"key": "NoSuchOption", "value": "1"}, "key", "no option named 'NoSuchOption'"),
    ({"key": "RegisterEnabled", "value": "yes"}, "value", "RegisterEnabled must be true or false"),
    ({"key": "QuotaForNewUser", "value": -5}, "value", "QuotaForNewUser must be 0 to"),
    ({"key": "QuotaForNewUser", "value": "1e3"}, "value", "must be a whole number"),
    ({"key": "StripeUnitPrice", "value": 0}, "value", "must be more than 0"),
    ({"key": "SystemName", "value": ["a"]}, "value", "takes a string, a number or a boolean"),
])
def test_a_bad_option_is_a_400_naming_it_and_changes_nothing(commerce_fn, lambda_context, people, body, param,
                                                             words):
    status, answer = call(commerce_fn, lambda_context, "PUT", "/api/option", headers=OPERATOR, body=body)
    assert status == 400 and answer["success"] is False and words in answer["message"]
    assert OptionsRepository().options() == {}


def test_options_and_codes_are_the_operators_alone(commerce_fn, lambda_context, people):
    ann = as_user(people["ann"], "ann-access-token")
    for method, path, body in (("GET", "/api/option", None), ("PUT", "/api/option", {"key": "Notice", "value": "x"}),
                               ("GET", "/api/redemption", None),
                               ("POST", "/api/redemption", {"name": "n", "quota": 1})):
        status, answer = call(commerce_fn, lambda_context, method, path, headers=ann, body=body)
        assert status == 403 and answer["success"] is False, (method, path)
        status, _ = call(commerce_fn, lambda_context, method, path, body=body)
        assert status == 401, (method, path)
    assert OptionsRepository().options() == {}
    assert CommerceRepository().codes_page(limit=10, before_id=None)[0] == []


# --- codes ----------------------------------------------------------------------------------------------

def make_codes(fn, ctx, **body) -> list[str]:
    status, answer = call(fn, ctx, "POST", "/api/redemption", headers=OPERATOR,
                          body={"name": "gift", "quota": 1_000_000, **body})
    assert status == 200, answer
    return answer["data"]


def test_an_operator_makes_codes_in_bulk_and_lists_them_newest_first(commerce_fn, lambda_context, people):
    keys = make_codes(commerce_fn, lambda_context, count=3)
    assert len(keys) == 3 and len(set(keys)) == 3 and all(len(k) == 32 for k in keys)
    status, listed = call(commerce_fn, lambda_context, "GET", "/api/redemption", headers=OPERATOR,
                          query={"p": "1", "page_size": "2"})
    assert status == 200
    items = listed["data"]["items"]
    assert [i["key"] for i in items] == keys[::-1][:2] and listed["data"]["has_more"] is True
    assert listed["data"]["total"] == 3  # at least the codes read, and one more while more follow
    assert all(i["status"] == 1 and i["quota"] == 1_000_000 and i["used_user_id"] == 0 for i in items)
    _, second = call(commerce_fn, lambda_context, "GET", "/api/redemption", headers=OPERATOR,
                     query={"p": "2", "page_size": "2"})
    assert [i["key"] for i in second["data"]["items"]] == [keys[0]] and second["data"]["has_more"] is False
    assert second["data"]["total"] == 3
    # A page of one: the newest, and at least one more counted (three codes in all)
    _, single = call(commerce_fn, lambda_context, "GET", "/api/redemption", headers=OPERATOR,
                     query={"p": "1", "page_size": "1"})
    assert [i["key"] for i in single["data"]["items"]] == [keys[2]] and single["data"]["total"] == 2
    # and one code by its id, as new-api answers it
    status, one = call(commerce_fn, lambda_context, "GET", f"/api/redemption/{items[0]['id']}", headers=OPERATOR,
                       resource="/api/redemption/{id}")
    assert (status, one["success"], one["data"]["key"]) == (200, True, keys[2])
    # Pages reach back at most 1000 codes (p x page_size), as the request log's do.
    status, _ = call(commerce_fn, lambda_context, "GET", "/api/redemption", headers=OPERATOR,
                     query={"p": "10", "page_size": "100"})
    assert status == 200
    status, refused = call(commerce_fn, lambda_context, "GET", "/api/redemption", headers=OPERATOR,
                           query={"p": "11", "page_size": "100"})
    assert status == 400 and refused["message"].startswith("p:")
    # A page of nothing, before the first or past the largest is a 400 naming its parameter.
    for query, param in (({"page_size": "0"}, "page_size"), ({"page_size": "101"}, "page_size"),
                         ({"p": "0"}, "p")):
        status, refused = call(commerce_fn, lambda_context, "GET", "/api/redemption", headers=OPERATOR,
                               query=query)
        assert status == 400 and refused["message"].startswith(f"{param}:"), (query, refused)


@pytest.mark.parametrize(("body", "param"), [
    ({"name": "", "quota": 1}, "name"), ({"name": "x" * 21, "quota": 1}, "name"),
    ({"name": "n", "quota": 0}, "quota"), ({"name": "n", "quota": 1, "count": 101}, "count"),
    ({"name": "n", "quota": 1, "count": 0}, "count"), ({"name": "n", "quota": 1, "expired_time": 1}, "expired_time"),
    ({"name": "n", "quota": "5"}, "quota"), ({"name": "n", "quota": 1, "extra": 1}, "extra"),
])
def test_bad_codes_are_refused_naming_the_field_and_none_is_made(commerce_fn, lambda_context, people, body, param):
    status, answer = call(commerce_fn, lambda_context, "POST", "/api/redemption", headers=OPERATOR, body=body)
    assert status == 400 and param in answer["message"]
    assert CommerceRepository().codes_page(limit=10, before_id=None)[0] == []


def test_a_user_redeems_a_code_once_and_sees_it_in_the_log_not_in_spend(commerce_fn, lambda_context, people,
                                                                         accounts):
    (key,) = make_codes(commerce_fn, lambda_context, name="welcome")
    ann = as_user(people["ann"], "ann-access-token")
    status, body = call(commerce_fn, lambda_context, "POST", "/api/user/topup", headers=ann, body={"key": key})
    assert (status, body["success"], body["data"]) == (200, True, 1_000_000)
    assert quota(accounts, people["ann"]) == 1_000_000
    # Again: refused, saying it was this user's own redemption; nothing added.
    status, again = call(commerce_fn, lambda_context, "POST", "/api/user/topup", headers=ann, body={"key": key})
    assert status == 400 and "you redeemed this code already" in again["message"]
    assert quota(accounts, people["ann"]) == 1_000_000
    # Another user: used.
    status, other = call(commerce_fn, lambda_context, "POST", "/api/user/topup", headers=OPERATOR, body={"key": key})
    assert status == 400 and "already been used" in other["message"]
    code = CommerceRepository().code(key)
    assert code["status"] == CODE_USED and code["used_user_id"] == people["ann"] and code["redeemed_time"] > 0
    # The log shows one top-up (type 1) of the code's units; spend and requests are untouched.
    from gateway.api import requestlog

    log = requestlog.account_log(people["ann"], {"type": "1"})["data"]["items"]
    assert [(e["type"], e["quota"]) for e in log] == [(1, 1_000_000)] and "welcome" in log[0]["content"]
    assert accounts.usage.ledger(people["ann"]) == []
    assert balances.usage(people["ann"]).units == 0


def test_an_expired_disabled_or_unknown_code_is_refused_and_changes_nothing(commerce_fn, lambda_context, people,
                                                                            accounts):
    repo = CommerceRepository()
    (disabled,) = make_codes(commerce_fn, lambda_context)
    code_id = repo.code(disabled)["id"]
    status, _ = call(commerce_fn, lambda_context, "PUT", "/api/redemption", headers=OPERATOR,
                     query={"status_only": "true"}, body={"id": code_id, "status": 2})
    assert status == 200
    expired = redemption.create(NewCodes(name="old", quota=7, expired_time=2_000_000_000), 1, repo,
                                now=1_000_000_000)["data"][0]
    for key, words in ((disabled, "disabled"), ("f" * 32, "no such redemption code")):
        status, body = call(commerce_fn, lambda_context, "POST", "/api/user/topup",
                            headers=as_user(people["ann"], "ann-access-token"), body={"key": key})
        assert status == 400 and words in body["message"]
    with pytest.raises(Exception, match="has expired"):
        redemption.redeem(people["ann"], Redeem(key=expired), repo, now=2_000_000_000)
    assert quota(accounts, people["ann"]) == 0
    assert repo.code(expired)["status"] == 1 and repo.code(disabled)["status"] == 2
    # Enabled again, it works.
    call(commerce_fn, lambda_context, "PUT", "/api/redemption", headers=OPERATOR,
         query={"status_only": "true"}, body={"id": code_id, "status": 1})
    status, _ = call(commerce_fn, lambda_context, "POST", "/api/user/topup",
                     headers=as_user(people["ann"], "ann-access-token"), body={"key": disabled})
    assert status == 200 and quota(accounts, people["ann"]) == 1_000_000


def test_a_used_code_does_not_change_and_a_deleted_one_is_gone(commerce_fn, lambda_context, people):
    repo = CommerceRepository()
    used, spare = make_codes(commerce_fn, lambda_context, count=2)
    redemption.redeem(people["ann"], Redeem(key=used), repo)
    used_id, spare_id = repo.code(used)["id"], repo.code(spare)["id"]
    for query, body in ((None, {"id": used_id, "name": "more", "quota": 9_000_000}),
                        ({"status_only": "true"}, {"id": used_id, "status": 1})):
        status, answer = call(commerce_fn, lambda_context, "PUT", "/api/redemption", headers=OPERATOR,
                              query=query, body=body)
        assert status == 409 and "has been used" in answer["message"]
    assert repo.code(used)["quota"] == 1_000_000 and repo.code(used)["status"] == CODE_USED
    status, edited = call(commerce_fn, lambda_context, "PUT", "/api/redemption", headers=OPERATOR,
                          body={"id": spare_id, "name": "more", "quota": 2_000_000})
    assert status == 200 and repo.code(spare)["quota"] == 2_000_000
    status, _ = call(commerce_fn, lambda_context, "DELETE", f"/api/redemption/{spare_id}", headers=OPERATOR,
                     resource="/api/redemption/{id}")
    assert status == 200 and repo.code(spare) is None and repo.code_by_id(spare_id) is None
    status, _ = call(commerce_fn, lambda_context, "GET", f"/api/redemption/{spare_id}", headers=OPERATOR,
                     resource="/api/redemption/{id}")
    assert status == 404


def test_a_lost_answer_retried_never_credits_twice(people, accounts, monkeypatch):
    """DynamoDB applied the credit and the answer was lost: the caller's retry meets the claim."""
    repo = CommerceRepository()
    (key,) = redemption.create(NewCodes(name="n", quota=300), 1, repo)["data"]
    real = credits.apply
    calls = Counter()

    def applied_then_lost(credit, claims, now=None):
        calls["n"] += 1
        real(credit, claims, now)
        if calls["n"] == 1:
            raise ConnectionError("the answer was lost")

    monkeypatch.setattr(credits, "apply", applied_then_lost)
    with pytest.raises(ConnectionError):
        redemption.redeem(people["ann"], Redeem(key=key), repo)
    with pytest.raises(Exception, match="you redeemed this code already"):
        redemption.redeem(people["ann"], Redeem(key=key), repo)
    assert quota(accounts, people["ann"]) == 300


def test_an_edit_between_the_read_and_the_claim_credits_the_new_value(people, accounts, monkeypatch):
    """Two operator edits land between a read and its claim: the third read is claimed, at its value."""
    repo = CommerceRepository()
    (key,) = redemption.create(NewCodes(name="n", quota=300), 1, repo)["data"]
    real = repo.code
    edits = [500, 700]

    def read_then_edit(code, consistent=True):
        found = real(code, consistent)
        if edits:
            repo.update_unused(code, {"quota": edits.pop(0)}, used=CODE_USED)
        return found

    monkeypatch.setattr(repo, "code", read_then_edit)
    assert redemption.redeem(people["ann"], Redeem(key=key), repo)["data"] == 700
    assert quota(accounts, people["ann"]) == 700


def test_an_edit_may_not_set_an_expiry_that_is_not_in_the_future(people):
    repo = CommerceRepository()
    (key,) = redemption.create(NewCodes(name="n", quota=300), 1, repo)["data"]
    code_id = int(repo.code(key)["id"])
    request = CodeUpdate.model_validate_json(  # as the route reads it: an expiry of exactly now
        json.dumps({"id": code_id, "name": "n", "quota": 300, "expired_time": 2_000_000_000}))
    with pytest.raises(Exception, match="expired_time: must be 0"):
        redemption.update(request, repo, now=2_000_000_000)
    with pytest.raises(Exception, match="expired_time: must be 0"):  # and one already past
        redemption.update(request, repo, now=2_000_000_001)
    assert repo.code(key)["expired_time"] == 0


def test_two_hundred_parallel_redemptions_of_one_code_credit_once(people, accounts):
    repo = CommerceRepository()
    users = [int(accounts.users.create_user(username=f"u{n}")["id"]) for n in range(200)]
    (key,) = redemption.create(NewCodes(name="race", quota=777), 1, repo)["data"]
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(40)

    def redeem_as(user_ids: list[int]) -> None:
        start.wait()
        for user_id in user_ids:
            try:
                redemption.redeem(user_id, Redeem(key=key), CommerceRepository())
                result = "credited"
            except Exception as exc:
                result = type(exc).__name__
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=redeem_as, args=(users[n::40],)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(outcomes) == {"credited": 1, "InvalidRequest": 199}
    credited = [u for u in users if quota(accounts, u)]
    assert len(credited) == 1 and quota(accounts, credited[0]) == 777
    assert repo.code(key)["used_user_id"] == credited[0]


_REDEEMER = textwrap.dedent("""
    import json, sys
    from gateway.commerce import redemption
    from gateway.schemas.commerce import Redeem
    from gateway.store.aws import reset_clients
    reset_clients()
    key, users = sys.argv[1], json.loads(sys.argv[2])
    wins = 0
    for user_id in users:
        try:
            redemption.redeem(user_id, Redeem(key=key))
            wins += 1
        except Exception:
            pass
    print(wins)
""")


def test_redeemers_in_separate_processes_credit_a_code_once(people, accounts, aws):
    """Many instances: four processes, each its own boto3 clients, race for the same codes."""
    repo = CommerceRepository()
    users = [int(accounts.users.create_user(username=f"p{n}")["id"]) for n in range(40)]
    keys = redemption.create(NewCodes(name="multi", quota=100, count=5), 1, repo)["data"]
    env = {**os.environ, **aws.environment(), "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "layers" / "gateway"), str(ROOT / "local")])}
    wins = 0
    for key in keys:
        runs = [subprocess.Popen([sys.executable, "-c", _REDEEMER, key, json.dumps(users[n::4])], env=env,
                                 stdout=subprocess.PIPE, text=True) for n in range(4)]
        wins += sum(int(run.communicate(timeout=120)[0].strip() or 0) for run in runs)
    assert wins == len(keys)
    assert sum(quota(accounts, u) for u in users) == 100 * len(keys)
    assert all(repo.code(key)["status"] == CODE_USED for key in keys)


@pytest.mark.parametrize("seed", [7, 21])
def test_randomized_codes_and_redeemers_create_or_lose_no_unit(people, accounts, seed):
    """A seeded random interleaving, over eight threads (simulated instances), of redemptions by
    many users, operators' disables, enables, edits and deletes, and lost answers retried: after
    it, each user holds exactly the units of the codes marked used by them, each such code has one
    top-up log entry, and no unused code is marked."""
    import random

    rng = random.Random(seed)
    repo = CommerceRepository()
    users = [int(accounts.users.create_user(username=f"r{n}")["id"]) for n in range(12)]
    keys = redemption.create(NewCodes(name="rand", quota=1000, count=30), 1, repo)["data"]
    credited_by_deleted: Counter = Counter()  # units of used codes deleted later (their credit stays)
    deleted_used = [0]
    lock = threading.Lock()
    plans = [[(rng.choice(("redeem", "redeem", "redeem", "disable", "enable", "edit", "delete", "lost")),
               rng.choice(keys), rng.choice(users), rng.randint(1, 5000)) for _ in range(40)] for _ in range(8)]

    def run(plan):
        mine = CommerceRepository()
        for action, key, user_id, amount in plan:
            code = mine.code(key)
            try:
                if action in ("redeem", "lost"):
                    redemption.redeem(user_id, Redeem(key=key), mine)
                    if action == "lost":  # the answer was lost: the client asks again
                        redemption.redeem(user_id, Redeem(key=key), mine)
                elif code is not None and action in ("disable", "enable"):
                    mine.update_unused(key, {"status": 2 if action == "disable" else 1}, used=CODE_USED)
                elif code is not None and action == "edit":
                    mine.update_unused(key, {"quota": amount}, used=CODE_USED)
                elif code is not None and action == "delete":
                    gone = mine.delete_code(key)
                    if gone is not None and gone["status"] == CODE_USED:
                        with lock:
                            credited_by_deleted[int(gone["used_user_id"])] += int(gone["quota"])
                            deleted_used[0] += 1
            except Exception as exc:
                assert type(exc).__name__ in ("InvalidRequest", "Conflict", "NotFound"), exc

    threads = [threading.Thread(target=run, args=(plan,)) for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = Counter(credited_by_deleted)
    used = 0
    for key in keys:
        code = repo.code(key)
        if code is not None and code["status"] == CODE_USED:
            expected[int(code["used_user_id"])] += int(code["quota"])
            used += 1
        elif code is not None:
            assert code["used_user_id"] == 0 and code["redeemed_time"] == 0
    from gateway.api import requestlog

    entries = 0
    for user_id in users:
        assert quota(accounts, user_id) == expected[user_id], user_id
        log = requestlog.account_log(user_id, {"type": "1", "page_size": "100"})["data"]["items"]
        assert sum(e["quota"] for e in log) == expected[user_id]
        entries += len(log)
    assert entries == used + deleted_used[0]  # one top-up entry per credit, none more


def _state_changing_routes():
    from tests.deploy_support import source_template

    events = source_template()["Resources"]["CommerceFunction"]["Properties"]["Events"]
    return sorted({(e["Properties"]["Method"].upper(), e["Properties"]["Path"]) for e in events.values()
                   if e["Properties"]["Method"].upper() in ("POST", "PUT")})


@pytest.mark.parametrize(("method", "path"), _state_changing_routes())
def test_every_state_changing_commerce_route_refuses_a_cross_site_form_with_415(commerce_fn, lambda_context, people,
                                                                                 accounts, method, path):
    event = api_event(method, path, headers={**OPERATOR, "Content-Type": "text/plain"},
                      body='{"key":"Notice","value":"x","name":"n","quota":1,"username":"zed","password":"a long one"}')
    answer = commerce_fn.lambda_handler(event, lambda_context)
    assert answer["statusCode"] == 415 and "application/json" in json.loads(answer["body"])["message"]
    assert OptionsRepository().options() == {} and accounts.sign_in.user_id_for_username("zed") is None
