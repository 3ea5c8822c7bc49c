"""Self-service keys: `/api/token/` in new-api's shape, for the user named by the system access
token and `X-Api-User` (as `/api/user/self`).

Ownership rules: a user sees, changes and deletes only its own keys (another user's key id is a
404, as a missing one); a key never allows more than its user (limits, budget, a quota no larger
than the user's, models that exist); a user never changes its own quota, only its keys' shares of
it; a key the operator revoked stays revoked; a limit the operator set on a key (its
`operator_limits` mark) may be tightened by the owner, never loosened or cleared. A key is
refused by every function within the key cache's time (`GATEWAY_KEY_CACHE_SECONDS`, 5 s) of being disabled or deleted.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gateway import groups
from gateway.admission import balances
from gateway.errors import Conflict, InvalidRequest, NotFound
from gateway.limit_values import OPERATOR_LIMITS, Limits
from gateway.prices import usd_text, usd_to_units
from gateway.schemas.tokens import LimitFields, NewToken, TokenFields, TokenStatus, TokenUpdate
from gateway.store.keys import KeysRepository
from gateway.store.table import KeyNotFound

MAX_KEYS_PER_USER = 100
PAGE_SIZE_MAX = 100

# new-api's token statuses.
ENABLED, DISABLED, EXPIRED, EXHAUSTED = 1, 2, 3, 4
# The key record's status a user may set and clear; "disabled" (the operator disabled the user)
# and "revoked" (the operator revoked the key) are the operator's.
PAUSED = "paused"


def _status(record: dict[str, Any], now: int) -> int:
    if record.get("status") != "active":
        return DISABLED
    expires_at = int(record.get("expires_at") or 0)
    if expires_at and expires_at <= now:
        return EXPIRED
    if not record.get("unlimited") and int(record.get("remain_quota") or 0) <= 0:
        return EXHAUSTED
    return ENABLED


def token_view(record: dict[str, Any], now: int | None = None) -> dict[str, Any]:
    """A key record as new-api's token object, with its limits; the key itself only as a hint."""
    now = int(time.time()) if now is None else now
    models = record.get("allowed_models") or []
    return {
        "id": record["key_id"], "user_id": int(record["user_id"]), "key": record.get("key_hint", ""),
        "status": _status(record, now), "name": record.get("name", ""),
        "created_time": int(record.get("created_at") or 0), "accessed_time": int(record.get("last_used_at") or 0),
        "expired_time": int(record.get("expires_at") or 0) or -1,
        "remain_quota": int(record.get("remain_quota") or 0), "unlimited_quota": bool(record.get("unlimited")),
        "used_quota": int(record.get("used_quota") or 0),
        "model_limits_enabled": bool(models), "model_limits": ",".join(models),
        "group": record.get("group") or "",
        **Limits.of(record).view(),
        # The limits the operator set (the owner may lower each, never raise or clear one).
        "operator_limits": {name: value for name, value in Limits.operator_set(record).view().items() if value},
    }


def _page(query: Mapping[str, str] | None) -> tuple[int, int]:
    query = query or {}
    values = []
    for name, default, low, high in (("p", 0, 0, 10**6), ("size", 20, 1, PAGE_SIZE_MAX)):
        text = str(query.get(name) or "").strip()
        if not text:
            values.append(default)
            continue
        if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
            raise InvalidRequest(f"{name}: must be a whole number from {low} to {high}", param=name)
        values.append(int(text))
    return values[0], values[1]


def list_tokens(user_id: int, query: Mapping[str, str] | None) -> dict[str, Any]:
    """One page of the user's keys, newest first (`p` from 0)."""
    page, size = _page(query)
    records = sorted(balances.list_keys(user_id),
                     key=lambda r: (int(r.get("created_ms") or int(r.get("created_at") or 0) * 1000),
                                    r["key_id"]), reverse=True)
    now = int(time.time())
    items = [token_view(r, now) for r in records[page * size:(page + 1) * size]]
    return _ok({"items": items, "total": len(records), "page": page, "page_size": size})


def create_token(user_id: int, body: NewToken, accounts: KeysRepository | None = None) -> dict[str, Any]:
    """A new key of the user, within the user's own limits; the answer shows the key, once."""
    accounts = accounts or KeysRepository()
    user = _user(user_id)
    if len(balances.list_keys(user_id)) >= MAX_KEYS_PER_USER:
        raise Conflict(f"a user has at most {MAX_KEYS_PER_USER} keys: delete one first", code="too_many_keys")
    limits = _limits(body, Limits.defaults().capped(Limits.of(user)), user)
    expires_at = _expiry(body.expired_time) if body.expired_time is not None else 0
    # Neither given: the key spends from the user's quota without a share of its own.
    unlimited = body.unlimited_quota if body.unlimited_quota is not None else body.remain_quota is None
    quota = None if unlimited else _quota(body.remain_quota or 0, user)
    models = _models(body, [])
    group = groups.check_key_group(body.group, user)
    secret, record = accounts.create_key(user_id, name=body.name or "", quota=quota, expires_at=expires_at,
                                         allowed_models=models or None, limits=limits.attributes(), group=group)
    return _ok({**token_view(record), "key": secret})


