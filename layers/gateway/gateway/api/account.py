"""Account and credit queries: billing usage, subscription (quota) and the user record.

Units (interface spec, Limits): 500000 quota units per USD; `total_usage` is in cents
(USD x 100); an unlimited key reports 100000000 as its limits.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from gateway.admission import balances, limits
from gateway.auth import Principal
from gateway.errors import AuthenticationFailed, InvalidRequest, shown
from gateway.limit_values import Limits
from gateway.prices import UNITS_PER_USD, units_to_whole_usd
from gateway.store.users import UsersRepository

UNLIMITED_USD = 100_000_000
_UNITS_PER_CENT = UNITS_PER_USD // 100

# The account record of GET /api/user/self, in the spec's order, with its fixed values; beside
# `quota`, `owed_quota` (not new-api's): what a refund or a dispute took back that was already
# spent, repaid from the next credit (commerce.reversals).
_ACCOUNT_FIELDS = (
    "id", "username", "password", "display_name", "role", "status", "email", "github_id", "wechat_id",
    "oidc_id", "google_id", "verification_code", "access_token", "quota", "owed_quota", "used_quota", "request_count",
    "group", "can_use_self_group", "aff_code", "inviter_id", "aff_count", "aff_quota", "aff_history_quota",
    "created_at", "last_login_at", "last_login_ip", "deleted_at", "group_ratio", "topup_ratio",
)
_FIXED = {"password": "", "verification_code": "", "access_token": None, "deleted_at": None}
_ZERO_UNLESS_SET = ("owed_quota",)


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


def billing_usage(principal: Principal, start_date: str | None, end_date: str | None) -> dict[str, Any]:
    """What this key has spent between the dates (both optional, inclusive), in cents."""
    start, end = parse_date("start_date", start_date), parse_date("end_date", end_date, end=True)
    if start and end and start > end:
        raise InvalidRequest("start_date: must not be after end_date", param="start_date")
    units = balances.usage(principal.user_id, start=start, end=end, key_id=principal.key_id).units
    cents = Decimal(units) / _UNITS_PER_CENT
    return {"object": "list", "total_usage": int(cents) if cents == cents.to_integral_value() else float(cents)}


def subscription(principal: Principal) -> dict[str, Any]:
    """The key's authorized quota in whole USD: what is left plus what it has used."""
    key = balances.get_key(principal.key_hash) or {}
    # True once the user has paid online (`commerce.payments` sets it with the credit).
    paid = bool((UsersRepository().raw_user(principal.user_id) or {}).get("has_payment_method"))
    if key.get("unlimited"):
        limit = UNLIMITED_USD
    else:
        limit = units_to_whole_usd(int(key.get("remain_quota", 0)) + int(key.get("used_quota", 0)))
    answer = {
        "object": "billing_subscription", "has_payment_method": paid, "soft_limit_usd": limit,
        "hard_limit_usd": limit, "system_hard_limit_usd": limit, "access_until": int(key.get("expires_at") or 0),
    }
    if Limits.of(key).any:  # the key's rate limits and budget, beside the spec's fields
        answer["limits"] = limits.shown(key, limits.limit_scope(key_id=principal.key_id), datetime.now(UTC))
    return answer


def access_token_user(authorization: str | None, api_user: str | None) -> int:
    """The user id named by both the system access token and `X-Api-User`, whose account is
    enabled (else a 401)."""
    return token_owner(authorization, api_user)[0]


def token_owner(authorization: str | None, api_user: str | None) -> tuple[int, dict[str, Any]]:
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
    record = UsersRepository().access_token_record(token)
    if record is None:
        raise AuthenticationFailed("the access token is not valid")
    user_id = int(record["user_id"])
    if user_id != int(api_user):
        raise AuthenticationFailed("the access token does not belong to the user in X-Api-User")
    if record.get("replaced_at"):
        raise AuthenticationFailed("the access token has been replaced by a newer one (set-access-token)")
    user = balances.get_user(user_id)
    if user is None:
        raise AuthenticationFailed("the access token's user no longer exists")
    if int(user.get("status", 1)) != 1:
        raise AuthenticationFailed("the access token's user is disabled")
    return user_id, user


def user_self(authorization: str | None, api_user: str | None) -> dict[str, Any]:
    """The account envelope for the user named by both the access token and `X-Api-User`."""
    return account_record(token_owner(authorization, api_user)[1])


def account_record(user: dict[str, Any]) -> dict[str, Any]:
    """The account envelope of GET /api/user/self for a user profile (no secret, no hash)."""
    record = {name: _FIXED[name] if name in _FIXED else user.get(name) for name in _ACCOUNT_FIELDS}
    record.update({name: int(user.get(name) or 0) for name in _ZERO_UNLESS_SET})
    # Beyond new-api's record: the user's own limits (rpm, tpm, max_parallel, budget_usd, budget_period)
    # and, under a budget, what is left of it and when it resets.
    shown = limits.shown(user, limits.limit_scope(user_id=int(user["id"])), datetime.now(UTC))
    return {"data": {**record, **shown}, "message": "", "success": True}


#: The spend chart's spans (days, today included).
SPEND_DAYS = (7, 30, 90)


def spend_days(query: dict[str, str] | None) -> int:
    text = ((query or {}).get("days") or "7").strip()
    if text not in {str(d) for d in SPEND_DAYS}:
        raise InvalidRequest(f"days: must be one of {', '.join(map(str, SPEND_DAYS))}, got '{shown(text, 20)}'",
                             param="days")
    return int(text)


#: The counters of a spend row, in order (`spend_rows`): a model's day counters by their suffix.
SPEND_COUNTERS = ("units", "requests", "input_tokens", "output_tokens", "failed")


def spend_rows(days: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """(day, model) -> [units, requests, input tokens, output tokens, failed requests] from day items'
    per-model counters."""
    rows: dict[tuple[str, str], list[int]] = {}
    for day in days:
        for name, value in day.items():
            if not name.startswith("model:"):
                continue
            model, _, counter = name[len("model:"):].rpartition(":")
            if counter not in SPEND_COUNTERS:
                continue
            row = rows.setdefault((str(day["sk"]), model), [0] * len(SPEND_COUNTERS))
            row[SPEND_COUNTERS.index(counter)] += int(value)
    return rows


def spend_answer(rows: dict[tuple[str, str], list[int]], first: date, last: date) -> dict[str, Any]:
    """The spend chart's rows; `token_used` is new-api's name for a row's tokens (input + output);
    `count` the requests served (settled), as the user's `request_count` counts them."""
    return {"success": True, "message": "", "data": {
        "start_day": first.isoformat(), "end_day": last.isoformat(),
        "rows": [{"day": day, "model_name": model, "quota": units, "count": count, "prompt_tokens": prompt,
                  "completion_tokens": completion, "token_used": prompt + completion}
                 for (day, model), (units, requests, prompt, completion, failed) in sorted(rows.items())
                 for count in [requests - failed]]}}


def spend_span(query: dict[str, str] | None, today: date | None = None) -> tuple[date, date]:
    last = today or datetime.now(UTC).date()
    return last - timedelta(days=spend_days(query) - 1), last


def self_spend(user_id: int, query: dict[str, str] | None, today: date | None = None) -> dict[str, Any]:
    """GET /api/data/self?days=7|30|90: the user's spend (units) and requests per UTC day and model,
    read from its day totals (one Query)."""
    first, last = spend_span(query, today)
    return spend_answer(spend_rows(balances.day_totals(user_id, first, last)), first, last)
