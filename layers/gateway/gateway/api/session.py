"""Who is calling the console's JSON API: passwords, sign-in, sessions and the operator's role.

- A password is stored as a salted scrypt hash (`passwords`); the admin command line sets it
  (`set-password`), the user changes it (`PUT /api/user/self`, the current one required). A
  change or a reset ends every other session of the user (`store.signin.set_password`).
- `POST /api/user/login` (new-api's shape) checks a username and password and opens a session:
  a random token in an HttpOnly, SameSite=Strict cookie (Secure when the request came over https);
  only its SHA-256 is stored, with a TTL at its expiry. `GET /api/user/logout` deletes it.
- Sign-in as OWASP's ASVS asks (v4.0.3 V2.2.1 anti-automation, V2.2.2/V3 and the Authentication
  Cheat Sheet's "same response, same time"): a known and an unknown name get the same answer
  after the same work (two store reads, one scrypt at the current parameters). Attempts are
  counted per (name, address) with a progressive delay, per address across names, and per name
  across addresses; each counter is raised in one conditional transaction *before* the password
  is checked, so parallel tries never check more than the limit. A name's ceiling slows every
  address down (one try per `SLOWED_GAP_SECONDS`) instead of locking its owner out: hammering
  from one address never refuses the owner's right password from another. Names compare
  case-insensitively (`store.signin.username_pk`), in the pointer, the counters and creation.
- `caller(headers)`: every account route is reached either with the system access token in
  `Authorization` or with the session cookie, and always with `X-Api-User` naming the same user.
  That header is also the CSRF guard: a page of another site can neither read the cookie nor
  send a custom header with it (a cross-site request with one needs a CORS preflight, which the
  gateway never grants), and the cookie is SameSite=Strict besides.
- `require_operator`: role 10 or more (new-api's admin), for `/api/admin/...`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway import keys
from gateway.admission import balances
from gateway.api.account import account_record, token_owner
from gateway.errors import AuthenticationFailed, InvalidRequest, PermissionDenied, RateLimited
from gateway.passwords import hash_password, verify_password
from gateway.schemas.account import PasswordChange, SignIn
from gateway.store.signin import SignInCounter, SignInRepository
from gateway.validation import parse_body

SESSION_COOKIE = "gateway_session"
SESSION_SECONDS = 7 * 86400
OPERATOR_ROLE = 10

SIGN_IN_WINDOW_SECONDS = 900
#: Attempts of one name from one address per window; the first `FREE_ATTEMPTS` come without a wait,
#: each failure after them makes the next try wait twice as long (2 s, 4 s, ... up to `MAX_DELAY_SECONDS`).
MAX_ATTEMPTS_PER_PAIR = 10
FREE_ATTEMPTS = 3
MAX_DELAY_SECONDS = 120
#: Attempts from one address, whatever the names, per window (a failed one stays counted).
MAX_ATTEMPTS_PER_ADDRESS = 50
#: Failures of one name from all addresses per hour (ASVS V2.2.1: at most 100 an hour) past which
#: every address is slowed to one try per `SLOWED_GAP_SECONDS` for that name, never refused for good.
NAME_CEILING_PER_HOUR = 100
NAME_WINDOW_SECONDS = 3600
SLOWED_GAP_SECONDS = 60


def set_password(user_id: int, password: str, accounts: SignInRepository | None = None) -> None:
    """The admin command line's `set-password` (the same rules as the API's)."""
    if not 8 <= len(password) <= 256:
        raise ValueError("a password has 8 to 256 characters")
    (accounts or SignInRepository()).set_password(user_id, hash_password(password))


# ---- sign-in ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignedIn:
    body: dict[str, Any]
    cookie: str


def _cookie(value: str, max_age: int, secure: bool) -> str:
    parts = [f"{SESSION_COOKIE}={value}", "Path=/", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def is_https(headers: Mapping[str, str]) -> bool:
    """API Gateway says how the client came in (X-Forwarded-Proto); the local runner is plain http."""
    return (headers.get("x-forwarded-proto") or "").lower() == "https"


def _window(now: float, seconds: int = SIGN_IN_WINDOW_SECONDS) -> tuple[int, int]:
    start = int(now) // seconds * seconds
    return start, start + seconds - int(now)


def failure_delay(failures: int) -> int:
    """Seconds the next try of a (name, address) waits after its `failures`-th failure."""
    return 0 if failures < FREE_ATTEMPTS else min(2 ** (failures - FREE_ATTEMPTS + 1), MAX_DELAY_SECONDS)


def _limited(retry_after: int) -> RateLimited:
    # One message for every refusal: it names no rule that would tell a known name from another.
    retry_after = max(int(retry_after), 1)
    return RateLimited(f"too many sign-in attempts; try again in {retry_after} s",
                       headers={"Retry-After": str(retry_after)}, param="username", code="sign_in_limited")


def sign_in(body: str | bytes | None, address: str, https: bool, accounts: SignInRepository | None = None,
            now: float | None = None) -> SignedIn:
    accounts = accounts or SignInRepository()
    request = parse_body(SignIn, body)
    now = time.time() if now is None else now
    name, address = request.username.lower(), address or "unknown"
    window, _ = _window(now)
    name_window, _ = _window(now, NAME_WINDOW_SECONDS)
    expires = window + 2 * SIGN_IN_WINDOW_SECONDS
    pair = f"pair:{name}/{address}"
    slowed = int(accounts.sign_in_counter(f"name:{name}", name_window).get("failures", 0)) >= NAME_CEILING_PER_HOUR
    counters = [SignInCounter(pair, window, MAX_ATTEMPTS_PER_PAIR, expires, SLOWED_GAP_SECONDS if slowed else 0),
                SignInCounter(f"addr:{address}", window, MAX_ATTEMPTS_PER_ADDRESS, expires)]
    refused = accounts.admit_sign_in(counters, int(now))
    if refused is not None:
        raise _limited(_retry_after(accounts.sign_in_counter(counters[refused].subject, window), counters[refused],
                                    int(now)))
    user_id, user = accounts.sign_in_record(name)
    if not verify_password(request.password, (user or {}).get("password_hash")):
        failures = accounts.count_sign_in_failure(pair, window, expires)
        if failure_delay(failures):
            accounts.delay_sign_ins(pair, window, int(now) + failure_delay(failures))
        accounts.count_sign_in_failure(f"name:{name}", name_window, name_window + 2 * NAME_WINDOW_SECONDS)
        raise AuthenticationFailed("wrong username or password", param="password")
    assert user is not None and user_id is not None
    # The owner got in from here: this pair starts over, and this attempt no longer counts for the address.
    accounts.forget_sign_in_attempt(pair, window, reset=True)
    accounts.forget_sign_in_attempt(f"addr:{address}", window, reset=False)
    if int(user.get("status", 1)) != 1:
        raise AuthenticationFailed("this user is disabled", param="username")
    token = keys.new_secret()
    accounts.put_session(keys.hash_secret(token), user_id, int(now) + SESSION_SECONDS,
                         int(user.get("session_generation", 0)))
    accounts.note_sign_in(user_id, int(now), address)
    record = {name_: user.get(name_) for name_ in ("id", "username", "display_name", "role", "status", "group")}
    return SignedIn({"data": record, "message": "", "success": True}, _cookie(token, SESSION_SECONDS, https))


def _retry_after(item: dict[str, Any], counter: SignInCounter, now: int) -> int:
    """When a refused counter takes a try again: its delay's end, its slowed gap's, or its window's."""
    if int(item.get("attempts", 0)) >= counter.limit:
        return counter.window + SIGN_IN_WINDOW_SECONDS - now
    waits = [int(item.get("next_at", 0)) - now]
    if counter.gap:
        waits.append(int(item.get("last_at", 0)) + counter.gap - now)
    return max(waits)


