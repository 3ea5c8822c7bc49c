"""Sign-in as OWASP's ASVS asks (issue 33, rows 1-4): the same work for a known and an unknown
name, throttling per (name, address) with a progressive delay and a per-name ceiling that slows
instead of locking the owner out, names compared case-insensitively everywhere, the counter
raised before the password is checked, and JSON-only state-changing routes (no login CSRF).

Sources: OWASP ASVS 4.0.3 V2.2.1 (anti-automation: "soft lockouts, rate limiting, ... ever
increasing delays between attempts"; "no more than 100 failed attempts per hour ... on a single
account"); OWASP Authentication Cheat Sheet ("Authentication and Error Messages": the same
answer, and the same time, for a wrong user and a wrong password; "Account Lockout": an
attacker must not be able to lock a user out); OWASP CSRF Prevention Cheat Sheet ("Login CSRF";
a cross-site form can only send `application/x-www-form-urlencoded`, `multipart/form-data` or
`text/plain`, anything else needs a CORS preflight)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway import passwords
from gateway.admission import balances
from gateway.api import session
from gateway.errors import GatewayError
from gateway.store.signin import SignInRepository
from gateway_local.template import read_template
from tests.conftest import ROOT, api_event

PASSWORD = "correct horse battery"
T0 = 1_800_000_000 // session.NAME_WINDOW_SECONDS * session.NAME_WINDOW_SECONDS  # a window's first second


@pytest.fixture
def ann(demo, accounts):
    user = accounts.users.create_user(username="ann", quota=5_000_000, access_token="ann-access-token")
    session.set_password(int(user["id"]), PASSWORD, accounts.sign_in)
    return int(user["id"])


def attempt(accounts, username, password, address="10.0.0.1", now=T0):
    """A sign-in at `now` (a fake clock): its status, 200 or the refusal's."""
    body = json.dumps({"username": username, "password": password})
    try:
        session.sign_in(body, address, False, accounts, now=now)
    except GatewayError as error:
        return error.status, error
    return 200, None


# ---- row 1: the same work and the same answer for known and unknown names -------------------------

class _Recorder:
    """The store calls a sign-in makes (operation, table, consistency; never the keys), the
    attributes of each item a read finds, and the scrypt work it does (n, r, p, salt length)."""

    def __init__(self, db):
        self.db, self.calls, self.found = db, [], []

    def __getattr__(self, operation):
        call = getattr(self.db, operation)

        def recorded(**params):
            shape = (operation, params.get("TableName"), params.get("ConsistentRead"),
                     params.get("UpdateExpression"), params.get("ConditionExpression"),
                     tuple((i.get("Update") or {}).get("ConditionExpression") for i in params.get("TransactItems", ())))
            self.calls.append(shape)
            answer = call(**params)
            if operation == "get_item":
                self.found.append(len(answer.get("Item") or {}))
            return answer
        return recorded


def test_a_known_and_an_unknown_name_do_the_same_store_reads_and_the_same_scrypt(ann, accounts, monkeypatch):
    work: list[tuple] = []
    real = passwords._scrypt

    def scrypt(password, salt, n, r, p):
        work.append((n, r, p, len(salt)))
        return real(password, salt, n, r, p)

    monkeypatch.setattr(passwords, "_scrypt", scrypt)
    seen = {}
    for name, address in (("ann", "10.0.0.2"), ("nobody", "10.0.0.3")):
        recorder = _Recorder(accounts.sign_in._db)

        class Recorded(SignInRepository):
            _db = recorder  # type: ignore[assignment]

        repo = Recorded()
        work.clear()
        status, error = attempt(repo, name, "wrong password", address)
        seen[name] = (status, error.message, recorder.calls, list(work), recorder.found)
    assert seen["ann"][0] == seen["nobody"][0] == 401
    assert seen["ann"][1] == seen["nobody"][1] == "wrong username or password"
    assert seen["ann"][2] == seen["nobody"][2]  # the same reads and writes, in the same order
    assert [c[0] for c in seen["ann"][2]].count("get_item") >= 3  # the name's ceiling, the pointer, a profile
    assert seen["ann"][3] == seen["nobody"][3] == [(2**14, 8, 1, 16)]  # one scrypt at the current parameters
    # The profile read finds an item as large for both (the decoy), not an item against nothing:
    # parsing a profile is what a known name's sign-in did more (about 0.4 ms in-process here).
    # Only the pointer read before it still differs (its 3 attributes, or none).
    assert max(seen["nobody"][4]) == max(seen["ann"][4]) > 20


def test_the_sign_in_decoy_has_a_profiles_shape_and_no_ones_data(ann, accounts):
    from gateway.store.signin import SIGN_IN_DECOY_KEY
    from gateway.store.table import PROFILE

    profile = accounts.users.raw_user(ann, consistent=True)
    decoy = accounts.sign_in._get(SIGN_IN_DECOY_KEY["pk"], SIGN_IN_DECOY_KEY["sk"], consistent=True)
    assert decoy is not None and set(decoy) == set(profile)
    assert all(type(decoy[name]) is type(value) for name, value in profile.items())
    assert all(len(decoy[name]) == len(value) for name, value in profile.items() if isinstance(value, str)
               and name not in ("pk", "sk"))
    for secret in (profile["username"], profile["password_hash"], profile["aff_code"]):
        assert secret not in json.dumps(decoy, default=str)
    assert decoy["quota"] == 0 and "expires_ttl" not in decoy
    assert decoy["sk"] != PROFILE and all(user["id"] != 0 for user in balances.list_users())  # never a user


