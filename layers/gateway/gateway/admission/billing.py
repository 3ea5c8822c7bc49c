"""Metering: reserve the worst case before a request, then settle to the real price or refund.

Each step is one DynamoDB transaction over the accounts table:

- `reserve` creates the reservation record and takes the units from the user's quota and, for a
  limited key, the key's quota, each conditioned on enough being left: concurrent requests can
  never spend more than the quota. The id is the gateway's own (a request id it generated, a task
  id): an id that already has a reservation, open or closed, whoever's, is a `Conflict`, so a
  replayed or forged id is refused, never served free nor billed to someone else.
- `settle` and `refund` are conditioned on the reservation still being `reserved`, so a retry,
  an SQS redelivery or a crash followed by a rerun never charges or refunds twice. Settling
  writes the ledger entry and counts the request; a refund writes a zero-unit ledger entry so
  every request leaves a trace. A price above the hold takes at most what the quota has left:
  the quota never goes negative through a request (the entry records the `shortfall`).
  Both add the entry to its day's totals (user, key, model) in the same transaction, which
  the usage reads add up.
- `sweep_stale` (on the task sweeper's schedule) refunds a reservation still open after its
  `hold_until`, the moment its request can no longer be running (a crash, a killed function).
  An open reservation sits in the accounts table's `gsi1` under one of `HOLD_SHARDS` keys,
  ordered by that deadline; closing it removes the index keys, so the index holds only open ones.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway import observability
from gateway.admission.limits import PERIODS, Admission, give_back, window_ids
from gateway.auth import Principal
from gateway.errors import AuthenticationFailed, Conflict, InsufficientQuota, RateLimited
from gateway.observability import logger
from gateway.settings import get_settings
from gateway.store.accounts import (
    HOLD_SHARDS,
    PROFILE,
    day_total_updates,
    hold_index_keys,
    hold_shard,
    key_pk,
    ledger_index,
    reservation_pk,
    usage_sk,
    user_pk,
)
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values

RESERVED, SETTLED, REFUNDED = "reserved", "settled", "refunded"
# The request log's entry types (`gateway.api.requestlog`): a settled request; a refund because the
# request failed (the upstream failed or refused it, its function died: a stale hold); any other
# refund (the client went away first, a task was cancelled).
LOG_CONSUME, LOG_ERROR, LOG_REFUND = 2, 5, 6
# How long after it was reserved a request's hold may still be in use: the longest request
# function's timeout (the text function's 900 s) plus a margin for the settlement itself.
REQUEST_HOLD_SECONDS = 900 + 120
# A task's reservation is closed by the task engine, which fails a task past its maximum age;
# the sweeper steps in only well after that (a task record that was never written).
TASK_HOLD_MARGIN_SECONDS = 3600
# A settlement above the hold retries with what is left this many times before it charges the
# hold alone (concurrent requests of the same account may keep taking what is left).
_SETTLE_ATTEMPTS = 4


@dataclass(frozen=True)
class Reservation:
    reservation_id: str
    user_id: int
    key_hash: str
    key_id: str
    limited_key: bool
    units: int
    model: str
    route: str
    status: str = RESERVED
    created_at: int = 0
    hold_until: int = 0  # 0: reserved before holds had a deadline (never swept)
    parallel: bool = False  # counted under max_parallel until it closes
    budget_ids: tuple[str, ...] = ()  # the budget windows current when it was held (`limits.window_ids`)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Reservation:
        return cls(reservation_id=record["reservation_id"], user_id=int(record["user_id"]),
                   key_hash=record["key_hash"], key_id=record["key_id"], limited_key=bool(record["limited_key"]),
                   units=int(record["units"]), model=record["model"], route=record["route"],
                   status=record["status"], created_at=int(record.get("created_at") or 0),
                   hold_until=int(record.get("hold_until") or 0), parallel=bool(record.get("parallel")),
                   budget_ids=tuple(record.get("budget_ids") or ()))


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


def task_hold_seconds() -> int:
    return int(get_settings().task_max_age_seconds) + TASK_HOLD_MARGIN_SECONDS


def reserve(principal: Principal, units: int, *, model: str, route: str, reservation_id: str,
            hold_seconds: int = REQUEST_HOLD_SECONDS, parallel: bool = False) -> Reservation:
    """Holds `units` of the principal's quota for one request or task, until it is closed or,
    `hold_seconds` from now, swept. Raises `InsufficientQuota` (the quota, or a budget of the user
    or the key), `RateLimited` (an `rpm` or, for a `parallel` request, a `max_parallel` limit), or
    `Conflict` for an id that already has a reservation (whoever's, open or closed): nothing is
    held twice under one id. The limits are conditions of the same transaction (`limits.Admission`):
    no extra round trip; one more only when a window starts afresh or something refuses.
    """
    if units < 0:
        raise ValueError("a reservation cannot be negative")
    moment = clock()
    now = int(moment.timestamp())
    ids = window_ids(moment)
    record = {
        "pk": reservation_pk(reservation_id), "sk": "RES", "reservation_id": reservation_id,
        "user_id": principal.user_id, "key_hash": principal.key_hash, "key_id": principal.key_id,
        "limited_key": not principal.unlimited, "units": units, "model": model, "route": route,
        "status": RESERVED, "created_at": now, "hold_until": now + int(hold_seconds),
        "parallel": parallel, "budget_ids": [ids[p] for p in PERIODS],
        **hold_index_keys(reservation_id, now + int(hold_seconds)),
    }
    user, key = Admission(units, moment, parallel), Admission(units, moment, parallel)
    for _ in range(_ADMISSION_ATTEMPTS):
        try:
            _transact([
                {"Put": {"TableName": _table(), "Item": to_item(record),
                         "ConditionExpression": "attribute_not_exists(pk)"}},
                _admitted(user_pk(principal.user_id), PROFILE, user, "quota >= :u AND #s = :enabled",
                          "quota :neg", {":u": units, ":neg": -units, ":enabled": 1}),
                _admitted(key_pk(principal.key_hash), "KEY", key, *_key_terms(principal, units, now)),
            ])
            return Reservation.from_record(record)
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            reasons = _reasons(exc)
            if reasons and reasons[0] == "ConditionalCheckFailed":
                # Whether it is open or closed, and whose it is, is not the caller's business.
                raise Conflict(f"request id {reservation_id} has already been used; a request is billed once "
                               "under its own id", code="duplicate_request") from None
            if len(reasons) > 2 and reasons[2] == "ConditionalCheckFailed":
                _refused_by_key(principal, units, key)
            else:
                _refused_by_user(principal, units, user)
    raise RateLimited("the account's limits are changing at this moment; retry", code="account_busy",
                      headers={"Retry-After": "1"})


# A reservation that finds a window over asks again with it renewed (user and key: at most twice).
_ADMISSION_ATTEMPTS = 4


def clock() -> datetime:
    """The moment limits and budgets are counted at (tests freeze it)."""
    return datetime.now(UTC)


def _key_terms(principal: Principal, units: int, now: int) -> tuple[str, str, dict[str, Any]]:
    """The key's own condition and additions: active, and for a limited key enough quota."""
    if principal.unlimited:
        return "#s = :active", "", {":now": now, ":active": "active"}
    return "#s = :active AND remain_quota >= :u", "remain_quota :neg", {
        ":now": now, ":active": "active", ":u": units, ":neg": -units}


def _admitted(pk: str, sk: str, admission: Admission, condition: str, add: str,
              values: dict[str, Any]) -> dict[str, Any]:
    """The reservation's update of a profile or a key: its own condition and addition, and the
    limits' (`Admission.parts`)."""
    conditions, sets, adds, more = admission.parts()
    if sk == "KEY":
        sets = ["last_used_at = :now", *sets]
    expression = " ".join(part for part in (
        "SET " + ", ".join(sets) if sets else "", "ADD " + ", ".join(([add] if add else []) + adds)) if part)
    return {"Update": {"TableName": _table(), "Key": to_item({"pk": pk, "sk": sk}), "UpdateExpression": expression,
                       "ConditionExpression": " AND ".join([condition, *conditions]),
                       "ExpressionAttributeNames": {"#s": "status"},
                       "ExpressionAttributeValues": to_values({**values, **more})}}


def _read(pk: str, sk: str) -> dict[str, Any]:
    return from_item(_db().get_item(TableName=_table(), Key=to_item({"pk": pk, "sk": sk}),
                                    ConsistentRead=True).get("Item")) or {}


def _refused_by_key(principal: Principal, units: int, admission: Admission) -> None:
    """Returns when another attempt may pass (a window renewed); else raises the refusal."""
    key = _read(key_pk(principal.key_hash), "KEY")
    if not key or key.get("status") != "active":
        raise AuthenticationFailed("the API key has been revoked") from None
    if not principal.unlimited and int(key.get("remain_quota", 0)) < units:
        raise InsufficientQuota(f"this key's remaining quota is {key.get('remain_quota', 0)} units; "
                                f"the request needs up to {units}") from None
    admission.verdict(key, "this key's")  # raises a refusal; else another attempt may pass


def _refused_by_user(principal: Principal, units: int, admission: Admission) -> None:
    user = _read(user_pk(principal.user_id), PROFILE)
    if int(user.get("status", 1)) != 1 or int(user.get("quota", 0)) < units:
        raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to {units} "
                                "units") from None
    admission.verdict(user, "the account's")


