"""Account and credit queries: billing usage, subscription (quota) and the user record.

Units (interface spec, Limits): 500000 quota units per USD; `total_usage` is in cents
(USD x 100); an unlimited key reports 100000000 as its limits.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gateway.admission import limits
from gateway.auth import Principal
from gateway.errors import AuthenticationFailed, InvalidRequest
from gateway.prices import UNITS_PER_USD, units_to_whole_usd
from gateway.store.accounts import AccountsRepository

UNLIMITED_USD = 100_000_000
_UNITS_PER_CENT = UNITS_PER_USD // 100

# The account record of GET /api/user/self, in the spec's order, with its fixed values.
_ACCOUNT_FIELDS = (
    "id", "username", "password", "display_name", "role", "status", "email", "github_id", "wechat_id",
    "oidc_id", "google_id", "verification_code", "access_token", "quota", "used_quota", "request_count",
    "group", "can_use_self_group", "aff_code", "inviter_id", "aff_count", "aff_quota", "aff_history_quota",
    "created_at", "last_login_at", "last_login_ip", "deleted_at", "group_ratio", "topup_ratio",
)
_FIXED = {"password": "", "verification_code": "", "access_token": None, "deleted_at": None}


def parse_date(name: str, value: str | None, *, end: bool = False) -> datetime | None:
    """A millisecond timestamp (the spec's form) or, for convenience, a YYYY-MM-DD date. Both
    bounds are inclusive: as an `end`, a millisecond means up to its last microsecond and a date
    the whole of that day."""
    if value is None or value == "":
        return None
    text = value.strip()
    if text.isdigit():
        try:
            moment = datetime.fromtimestamp(int(text) / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidRequest(f"{name}: timestamp {text} is out of range", param=name) from None
        return moment + timedelta(microseconds=999) if end else moment
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidRequest(f"{name}: must be a timestamp in milliseconds (or YYYY-MM-DD), got '{value}'",
                             param=name) from None
    return day + timedelta(days=1, microseconds=-1) if end else day


def billing_usage(principal: Principal, start_date: str | None, end_date: str | None,
                  accounts: AccountsRepository | None = None) -> dict[str, Any]:
    """What this key has spent between the dates (both optional, inclusive), in cents."""
    start, end = parse_date("start_date", start_date), parse_date("end_date", end_date, end=True)
    if start and end and start > end:
        raise InvalidRequest("start_date: must not be after end_date", param="start_date")
    units = (accounts or AccountsRepository()).usage(principal.user_id, start=start, end=end,
                                                     key_id=principal.key_id).units
    cents = Decimal(units) / _UNITS_PER_CENT
    return {"object": "list", "total_usage": int(cents) if cents == cents.to_integral_value() else float(cents)}


def subscription(principal: Principal, accounts: AccountsRepository | None = None) -> dict[str, Any]:
    """The key's authorized quota in whole USD: what is left plus what it has used."""
    key = (accounts or AccountsRepository()).get_key(principal.key_hash) or {}
    if key.get("unlimited"):
        limit = UNLIMITED_USD
    else:
        limit = units_to_whole_usd(int(key.get("remain_quota", 0)) + int(key.get("used_quota", 0)))
    answer = {
        "object": "billing_subscription", "has_payment_method": True, "soft_limit_usd": limit,
        "hard_limit_usd": limit, "system_hard_limit_usd": limit, "access_until": int(key.get("expires_at") or 0),
    }
    if limits.Limits.of(key).any:  # the key's rate limits and budget, beside the spec's fields
        answer["limits"] = limits.shown(key, datetime.now(UTC))
    return answer


def access_token_user(authorization: str | None, api_user: str | None,
                      accounts: AccountsRepository | None = None) -> int:
    """The user id named by both the system access token and `X-Api-User`, whose account is
    enabled (else a 401)."""
    return _token_owner(authorization, api_user, accounts or AccountsRepository())[0]


def _token_owner(authorization: str | None, api_user: str | None,
                 accounts: AccountsRepository) -> tuple[int, dict[str, Any]]:
    """The access token's user id and profile; a 401 for a missing or wrong token or user, or a
    disabled user (disabling a user refuses its access token at once, as it does its keys)."""
    token = (authorization or "").strip()
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    if not token:
        raise AuthenticationFailed("no system access token was given in Authorization")
    api_user = (api_user or "").strip()
    # ASCII digits of an int64 only: int() of "²" or of 5000 digits would fail after the check.
    if not (api_user.isascii() and api_user.isdigit() and len(api_user) <= 19):
        raise AuthenticationFailed("X-Api-User must be the numeric id of the access token's user")
    user_id = accounts.user_id_for_access_token(token)
    if user_id is None or user_id != int(api_user):
        raise AuthenticationFailed("the access token does not belong to the user in X-Api-User")
    user = accounts.get_user(user_id, consistent=True)
    if user is None:
        raise AuthenticationFailed("the access token's user no longer exists")
    if int(user.get("status", 1)) != 1:
        raise AuthenticationFailed("the access token's user is disabled")
    return user_id, user


def user_self(authorization: str | None, api_user: str | None,
              accounts: AccountsRepository | None = None) -> dict[str, Any]:
    """The account envelope for the user named by both the access token and `X-Api-User`."""
    _, user = _token_owner(authorization, api_user, accounts or AccountsRepository())
    record = {name: _FIXED[name] if name in _FIXED else user.get(name) for name in _ACCOUNT_FIELDS}
    if limits.Limits.of(user).any:  # the user's rate limits and budget, beside the spec's fields
        record["limits"] = limits.shown(user, datetime.now(UTC))
    return {"data": record, "message": "", "success": True}