def test_a_wrong_password_or_an_unknown_name_is_one_401_naming_neither(account_fn, ann, lambda_context):
    for username, password in (("ann", "wrong password"), ("nobody", PASSWORD)):
        status, body, headers = call(account_fn, lambda_context, "POST", "/api/user/login",
                                     body={"username": username, "password": password})
        # the same words and the same field (the form's password, whichever was wrong) for both
        assert status == 401 and body == {"data": None, "message": "wrong username or password", "success": False,
                                          "errors": [{"param": "password", "message": "wrong username or password"}]}
        assert "Set-Cookie" not in headers


# ---- row 2: throttled per (name, address), slowed per name, never locked out -----------------

def test_hammering_one_address_never_refuses_the_owners_right_password_from_another(ann, accounts):
    now = T0
    for failures in range(1, session.MAX_ATTEMPTS_PER_PAIR + 1):
        status, error = attempt(accounts.sign_in, "ann", "wrong password", "10.6.6.6", now)
        assert status == 401
        now += session.failure_delay(failures)  # past each progressive delay (all within the window)
    assert now < T0 + session.SIGN_IN_WINDOW_SECONDS
    # That address is done with this name for the window, in any casing ...
    for name in ("ann", "ANN", "Ann"):
        status, error = attempt(accounts.sign_in, name, PASSWORD, "10.6.6.6", now)
        assert status == 429 and int(error.headers["Retry-After"]) > 0
    # ... but the owner, from another address, gets in at once, in any casing.
    assert attempt(accounts.sign_in, "ANN", PASSWORD, "10.1.1.1", now)[0] == 200
    assert attempt(accounts.sign_in, "ann", PASSWORD, "10.1.1.2", now)[0] == 200


def test_each_failure_past_the_free_ones_doubles_the_wait_of_the_next_try(ann, accounts):
    now = T0
    for _ in range(session.FREE_ATTEMPTS):
        assert attempt(accounts.sign_in, "ann", "wrong password", "10.0.0.4", now)[0] == 401
    status, error = attempt(accounts.sign_in, "ann", PASSWORD, "10.0.0.4", now)
    assert status == 429 and error.headers["Retry-After"] == "2"  # not even the right password is checked
    assert attempt(accounts.sign_in, "ann", "wrong password", "10.0.0.4", now + 2)[0] == 401
    status, error = attempt(accounts.sign_in, "ann", PASSWORD, "10.0.0.4", now + 5)
    assert status == 429 and error.headers["Retry-After"] == "1"  # 4 s after the 4th failure
    assert attempt(accounts.sign_in, "ann", PASSWORD, "10.0.0.4", now + 6)[0] == 200
    # The owner got in: this address starts over.
    assert attempt(accounts.sign_in, "ann", "wrong password", "10.0.0.4", now + 6)[0] == 401
    assert attempt(accounts.sign_in, "ann", PASSWORD, "10.0.0.4", now + 6)[0] == 200


def test_past_the_names_ceiling_every_address_is_slowed_never_locked_out(ann, accounts, monkeypatch):
    monkeypatch.setattr(session, "NAME_CEILING_PER_HOUR", 5)
    for n in range(5):  # a distributed guesser: five addresses, one failure each
        assert attempt(accounts.sign_in, "ann", "wrong password", f"10.9.0.{n}")[0] == 401
    # The owner from a new address still gets in, at its first try ...
    assert attempt(accounts.sign_in, "Ann", PASSWORD, "10.1.0.1")[0] == 200
    # ... while each address now has one try per gap for this name, wrong or right.
    assert attempt(accounts.sign_in, "ann", "wrong password", "10.1.0.2")[0] == 401
    status, error = attempt(accounts.sign_in, "ann", PASSWORD, "10.1.0.2", T0 + 1)
    assert status == 429 and int(error.headers["Retry-After"]) == session.SLOWED_GAP_SECONDS - 1
    assert attempt(accounts.sign_in, "ann", PASSWORD, "10.1.0.2", T0 + session.SLOWED_GAP_SECONDS)[0] == 200
    # Another name is not slowed.
    assert attempt(accounts.sign_in, "demo", "wrong password", "10.1.0.2", T0 + 1)[0] == 401
    assert attempt(accounts.sign_in, "demo", "wrong password", "10.1.0.2", T0 + 1)[0] == 401


def test_one_address_trying_many_names_is_limited_whatever_the_names(ann, accounts):
    for n in range(session.MAX_ATTEMPTS_PER_ADDRESS):
        assert attempt(accounts.sign_in, f"guess{n}", "wrong password", "10.0.0.9")[0] == 401
    assert attempt(accounts.sign_in, "ann", PASSWORD, "10.0.0.9")[0] == 429
    assert attempt(accounts.sign_in, "ann", PASSWORD, "10.0.0.10")[0] == 200