def update_token(user_id: int, body: TokenUpdate, accounts: KeysRepository | None = None) -> dict[str, Any]:
    """Changes the fields given; the others keep their values."""
    accounts = accounts or KeysRepository()
    user = _user(user_id)
    record = _owned(accounts, user_id, body.id)
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["name"] = body.name
    if body.expired_time is not None:
        changes["expires_at"] = _expiry(body.expired_time)
    if body.unlimited_quota is not None:
        changes["unlimited"] = body.unlimited_quota
    if body.remain_quota is not None:
        changes["remain_quota"] = _quota(body.remain_quota, user)
    if body.model_limits_enabled is not None or body.model_limits is not None:
        changes["allowed_models"] = _models(body, record.get("allowed_models") or []) or None
    if body.group is not None:
        changes["group"] = groups.check_key_group(body.group, user) or None
    limits = _limits(body, Limits.of(record), user)
    for field, rule in limits.loosening(Limits.operator_set(record)):
        raise InvalidRequest(f"{field}: {rule}", param=field, code="operator_limit")
    changes.update(limits.attributes(clearing=True))
    # Written only while the operator's mark is the one checked (an operator's change meanwhile wins).
    marks = record.get(OPERATOR_LIMITS)
    condition = (f"{OPERATOR_LIMITS} = :marks", {":marks": marks}) if marks else \
        (f"attribute_not_exists({OPERATOR_LIMITS})", {})
    try:
        updated = accounts.update_key(record["pk"].removeprefix("KEY#"), user_id, changes, condition=condition)
    except KeyNotFound:
        if accounts.user_key(user_id, body.id) is None:
            raise _not_found(body.id) from None
        raise Conflict("the operator changed this key's limits meanwhile; read the key again",
                       code="operator_limit") from None
    return _ok(token_view(updated))


def set_token_status(user_id: int, body: TokenStatus, accounts: KeysRepository | None = None) -> dict[str, Any]:
    """Enables or disables one of the user's keys; a key the operator revoked cannot be enabled."""
    accounts = accounts or KeysRepository()
    _user(user_id)
    record = _owned(accounts, user_id, body.id)
    wanted, other = ("active", PAUSED) if body.status == ENABLED else (PAUSED, "active")
    try:
        updated = accounts.update_key(record["pk"].removeprefix("KEY#"), user_id, {"status": wanted},
                                      condition=("#s IN (:a, :b)", {":a": wanted, ":b": other}))
    except KeyNotFound:
        current = accounts.user_key(user_id, body.id)
        if current is None:
            raise _not_found(body.id) from None
        raise InvalidRequest(f"status: the key is {current.get('status')} by the operator and cannot be changed here",
                             param="status") from None
    return _ok(token_view(updated))


def delete_token(user_id: int, token_id: str, accounts: KeysRepository | None = None) -> dict[str, Any]:
    accounts = accounts or KeysRepository()
    _user(user_id)
    _owned(accounts, user_id, token_id)
    try:
        accounts.delete_key(token_id)
    except KeyNotFound:
        raise _not_found(token_id) from None
    return {"success": True, "message": ""}


def _ok(data: Any) -> dict[str, Any]:
    return {"success": True, "message": "", "data": data}


def _user(user_id: int) -> dict[str, Any]:
    user = balances.get_user(user_id)
    if user is None:  # the access token's check read it a moment ago
        raise NotFound("the user no longer exists")
    return user


def _not_found(token_id: str) -> NotFound:
    return NotFound(f"no key with id '{token_id[:64]}'", param="id", code="token_not_found")


def _owned(accounts: KeysRepository, user_id: int, token_id: str) -> dict[str, Any]:
    record = accounts.user_key(user_id, token_id) if token_id.isascii() and token_id.isalnum() else None
    if record is None:
        raise _not_found(token_id)
    return record


def _expiry(expired_time: int) -> int:
    if expired_time == -1:
        return 0
    if expired_time <= int(time.time()):
        raise InvalidRequest("expired_time: must be -1 (never) or a moment in the future, in epoch seconds",
                             param="expired_time")
    return expired_time


def _quota(units: int, user: dict[str, Any]) -> int:
    """A key's share of the user's quota: never more than the user has left."""
    left = int(user.get("quota") or 0)
    if units > left:
        raise InvalidRequest(f"remain_quota: must not exceed your account's remaining quota, {usd_text(left)}",
                             param="remain_quota")
    return units


def _models(body: TokenFields, current: list[str]) -> list[str]:
    """The key's model allowlist: each name a model the gateway serves; empty when disabled."""
    from gateway.api.models import describe
    from gateway.routing.channels import get_catalog

    text = body.model_limits if body.model_limits is not None else ",".join(current)
    enabled = body.model_limits_enabled if body.model_limits_enabled is not None else bool(current)
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not enabled:
        return []
    if not names:
        raise InvalidRequest("model_limits: name at least one model when model_limits_enabled is true",
                             param="model_limits")
    catalog = get_catalog()
    unknown = [name for name in names if describe(name, catalog) is None]
    if unknown:
        raise InvalidRequest(f"model_limits: no such model: {', '.join(n[:100] for n in unknown[:5])}",
                             param="model_limits")
    return names


def changed_limits(body: LimitFields, current: Limits) -> Limits:
    """The limits after a request: each given field replaces its value (a budget of 0 clears it
    and its period); a budget without a period is a 400 naming `budget_period`."""
    budget_units = usd_to_units(Decimal(str(body.budget_usd))) if body.budget_usd is not None else None
    period: str | None = body.budget_period
    if budget_units == 0:
        period = ""
    try:
        return current.replace(rpm=body.rpm, tpm=body.tpm, max_parallel=body.max_parallel,
                               budget_units=budget_units, budget_period=period)
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="budget_period") from None


def _limits(body: TokenFields, current: Limits, user: dict[str, Any]) -> Limits:
    """The key's limits after this request; none may let more through than the user's own."""
    limits = changed_limits(body, current)
    for field, rule in limits.excess_over(Limits.of(user)):
        raise InvalidRequest(f"{field}: {rule}", param=field)
    return limits
