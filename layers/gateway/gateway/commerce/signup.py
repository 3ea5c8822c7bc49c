"""Sign-up, email verification and password reset for the public (new-api's
`POST /api/user/register`, `GET /api/verification`, `GET /api/reset_password`, `POST /api/user/reset`).

- **Limits first.** Each of these routes counts its caller's address (and the email it names) in a
  fixed window before doing anything else: the operator's critical limit, new-api's 20 requests
  per 20 minutes by default (`CriticalRateLimitNum`, `CriticalRateLimitDurationSeconds`). The
  count is raised by one conditional write that fails past the limit, so parallel requests cannot
  slip past it; past it, a 429 with Retry-After.
- **No enumeration.** A code request and a reset request answer the same, do the same work (one
  code stored, one message sent) and take the same time whether the address belongs to an account
  or not: only the mailbox's owner learns the difference (the message says "you already have an
  account" or "no account uses this address"). Unknown invitation codes are ignored, as new-api
  does. A username, chosen in public, is the one thing sign-up says is taken.
- **Codes** are 6 digits (new-api's), stored as a SHA-256 hash for 10 minutes, consumed by one
  conditional delete that names the hash (so a code works once, even in a race), and burned after 5
  wrong tries.
- **Sign-up** honours `RegisterEnabled` and `PasswordRegisterEnabled`; with `EmailVerificationEnabled`
  the emailed code is required and the address becomes the account's verified email (one account
  per verified address). The new account starts with `QuotaForNewUser` units, plus `QuotaForInvitee`
  when an inviter's `aff_code` is given; the inviter's `aff_count` counts it. Rewards for inviting
  are paid at the invitee's first payment (`payments`), never here.
- **Reset**: a verified address gets a link with a one-time token; `POST /api/user/reset {email,
  token}` sets a new random password and answers it in `data` (new-api's behaviour).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from typing import Any
from urllib.parse import urlencode

from gateway import options
from gateway.commerce import mail
from gateway.errors import Conflict, InvalidRequest, PermissionDenied, RateLimited
from gateway.passwords import hash_password
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values
from gateway.store.signin import SignInRepository
from gateway.store.table import PROFILE, user_pk
from gateway.store.users import EmailTaken, NameTaken, UsersRepository, email_key

CODE_SECONDS = 600  # new-api's VerificationValidMinutes: 10
MAX_CODE_TRIES = 5
REGISTER, RESET = "register", "reset"
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")


def _db():
    return client("dynamodb")


def _table() -> str:
    return get_settings().accounts_table


def normal_email(email: str, param: str = "email") -> str:
    email = (email or "").strip().lower()
    if len(email) > 254 or not _EMAIL.match(email):
        raise InvalidRequest(f"{param}: must be an email address", param=param)
    return email


# --- the critical limit ---------------------------------------------------------------------------------

def limit(*subjects: str, now: float | None = None, most: int | None = None, window: int | None = None,
          what: str = "sign-up, code or reset requests") -> None:
    """Counts one request for each subject (`addr:<ip>`, `email:<address>`) in the current window;
    a 429 with Retry-After for the first that is past the limit. `most` and `window` default to
    the operator's critical limit."""
    now = time.time() if now is None else now
    most = int(options.current("CriticalRateLimitNum")) if most is None else most
    window = int(options.current("CriticalRateLimitDurationSeconds")) if window is None else window
    start = int(now) // window * window
    for subject in subjects:
        try:
            _db().update_item(
                TableName=_table(), Key=to_item({"pk": f"CRIT#{subject}", "sk": str(start)}),
                UpdateExpression="ADD n :one SET expires_ttl = :ttl",
                ConditionExpression="attribute_not_exists(n) OR n < :most",
                ExpressionAttributeValues=to_values({":one": 1, ":most": most, ":ttl": start + 2 * window}))
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            retry = start + window - int(now)  # 1 to `window` seconds: `start` is at most now
            kind = subject.split(":", 1)[0].replace("addr", "address")
            raise RateLimited(f"too many {what} from this {kind}; try again in {retry} s",
                              headers={"Retry-After": str(retry)}, code="critical_rate_limited") from None


# --- codes --------------------------------------------------------------------------------------------

def _code_key(purpose: str, email: str) -> dict[str, str]:
    return {"pk": f"VERIFY#{purpose}#{email}", "sk": "VERIFY"}


def _hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _store_code(purpose: str, email: str, code: str, now: float) -> None:
    _db().put_item(TableName=_table(), Item=to_item({
        **_code_key(purpose, email), "code_hash": _hash(code), "expires_at": int(now) + CODE_SECONDS,
        "tries": 0, "expires_ttl": int(now) + CODE_SECONDS}))


def consume_code(purpose: str, email: str, code: str, now: float | None = None) -> bool:
    """True (and the code is gone) when `code` is the stored, unexpired code of `email`."""
    now = time.time() if now is None else now
    key = to_item(_code_key(purpose, email))
    try:
        _db().delete_item(TableName=_table(), Key=key,
                          ConditionExpression="code_hash = :h AND expires_at > :now",
                          ExpressionAttributeValues=to_values({":h": _hash(code), ":now": int(now)}))
        return True
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
    try:  # a wrong try: counted; the code is burned after MAX_CODE_TRIES
        answer = _db().update_item(TableName=_table(), Key=key, UpdateExpression="ADD tries :one",
                                   ConditionExpression="attribute_exists(pk)",
                                   ExpressionAttributeValues=to_values({":one": 1}), ReturnValues="UPDATED_NEW")
        if int(answer["Attributes"]["tries"]["N"]) >= MAX_CODE_TRIES:
            _db().delete_item(TableName=_table(), Key=key)
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
    return False