def reserve_request(principal: Principal, units: int, *, model: str, route: str, request_id: str) -> Reservation:
    """`reserve` for a synchronous request, keyed by the gateway's request id and held no longer
    than a request can run."""
    return reserve(principal, units, model=model, route=route, reservation_id=request_id,
                   hold_seconds=REQUEST_HOLD_SECONDS, parallel=True)


# DynamoDB cancels a transaction that meets another one on the same item (a user's profile and
# day totals are in every reservation and settlement of that user): asked again, it goes through.
_CONFLICT_ATTEMPTS = 6


def _transact(writes: list[dict[str, Any]]) -> None:
    """One transaction, asked again (with a short random pause) while it is cancelled only for a
    conflict with another transaction; a failed condition or anything else is raised at once, so a
    conflict is never read as "already closed" or "quota too low"."""
    for attempt in range(_CONFLICT_ATTEMPTS):
        try:
            _db().transact_write_items(TransactItems=writes)
            return
        except Exception as exc:
            reasons = _reasons(exc)
            if "TransactionConflict" not in reasons or "ConditionalCheckFailed" in reasons:
                raise
            if attempt == _CONFLICT_ATTEMPTS - 1:
                raise RateLimited("the account is busy with other requests at this moment; retry",
                                  code="account_busy", headers={"Retry-After": "1"}) from None
            time.sleep(random.uniform(0, 0.01 * 2 ** attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _reasons(exc: Exception) -> list[str | None]:
    return [r.get("Code") for r in getattr(exc, "response", {}).get("CancellationReasons", [])]


def get_reservation(reservation_id: str) -> Reservation | None:
    found = _db().get_item(TableName=_table(), Key=to_item({"pk": reservation_pk(reservation_id), "sk": "RES"}),
                           ConsistentRead=True).get("Item")
    return Reservation.from_record(from_item(found)) if found else None


def settle(reservation: Reservation, units: int, *, detail: dict[str, Any] | None = None) -> bool:
    """Charges the real price and returns the rest of the hold. True if this call settled it.

    A price above the hold (the hold was an estimate) takes at most what the quota has left, the
    user's and, for a limited key, the key's: the quota never goes negative through a request.
    The ledger entry records the part that could not be charged as its `shortfall`.
    """
    wanted = max(int(units), 0)
    charge = wanted
    for attempt in range(_SETTLE_ATTEMPTS):
        if attempt == _SETTLE_ATTEMPTS - 1:
            charge = min(charge, reservation.units)  # the hold itself is always there to take
        try:
            return _close(reservation, SETTLED, charge, detail, wanted=wanted)
        except _QuotaShort:
            charge = reservation.units + min(charge - reservation.units, _left(reservation))
    raise AssertionError("unreachable: the last attempt charges no more than the hold")


def refund(reservation: Reservation, *, reason: str = "", error: bool = True,
           detail: dict[str, Any] | None = None) -> bool:
    """Gives the whole hold back. True if this call refunded it.

    `error` says the request failed (the log's type 5); False is a refund for another cause
    (type 6: the client went away before the answer, a task was cancelled)."""
    detail = {**(detail or {}), **({"reason": reason} if reason else {})}
    return _close(reservation, REFUNDED, 0, detail or None, log_type=LOG_ERROR if error else LOG_REFUND)


class _QuotaShort(Exception):
    """The quota no longer covers a charge above the hold."""


def _left(reservation: Reservation) -> int:
    """What the reservation's user (and limited key) have left to pay beyond the hold, at least 0."""
    def read(pk: str, sk: str, field: str) -> int:
        item = from_item(_db().get_item(TableName=_table(), Key=to_item({"pk": pk, "sk": sk}),
                                        ConsistentRead=True).get("Item")) or {}
        return int(item.get(field, 0))

    left = read(user_pk(reservation.user_id), PROFILE, "quota")
    if reservation.limited_key:
        left = min(left, read(key_pk(reservation.key_hash), "KEY", "remain_quota"))
    return max(left, 0)


def _close(reservation: Reservation, outcome: str, units: int, detail: dict[str, Any] | None, *,
           wanted: int | None = None, log_type: int = LOG_CONSUME, budget_back: bool = True) -> bool:
    """One transaction: the reservation leaves `reserved`, the quotas take `units` and get the
    rest of the hold back (and the budgets, while the window it was held in lasts), its place
    under `max_parallel` is freed, the ledger entry is written. False if it was already closed."""
    now = datetime.now(UTC)
    back = max(reservation.units - units, 0) if budget_back else 0
    writes = [
        _closed_reservation(reservation, outcome, units, now),
        _user_counts(reservation, outcome, units, back),
        _key_counts(reservation, units, back),
        _ledger_entry(reservation, outcome, units, detail, now, shortfall=max((wanted or 0) - units, 0),
                      log_type=log_type),
    ]
    writes += day_total_updates(_table(), user_id=reservation.user_id, key_id=reservation.key_id,
                                model=reservation.model, units=units, at=now)  # the usage reads' day totals
    try:
        _transact(writes)
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
        reasons = _reasons(exc)
        quota_refused = "ConditionalCheckFailed" in reasons[1:3] and reasons[0] != "ConditionalCheckFailed"
        if quota_refused and back and reservation.budget_ids:
            # The budget window the hold was taken in is over: the new one owes it nothing.
            return _close(reservation, outcome, units, detail, wanted=wanted, log_type=log_type, budget_back=False)
        if units > reservation.units and quota_refused:
            raise _QuotaShort() from None
        return False  # already settled or refunded: nothing moves twice
    if outcome == SETTLED:
        observability.units_billed(units, route=reservation.route, model=reservation.model)
    return True


def _closed_reservation(reservation: Reservation, outcome: str, units: int, now: datetime) -> dict[str, Any]:
    return {"Update": {
        "TableName": _table(), "Key": to_item({"pk": reservation_pk(reservation.reservation_id), "sk": "RES"}),
        # Out of the open-reservation index: the sweeper never sees a closed one again.
        "UpdateExpression": "SET #s = :outcome, closed_units = :used, closed_at = :now REMOVE gsi1pk, gsi1sk",
        "ConditionExpression": "#s = :reserved", "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": to_values({":outcome": outcome, ":used": units, ":reserved": RESERVED,
                                                ":now": int(now.timestamp())})}}


def _user_counts(reservation: Reservation, outcome: str, units: int, budget_back: int) -> dict[str, Any]:
    """The user's quota gets the rest of the hold back (or pays what the price exceeds it by,
    only if it has that much left), and a settlement counts the request."""
    back, over = reservation.units - units, max(units - reservation.units, 0)
    adds = ["quota :back", *(["used_quota :used", "request_count :one"] if outcome == SETTLED else [])]
    values: dict[str, Any] = {":back": back, **({":used": units, ":one": 1} if outcome == SETTLED else {})}
    return _counts(user_pk(reservation.user_id), PROFILE, reservation, adds, values,
                   "quota >= :over" if over else "", over, budget_back)


def _key_counts(reservation: Reservation, units: int, budget_back: int) -> dict[str, Any]:
    back, over = reservation.units - units, max(units - reservation.units, 0)
    if reservation.limited_key:
        adds, values = ["remain_quota :back", "used_quota :used"], {":back": back, ":used": units}
        condition = "remain_quota >= :over" if over else ""
    else:
        adds, values, condition = ["used_quota :used"], {":used": units}, ""
    return _counts(key_pk(reservation.key_hash), "KEY", reservation, adds, values, condition, over, budget_back)


def _counts(pk: str, sk: str, reservation: Reservation, adds: list[str], values: dict[str, Any], condition: str,
            over: int, budget_back: int) -> dict[str, Any]:
    """A closing update of a profile or a key: its own additions, and what goes back to its limits."""
    limit_condition, limit_adds, limit_values = give_back(list(reservation.budget_ids), budget_back,
                                                          reservation.parallel)
    update: dict[str, Any] = {"TableName": _table(), "Key": to_item({"pk": pk, "sk": sk}),
                              "UpdateExpression": "ADD " + ", ".join(adds + limit_adds)}
    conditions = [c for c in (condition, limit_condition) if c]
    if conditions:
        update["ConditionExpression"] = " AND ".join(conditions)
    if over:
        values[":over"] = over
    update["ExpressionAttributeValues"] = to_values({**values, **limit_values})
    return {"Update": update}


def _ledger_entry(reservation: Reservation, outcome: str, units: int, detail: dict[str, Any] | None,
                  now: datetime, *, shortfall: int, log_type: int) -> dict[str, Any]:
    entry = {
        "pk": user_pk(reservation.user_id), "sk": usage_sk(now, reservation.reservation_id),
        "request_id": reservation.reservation_id, "key_id": reservation.key_id, "model": reservation.model,
        "route": reservation.route, "units": units, "reserved_units": reservation.units, "outcome": outcome,
        "at": int(now.timestamp() * 1000), "detail": detail or None,
        "log_type": log_type, "started_at": reservation.created_at or None,
    }
    # The request log reads one key's or one model's entries through these index keys.
    entry.update(ledger_index(reservation.user_id, reservation.key_id, reservation.model, str(entry["sk"])))
    if shortfall:
        entry["shortfall"] = shortfall  # priced but not charged: the quota had no more
    retention = get_settings().ledger_retention_days
    if retention:
        entry["expires_ttl"] = int(now.timestamp()) + retention * 86400
    return {"Put": {"TableName": _table(), "Item": to_item(entry), "ConditionExpression": "attribute_not_exists(pk)"}}


# ---------------------------------------------------------------------------------------------
# The sweeper's part.

def overdue(now: float, limit: int = 100) -> Iterator[Reservation]:
    """Open reservations whose hold ran out before `now`, earliest first, shard by shard."""
    for shard in range(HOLD_SHARDS):
        params: dict[str, Any] = {
            "TableName": _table(), "IndexName": "gsi1", "Limit": limit,
            "KeyConditionExpression": "gsi1pk = :shard AND gsi1sk < :deadline",
            "ExpressionAttributeValues": to_values({":shard": hold_shard(shard),
                                                    ":deadline": hold_index_keys("", int(now))["gsi1sk"]}),
        }
        while True:
            answer = _db().query(**params)
            for item in answer.get("Items", []):
                yield Reservation.from_record(from_item(item))
            if "LastEvaluatedKey" not in answer:
                break
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def sweep_stale(*, now: float | None = None) -> dict[str, int]:
    """Refunds every reservation still open after its request could still be running; each
    exactly once (the refund is conditioned on it being open), with the reason in its entry."""
    now = time.time() if now is None else now
    counts = {"refunded": 0, "already_closed": 0}
    for reservation in overdue(now):
        if reservation.status != RESERVED:
            counts["already_closed"] += 1  # the index copy was behind
            continue
        when = datetime.fromtimestamp(reservation.hold_until, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        reason = (f"swept: still reserved at {when}, when its request could no longer be running "
                  "(the function crashed, was stopped or timed out)")
        try:
            refunded = refund(reservation, reason=reason)
        except Exception:
            logger.exception("sweeping a reservation failed", extra={"reservation_id": reservation.reservation_id})
            continue
        counts["refunded" if refunded else "already_closed"] += 1
        if refunded:
            logger.warning("stale reservation refunded", extra={"reservation_id": reservation.reservation_id,
                                                                "units": reservation.units})
    return counts
