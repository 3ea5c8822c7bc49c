"""Metering: hold the worst case before a request, then settle to the real price or refund.

The admission path's front door. A synchronous request (`reserve_request`) is held on a quota
lease of the serving instance (`gateway.admission.leases`: no DynamoDB call before the upstream
call while the instance has a lease with the units free; closing it writes the lease and the
ledger entry, never the account's own items). A task (`reserve`: held for up to its maximum age,
closed by another invocation) keeps a durable reservation record. `settle` and `refund` close
either kind; `sweep_stale` returns what a dead holder left, of either kind, exactly once.

A durable reservation's steps are each one DynamoDB transaction over the accounts table:

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

import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from gateway import observability
from gateway.admission import lease_folds, leases, limits, steps
from gateway.admission.ledger import (
    LOG_CONSUME,
    LOG_ERROR,
    LOG_REFUND,
    REFUNDED,
    REQUEST_HOLD_SECONDS,
    RESERVED,
    SETTLED,
    Reservation,
    entry,
)
from gateway.admission.transactions import transact
from gateway.auth import USER_DISABLED, Principal, key_refusal
from gateway.aws_failures import cancellation_reasons
from gateway.errors import AuthenticationFailed, Conflict, InsufficientQuota
from gateway.observability import logger
from gateway.prices import usd_text, with_ratio
from gateway.settings import get_settings
from gateway.store.aws import (
    client,
    from_item,
    is_condition_failure,
    to_item,
    to_values,
)
from gateway.store.holds import HOLD_SHARDS, hold_index_keys, hold_shard, is_lease, quota_debit, reservation_pk
from gateway.store.table import PROFILE, key_pk, user_pk
from gateway.store.usage import day_total_updates

steps.register(limits.step())  # rate limits and budgets: the admission step of every hold

#: How long a closed reservation, and a finished task (`tasks.engine.finish`), is kept before TTL deletes it.
CLOSED_KEPT_SECONDS = 30 * 86400
# A task's reservation is closed by the task engine, which fails a task past its maximum age;
# the sweeper steps in only well after that (a task record that was never written).
TASK_HOLD_MARGIN_SECONDS = 3600
# A settlement above the hold retries with what is left this many times before it charges the
# hold alone (concurrent requests of the same account may keep taking what is left).
_SETTLE_ATTEMPTS = 4


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


def task_hold_seconds(max_age_seconds: float | None = None) -> int:
    """How long a task's hold lasts: its family's maximum age (else the tasks' setting) and a margin."""
    return int(max_age_seconds or get_settings().task_max_age_seconds) + TASK_HOLD_MARGIN_SECONDS


def reserve(principal: Principal, units: int, *, model: str, route: str, reservation_id: str,
            hold_seconds: int = REQUEST_HOLD_SECONDS) -> Reservation:
    """Holds `units` of the principal's quota for one request or task, until it is closed or,
    `hold_seconds` from now, swept. Raises `InsufficientQuota`, or `Conflict` for an id that
    already has a reservation (whoever's, open or closed): nothing is held twice under one id.
    """
    if units < 0:
        raise ValueError("a reservation cannot be negative")
    base, units = units, with_ratio(units, principal.group_ratio)
    request = steps.AdmissionRequest(principal, units, model, route, reservation_id, parallel=False)
    entered = steps.enter(request)  # a task counts under rpm and its budget, never max_parallel
    try:
        return _reserve(principal, units, model=model, route=route, reservation_id=reservation_id,
                        hold_seconds=hold_seconds, notes=limits.durable_notes(request), base=base)
    except BaseException:
        steps.leave(request, entered, None)
        raise


def _reserve(principal: Principal, units: int, *, model: str, route: str, reservation_id: str,
             hold_seconds: int, notes: list[list[str]], base: int) -> Reservation:
    table, now = _table(), int(time.time())
    record = {
        "pk": reservation_pk(reservation_id), "sk": "RES", "reservation_id": reservation_id,
        "user_id": principal.user_id, "key_hash": principal.key_hash, "key_id": principal.key_id,
        "limited_key": not principal.unlimited, "units": units, "model": model, "route": route,
        "status": RESERVED, "created_at": now, "hold_until": now + int(hold_seconds), "hold_id": uuid.uuid4().hex,
        **hold_index_keys(reservation_id, now + int(hold_seconds)),
        **({"limit_budgets": notes} if notes else {}),
        "group": principal.group, "group_ratio": str(principal.group_ratio), "base_units": base,
    }
    key_update: dict[str, Any] = {
        "TableName": table, "Key": to_item({"pk": key_pk(principal.key_hash), "sk": "KEY"}),
        "ExpressionAttributeNames": {"#s": "status"},
    }
    if principal.unlimited:
        key_update.update(UpdateExpression="SET last_used_at = :now",
                          ConditionExpression="#s = :active",
                          ExpressionAttributeValues=to_values({":now": now, ":active": "active"}))
    else:
        key_update.update(UpdateExpression="SET last_used_at = :now ADD remain_quota :neg",
                          ConditionExpression="#s = :active AND remain_quota >= :u",
                          ExpressionAttributeValues=to_values(
                              {":now": now, ":active": "active", ":u": units, ":neg": -units}))
    try:
        transact([
            {"Put": {"TableName": table, "Item": to_item(record),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            quota_debit(table, principal.user_id, units),
            {"Update": key_update},
        ])
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
        refused = _refused(exc)  # 0 the reservation, 1 the user, 2 the key
        if 0 in refused:
            if _held_by(record):  # this very hold, applied by an attempt whose answer was lost
                return Reservation.from_record(record)
            # Whether it is open or closed, and whose it is, is not the caller's business.
            raise Conflict(f"request id {reservation_id} has already been used; a request is billed once under "
                           "its own id", code="duplicate_request") from None
        if 2 in refused:
            key = from_item(_db().get_item(TableName=table, Key=to_item(
                {"pk": key_pk(principal.key_hash), "sk": "KEY"}), ConsistentRead=True).get("Item"))
            if not key or key.get("status") != "active":
                raise AuthenticationFailed(key_refusal(key)) from None
            raise InsufficientQuota(
                f"this key's remaining quota is {usd_text(int(key['remain_quota']))}; "
                f"the request needs up to {usd_text(units)}") from None
        if 1 in refused:
            user = from_item(_db().get_item(TableName=table, Key=to_item(
                {"pk": user_pk(principal.user_id), "sk": PROFILE}), ConsistentRead=True).get("Item"))
            if not user or int(user["status"]) != 1:
                raise AuthenticationFailed(USER_DISABLED) from None
        raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to "
                                f"{usd_text(units)}") from None
    return Reservation.from_record(record)


def _held_by(record: dict[str, Any]) -> bool:
    """Whether the stored reservation is `record` itself (its `hold_id`): `transact` asks a
    transaction again after a cancellation, and an earlier attempt of botocore's whose answer was
    lost may have applied it already."""
    found = _db().get_item(TableName=_table(), Key=to_item({"pk": record["pk"], "sk": "RES"}),
                           ConsistentRead=True).get("Item") or {}
    return found.get("hold_id", {}).get("S") == record["hold_id"]


def reserve_request(principal: Principal, units: int, *, model: str, route: str, request_id: str,
                    pool: leases.LeasePool | None = None, claim_id: bool = False, tokens: int = 0) -> Reservation:
    """Holds a synchronous request's worst case (`units`, before the principal's group ratio, which
    this applies) on a quota lease of this instance (`pool`, by
    default the process's), keyed by the gateway's request id, after the admission steps
    (`gateway.admission.steps`) let it in. Raises `InsufficientQuota`, `AuthenticationFailed`,
    `Conflict` for an id already used, or a step's refusal.

    `claim_id`: the id is not one this process just made (API Gateway's request id, which a
    replayed event carries again): it is claimed first, in one conditional write of its own
    (never on the account's items), so that an id is served once. The text function makes a fresh
    id per request and claims nothing: no DynamoDB call before its upstream call."""
    if claim_id:
        _claim(request_id)
    held = (pool or leases.pool()).hold(principal, with_ratio(units, principal.group_ratio), model=model,
                                        route=route, request_id=request_id, tokens=tokens)
    return replace(held, group=principal.group, group_ratio=str(principal.group_ratio), base_units=units)


def _claim(request_id: str) -> None:
    """Marks a request id used, in the reservations' own namespace (`RES#<id>`): an id that has a
    reservation or a claim already, whoever's, is a `Conflict`. The claim carries a fresh
    `claim_id`, so a put DynamoDB applied whose answer was lost (botocore's retry then meets the
    claim itself) is known as this call's own."""
    claim_id = uuid.uuid4().hex
    key = {"pk": reservation_pk(request_id), "sk": "RES"}
    try:
        _db().put_item(TableName=_table(), Item=to_item({
            **key, "reservation_id": request_id, "status": "claimed", "claim_id": claim_id,
            "created_at": int(time.time())}), ConditionExpression="attribute_not_exists(pk)")
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
        found = _db().get_item(TableName=_table(), Key=to_item(key), ConsistentRead=True).get("Item") or {}
        if found.get("claim_id", {}).get("S") == claim_id:
            return
        raise Conflict(f"request id {request_id} has already been used; a request is billed once under its own id",
                       code="duplicate_request") from None


def _refused(exc: Exception) -> set[int]:
    """The positions, in the transaction, of the writes whose condition failed."""
    return {i for i, code in enumerate(cancellation_reasons(exc)) if code == "ConditionalCheckFailed"}


def get_reservation(reservation_id: str) -> Reservation | None:
    """A durable reservation (None for none, and for an id only claimed by a leased request)."""
    found = from_item(_db().get_item(TableName=_table(), Key=to_item({"pk": reservation_pk(reservation_id),
                                                                      "sk": "RES"}), ConsistentRead=True).get("Item"))
    return Reservation.from_record(found) if found and found.get("status") != "claimed" else None


def settle(reservation: Reservation, units: int, *, detail: dict[str, Any] | None = None,
           pool: leases.LeasePool | None = None) -> bool:
    """Charges the real price and returns the rest of the hold. True if this call settled it.

    `units` is the price before the group ratio: the ratio the hold was taken at
    (`reservation.group_ratio`) makes the charge, here and nowhere else (`prices.with_ratio`).

    A price above the hold (the hold was an estimate) takes at most what the quota has left (for a
    lease hold: what the lease has free), the user's and, for a limited key, the key's: the quota
    never goes negative through a request. The ledger entry records the part that could not be
    charged as its `shortfall`.
    """
    base = max(int(units), 0)
    wanted = with_ratio(base, reservation.group_ratio)  # the hold's ratio, whatever the group is now
    if reservation.lease_id:
        return (pool or leases.pool()).close(reservation, SETTLED, wanted, detail, wanted=wanted, base_units=base)
    charge = wanted
    for _ in range(_SETTLE_ATTEMPTS - 1):
        try:
            return _close(reservation, charge, detail, settled=True, shortfall=wanted - charge, base_units=base)
        except _QuotaShort:
            charge = reservation.units + min(charge - reservation.units, _left(reservation))
    charge = min(charge, reservation.units)  # the last attempt: the hold itself is always there to take
    return _close(reservation, charge, detail, settled=True, shortfall=wanted - charge, base_units=base)


def refund(reservation: Reservation, *, reason: str = "", error: bool = True,
           detail: dict[str, Any] | None = None, pool: leases.LeasePool | None = None) -> bool:
    """Gives the whole hold back. True if this call refunded it.

    `error` says the request failed (the log's type 5); False is a refund for another cause
    (type 6: the client went away before the answer, a task was cancelled)."""
    detail = {**(detail or {}), **({"reason": reason} if reason else {})}
    if reservation.lease_id:
        return (pool or leases.pool()).close(reservation, REFUNDED, 0, detail or None, wanted=0,
                                             log_type=LOG_ERROR if error else LOG_REFUND, base_units=0)
    # (its ledger entry's base price is then its units, 0)
    return _close(reservation, 0, detail or None, settled=False, log_type=LOG_ERROR if error else LOG_REFUND)


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


def _close(reservation: Reservation, units: int, detail: dict[str, Any] | None, *, settled: bool,
           shortfall: int = 0, log_type: int = LOG_CONSUME, base_units: int | None = None) -> bool:
    """One transaction: the reservation leaves `reserved` (settled, or refunded), the quotas take
    `units` and get the rest of the hold back, the ledger entry is written (with the `shortfall`
    a settlement could not charge: `settle` never charges more than the price). False if it was
    already closed."""
    now, outcome = datetime.now(UTC), SETTLED if settled else REFUNDED
    writes = [
        _closed_reservation(reservation, outcome, units, now),
        _user_counts(reservation, units, settled=settled),
        _key_counts(reservation, units),
        {"Put": {"TableName": _table(), "Item": to_item(entry(
            reservation, outcome, units, detail, now, shortfall=shortfall, log_type=log_type,
            base_units=base_units)),
            "ConditionExpression": "attribute_not_exists(pk)"}},
    ]
    writes += day_total_updates(_table(), user_id=reservation.user_id, key_id=reservation.key_id,
                                model=reservation.model, units=units, at=now,
                                detail=detail, failed=not settled)  # the usage reads' day totals
    try:
        transact(writes)
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
        # The first write refused says why: the reservation (0) is closed already, or the user's
        # (1) or the key's (2) quota cannot pay what the price exceeds the hold by (their only
        # conditions, set only for a price above the hold).
        if min(_refused(exc), default=None) in (1, 2):
            raise _QuotaShort() from None
        return False  # already settled or refunded: nothing moves twice
    if reservation.limit_budgets:  # the task's budget windows get back what it did not spend
        request = steps.AdmissionRequest(_principal_of(reservation), reservation.units, reservation.model,
                                         reservation.route, reservation.reservation_id, parallel=False)
        limits.step().leave(limits.durable_request(request, [list(p) for p in reservation.limit_budgets]), units)
    if settled:
        observability.units_billed(units, route=reservation.route, model=reservation.model)
    return True


def _principal_of(reservation: Reservation) -> Principal:
    return Principal(user_id=reservation.user_id, key_hash=reservation.key_hash, key_id=reservation.key_id,
                     key_name="", unlimited=not reservation.limited_key, allowed_models=None, expires_at=0)


def _closed_reservation(reservation: Reservation, outcome: str, units: int, now: datetime) -> dict[str, Any]:
    return {"Update": {
        "TableName": _table(), "Key": to_item({"pk": reservation_pk(reservation.reservation_id), "sk": "RES"}),
        # Out of the open-reservation index: the sweeper never sees a closed one again.
        # A closed reservation only guards its id against a replay, which an id of the gateway's
        # own (a request id, a task id) never meets after days: DynamoDB's TTL deletes it.
        "UpdateExpression": "SET #s = :outcome, closed_units = :used, closed_at = :now, expires_ttl = :ttl "
                            "REMOVE gsi1pk, gsi1sk",
        "ConditionExpression": "#s = :reserved", "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": to_values({":outcome": outcome, ":used": units, ":reserved": RESERVED,
                                                ":now": int(now.timestamp()),
                                                ":ttl": int(now.timestamp()) + CLOSED_KEPT_SECONDS})}}


def _user_counts(reservation: Reservation, units: int, *, settled: bool) -> dict[str, Any]:
    """The user's quota gets the rest of the hold back (or pays what the price exceeds it by,
    only if it has that much left), and a settlement counts the request."""
    back, over = reservation.units - units, max(units - reservation.units, 0)
    key = to_item({"pk": user_pk(reservation.user_id), "sk": PROFILE})
    update: dict[str, Any] = {"TableName": _table(), "Key": key}
    if settled:
        update.update(UpdateExpression="ADD quota :back, used_quota :used, request_count :one",
                      ExpressionAttributeValues={":back": back, ":used": units, ":one": 1})
    else:
        update.update(UpdateExpression="ADD quota :back", ExpressionAttributeValues={":back": back})
    if over:
        update.update(ConditionExpression="quota >= :over")
        update["ExpressionAttributeValues"][":over"] = over
    update["ExpressionAttributeValues"] = to_values(update["ExpressionAttributeValues"])
    return {"Update": update}


def _key_counts(reservation: Reservation, units: int) -> dict[str, Any]:
    back, over = reservation.units - units, max(units - reservation.units, 0)
    update: dict[str, Any] = {"TableName": _table(), "Key": to_item({"pk": key_pk(reservation.key_hash), "sk": "KEY"})}
    if reservation.limited_key:
        update.update(UpdateExpression="ADD remain_quota :back, used_quota :used",
                      ExpressionAttributeValues={":back": back, ":used": units})
        if over:
            update.update(ConditionExpression="remain_quota >= :over")
            update["ExpressionAttributeValues"][":over"] = over
    else:
        update.update(UpdateExpression="ADD used_quota :used", ExpressionAttributeValues={":used": units})
    update["ExpressionAttributeValues"] = to_values(update["ExpressionAttributeValues"])
    return {"Update": update}


# ---------------------------------------------------------------------------------------------
# The sweeper's part.

def overdue(now: float, limit: int = 100) -> Iterator[Reservation]:
    """Open reservations whose hold ran out before `now`, earliest first, shard by shard."""
    for record in _overdue_records(now, limit):
        if not is_lease(record):
            yield Reservation.from_record(record)


def _overdue_records(now: float, limit: int = 100) -> Iterator[dict[str, Any]]:
    """Open reservations and open quota leases (both in the hold index) past their `hold_until`."""
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
                yield from_item(item)
            if "LastEvaluatedKey" not in answer:
                break
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def sweep_stale(*, now: float | None = None) -> dict[str, int]:
    """Refunds every reservation still open after its request could still be running, and folds
    every quota lease still open after its holder could still be using it; each exactly once
    (conditioned on it being open), with the reason in its entry."""
    now = time.time() if now is None else now
    counts = {"refunded": 0, "already_closed": 0}
    counts.update(lease_folds.sweep(r for r in _overdue_records(now) if is_lease(r)))
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
            observability.incident("StaleHoldsRefunded")
            logger.warning("stale reservation refunded", extra={"reservation_id": reservation.reservation_id,
                                                                "units": reservation.units})
    return counts


__all__ = ["LOG_CONSUME", "LOG_ERROR", "LOG_REFUND", "REFUNDED", "REQUEST_HOLD_SECONDS", "RESERVED", "SETTLED",
           "Reservation", "get_reservation", "overdue", "refund", "reserve", "reserve_request", "settle", "sweep_stale",
           "task_hold_seconds"]