def _email_owner(email: str) -> int | None:
    found = from_item(_db().get_item(TableName=_table(), Key=to_item(email_key(email)),
                                     ConsistentRead=True).get("Item"))
    return int(found["user_id"]) if found else None


def _system_name() -> str:
    return str(options.current("SystemName"))


def send_code(email_text: str, address: str, now: float | None = None) -> dict[str, Any]:
    """GET /api/verification?email=: a sign-up code to the address (see the module: the same answer
    and work whether or not an account uses it)."""
    email = normal_email(email_text)
    limit(f"addr:{address or 'unknown'}", f"email:{email}", now=now)
    if not options.current("RegisterEnabled") or not options.current("PasswordRegisterEnabled"):
        # A code only ever leads to a sign-up here: with sign-up closed, nothing is stored or mailed.
        raise PermissionDenied("sign-up is closed on this gateway: no code is sent", code="registration_closed")
    now = time.time() if now is None else now
    code = f"{secrets.randbelow(10**6):06d}"
    _store_code(REGISTER, email, code, now)
    name = _system_name()
    if _email_owner(email) is None:
        text = (f"Your {name} verification code is {code}. It is valid for {CODE_SECONDS // 60} minutes.\n"
                "If you did not ask for it, ignore this message.")
    else:
        text = (f"Someone asked to sign up to {name} with this address, which already has an account. "
                "Sign in, or reset your password if you forgot it. If it was not you, ignore this message.")
    mail.send(email, f"{name} email verification", text)
    return {"success": True, "message": ""}


def register(request: Any, address: str, now: float | None = None) -> dict[str, Any]:
    """POST /api/user/register."""
    accounts, sign_in = UsersRepository(), SignInRepository()
    email = normal_email(request.email) if request.email else ""
    limit(f"addr:{address or 'unknown'}", *([f"email:{email}"] if email else []), now=now)
    if not options.current("RegisterEnabled") or not options.current("PasswordRegisterEnabled"):
        raise PermissionDenied("sign-up is closed on this gateway", code="registration_closed")
    verified = bool(options.current("EmailVerificationEnabled"))
    if verified and not email:
        raise InvalidRequest("email: required (this gateway verifies addresses)", param="email")
    # A taken name is refused before the code is spent: a code is spent only by the sign-up it completes.
    if sign_in.user_id_for_username(request.username) is not None:
        raise Conflict("username: taken; choose another", param="username")
    if verified and (not request.verification_code
                     or not consume_code(REGISTER, email, request.verification_code, now)):
        raise InvalidRequest("verification_code: wrong or expired; ask for a new one", param="verification_code")
    inviter = accounts.user_id_for_aff_code(request.aff_code) if request.aff_code else None
    quota = int(options.current("QuotaForNewUser")) + (int(options.current("QuotaForInvitee")) if inviter else 0)
    try:  # the profile, its name's claim, its password and its address's claim: one transaction
        user = accounts.create_user(username=request.username, email=email, quota=quota, inviter_id=inviter or 0,
                                    password_hash=hash_password(request.password), claim_email=verified)
    except (NameTaken, EmailTaken) as exc:
        # Lost to another sign-up after the code was spent: no sign-up completed with it, so the
        # address's code is stored again (for its 10 minutes).
        if verified and request.verification_code:
            _store_code(REGISTER, email, request.verification_code, time.time() if now is None else now)
        if isinstance(exc, NameTaken):
            raise Conflict("username: taken; choose another", param="username") from None
        raise Conflict("email: an account uses this address already", param="email") from None
    user_id = int(user["id"])
    sign_in.refresh_decoy(user_id)
    if inviter:
        _db().update_item(TableName=_table(), Key=to_item({"pk": user_pk(inviter), "sk": PROFILE}),
                          UpdateExpression="ADD aff_count :one", ConditionExpression="attribute_exists(pk)",
                          ExpressionAttributeValues=to_values({":one": 1}))
    return {"success": True, "message": "", "data": {"id": user_id, "username": request.username}}


# --- password reset -----------------------------------------------------------------------------------------

def send_reset(email_text: str, address: str, link_base: str, now: float | None = None) -> dict[str, Any]:
    """GET /api/reset_password?email=: a reset link to a verified address; the same answer and work
    for an address of no account (its message says so)."""
    email = normal_email(email_text)
    limit(f"addr:{address or 'unknown'}", f"email:{email}", now=now)
    now = time.time() if now is None else now
    token = secrets.token_hex(16)
    _store_code(RESET, email, token, now)
    name = _system_name()
    if _email_owner(email) is not None:
        # The address quoted: one with "+" or "&" in it must reach the console's reset page unchanged.
        link = f"{link_base}#/reset?{urlencode({'email': email, 'token': token})}"
        text = (f"To reset your {name} password, open {link} within "
                f"{CODE_SECONDS // 60} minutes. If you did not ask for it, ignore this message.")
    else:
        text = (f"Someone asked to reset a {name} password for this address, but no account uses it. "
                "If it was not you, ignore this message.")
    mail.send(email, f"{name} password reset", text)
    return {"success": True, "message": ""}


def reset(email_text: str, token: str, address: str, accounts: SignInRepository | None = None,
          now: float | None = None) -> dict[str, Any]:
    """POST /api/user/reset {email, token}: a new random password, answered in `data`."""
    email = normal_email(email_text)
    limit(f"addr:{address or 'unknown'}", now=now)
    owner = _email_owner(email)
    if not token or not consume_code(RESET, email, token, now) or owner is None:
        raise InvalidRequest("token: the reset link is wrong or has expired; ask for a new one", param="token")
    password = secrets.token_urlsafe(12)
    (accounts or SignInRepository()).set_password(owner, hash_password(password))
    return {"success": True, "message": "", "data": password}