def _session_token(headers: Mapping[str, str]) -> str | None:
    for part in (headers.get("cookie") or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE and value:
            return value
    return None


def sign_out(headers: Mapping[str, str], accounts: SignInRepository | None = None) -> str:
    """Deletes the session of the cookie, named by `X-Api-User` as every cookie call is (else a
    401: no other site ends a session); returns the Set-Cookie that clears the cookie. Without
    a session there is nothing to end, and the cookie is cleared all the same."""
    accounts = accounts or SignInRepository()
    token = _session_token(headers)
    session = accounts.get_session(keys.hash_secret(token)) if token else None
    if session is not None:
        if (headers.get("x-api-user") or "").strip() != str(session["user_id"]):
            raise AuthenticationFailed("X-Api-User must be the id of the signed-in user")
        accounts.delete_session(keys.hash_secret(token or ""))
    return _cookie("", 0, is_https(headers))


# ---- who is calling ----------------------------------------------------------------------------

def caller(headers: Mapping[str, str], accounts: SignInRepository | None = None) -> tuple[int, dict[str, Any]]:
    """The enabled user calling an account route: by the system access token in Authorization,
    else by the session cookie; either way `X-Api-User` must name that user (else a 401)."""
    accounts = accounts or SignInRepository()
    api_user = (headers.get("x-api-user") or "").strip()
    if (headers.get("authorization") or "").strip() or not _session_token(headers):
        return token_owner(headers.get("authorization"), api_user)
    token = _session_token(headers) or ""
    session = accounts.get_session(keys.hash_secret(token))
    if session is None or int(session.get("expires_at", 0)) <= time.time():
        raise AuthenticationFailed("the session has ended; sign in again")
    user_id = int(session["user_id"])
    if api_user != str(user_id):
        raise AuthenticationFailed("X-Api-User must be the id of the signed-in user")
    user = balances.get_user(user_id)
    if user is None or int(user.get("status", 1)) != 1:
        raise AuthenticationFailed("the signed-in user is disabled or gone")
    if int(session.get("generation", 0)) != int(user.get("session_generation", 0)):
        raise AuthenticationFailed("the session has ended (the password changed); sign in again")
    return user_id, user


def require_operator(headers: Mapping[str, str], accounts: SignInRepository | None = None) -> tuple[int, dict]:
    user_id, user = caller(headers, accounts)
    if int(user.get("role", 1)) < OPERATOR_ROLE:
        raise PermissionDenied(f"this needs an operator (role {OPERATOR_ROLE} or more)")
    return user_id, user


def self_record(headers: Mapping[str, str], accounts: SignInRepository | None = None) -> dict[str, Any]:
    """GET /api/user/self."""
    return account_record(caller(headers, accounts)[1])


def change_password(headers: Mapping[str, str], body: str | bytes | None,
                    accounts: SignInRepository | None = None) -> dict[str, Any]:
    """PUT /api/user/self: a new password, the current one required (also for a token caller)."""
    accounts = accounts or SignInRepository()
    request = parse_body(PasswordChange, body)
    user_id, user = caller(headers, accounts)
    if not verify_password(request.original_password, user.get("password_hash")):
        raise InvalidRequest("original_password: is not the current password", param="original_password")
    generation = accounts.set_password(user_id, hash_password(request.password))
    token = None if (headers.get("authorization") or "").strip() else _session_token(headers)
    if token:  # every other session ends; the one that asked lives on
        accounts.keep_session(keys.hash_secret(token), generation)
    return {"data": None, "message": "", "success": True}