# ---- names compare case-insensitively everywhere --------------------------------------------------

def test_names_compare_case_insensitively_at_creation_and_sign_in(account_fn, ann, lambda_context, accounts):
    operator = {"Authorization": "demo-access-token", "X-Api-User": "1"}
    accounts.users.set_access_token(1, "demo-access-token")
    status, body, _ = call(account_fn, lambda_context, "POST", "/api/admin/users", headers=operator,
                           body={"username": "ANN", "password": "another password"})
    assert status == 409 and body["message"].startswith("username:")
    with pytest.raises(ValueError, match="is taken"):  # with or without a password, a name is taken once
        accounts.users.create_user(username="Ann")
    for name in ("ann", "ANN", "aNn"):
        assert attempt(accounts.sign_in, name, PASSWORD, f"10.2.0.{len(name)}{name}")[0] == 200


# ---- row 4: the counter is raised before the password is checked ----------------------------------

def test_200_parallel_wrong_passwords_check_at_most_the_limit(ann, accounts, monkeypatch):
    checked, lock = [0], threading.Lock()
    real = session.verify_password

    def counting(password, stored):
        with lock:
            checked[0] += 1
        return real(password, stored)

    monkeypatch.setattr(session, "verify_password", counting)
    with ThreadPoolExecutor(max_workers=32) as pool:
        statuses = list(pool.map(lambda _: attempt(SignInRepository(), "ann", "wrong password", "10.4.4.4")[0],
                                 range(200)))
    assert checked[0] <= session.MAX_ATTEMPTS_PER_PAIR
    assert statuses.count(401) == checked[0] and statuses.count(429) == 200 - checked[0]


# ---- row 3: JSON only on every state-changing route (no login CSRF) -------------------------------

def call(fn, ctx, method, path, *, headers=None, body=None, raw=None, source_ip="10.0.0.1", resource=None):
    event = api_event(method, path, resource=resource or path, headers=headers,
                      body=raw if raw is not None else (None if body is None else json.dumps(body)))
    event["requestContext"]["identity"]["sourceIp"] = source_ip
    answer = fn.lambda_handler(event, ctx)
    headers_ = {**(answer.get("headers") or {}),
                **{name: values[-1] for name, values in (answer.get("multiValueHeaders") or {}).items()}}
    return answer["statusCode"], json.loads(answer["body"]), headers_


CROSS_SITE_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]


@pytest.mark.parametrize("content_type", CROSS_SITE_TYPES)
def test_a_cross_site_form_cannot_sign_anyone_in(account_fn, ann, lambda_context, content_type):
    # What `<form enctype="text/plain">` sends: a JSON-looking body made of one field's name and value.
    raw = '{"username":"ann","password":"' + PASSWORD + '","x":"="}'
    headers = {"Content-Type": content_type} if content_type else {}
    event = api_event("POST", "/api/user/login", headers=headers, body=raw)
    if content_type is None:
        del event["headers"]["Content-Type"]
        del event["multiValueHeaders"]["Content-Type"]
    answer = account_fn.lambda_handler(event, lambda_context)
    body = json.loads(answer["body"])
    assert answer["statusCode"] == 415 and body["success"] is False and body["data"] is None
    assert body["message"].startswith("Content-Type: must be application/json")
    assert "Set-Cookie" not in (answer.get("headers") or {}) and "Set-Cookie" not in (answer.get("multiValueHeaders")
                                                                                       or {})


def test_json_with_a_charset_signs_in(account_fn, ann, lambda_context):
    status, body, headers = call(account_fn, lambda_context, "POST", "/api/user/login",
                                 headers={"Content-Type": "Application/JSON; charset=utf-8"},
                                 body={"username": "ann", "password": PASSWORD})
    assert status == 200 and "gateway_session=" in headers["Set-Cookie"]


def _state_changing_console_routes():
    template = read_template(ROOT / "template.yaml")
    return sorted({(r.method, r.path) for r in template.routes
                   if r.path.startswith("/api/") and r.method in ("POST", "PUT", "PATCH", "DELETE")})


def test_the_state_changing_routes_are_the_ones_expected():
    assert len(_state_changing_console_routes()) >= 9  # login, self, users, status, quota, limits, token x3


@pytest.mark.parametrize("method,path", _state_changing_console_routes())
def test_every_state_changing_console_route_refuses_a_form_with_415(account_fn, ann, lambda_context,
                                                                      accounts, method, path):
    who = {"Authorization": "ann-access-token", "X-Api-User": str(ann), "Content-Type": "text/plain"}
    concrete = path.replace("{id}", "2")
    status, body, _ = call(account_fn, lambda_context, method, concrete, headers=who, resource=path,
                           raw='{"name":"x","quota":1,"status":2,"id":"abc","rpm":1,"original_password":"p",'
                               '"password":"a new password","username":"zed"}')
    assert status == 415 and body["success"] is False and "application/json" in body["message"]
    assert accounts.sign_in.user_id_for_username("zed") is None
    assert balances.list_keys(ann) == []
