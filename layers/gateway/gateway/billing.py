"""Metering: reserve the worst case before a request, then settle to the real price or refund.

Each step is one DynamoDB transaction over the accounts table:

- `reserve` creates the reservation record and takes the units from the user's quota and, for a
  limited key, the key's quota, each conditioned on enough being left: concurrent requests can
  never spend more than the quota.
- `settle` and `refund` are conditioned on the reservation still being `reserved`, so a retry,
  an SQS redelivery or a crash followed by a rerun never charges or refunds twice. Settling
  writes the ledger entry and counts the request; a refund writes a zero-unit ledger entry so
  every request leaves a trace. Both add the entry to its day's totals (user, key, model) in
  the same transaction, which the usage reads add up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from gateway.auth import Principal
from gateway.errors import AuthenticationFailed, Conflict, InsufficientQuota
from gateway.settings import get_settings
from gateway.store.accounts import PROFILE, day_total_updates, key_pk, reservation_pk, usage_sk, user_pk
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values

RESERVED, SETTLED, REFUNDED = "reserved", "settled", "refunded"


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

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Reservation":
        return cls(reservation_id=record["reservation_id"], user_id=int(record["user_id"]),
                   key_hash=record["key_hash"], key_id=record["key_id"], limited_key=bool(record["limited_key"]),
                   units=int(record["units"]), model=record["model"], route=record["route"],
                   status=record["status"])


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


def reserve(principal: Principal, units: int, *, model: str, route: str, reservation_id: str) -> Reservation:
    """Holds `units` of the principal's quota for one request. Raises `InsufficientQuota`.

    Reserving the same `reservation_id` twice answers the existing reservation.
    """
    if units < 0:
        raise ValueError("a reservation cannot be negative")
    table, now = _table(), int(time.time())
    record = {
        "pk": reservation_pk(reservation_id), "sk": "RES", "reservation_id": reservation_id,
        "user_id": principal.user_id, "key_hash": principal.key_hash, "key_id": principal.key_id,
        "limited_key": not principal.unlimited, "units": units, "model": model, "route": route,
        "status": RESERVED, "created_at": now,
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
        _db().transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": to_item(record),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Update": {"TableName": table, "Key": to_item({"pk": user_pk(principal.user_id), "sk": PROFILE}),
                        "UpdateExpression": "ADD quota :neg",
                        "ConditionExpression": "quota >= :u AND #s = :enabled",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": to_values({":u": units, ":neg": -units, ":enabled": 1})}},
            {"Update": key_update},
        ])
    except Exception as exc:
        if not is_condition_failure(exc):
            raise
        reasons = [r.get("Code") for r in getattr(exc, "response", {}).get("CancellationReasons", [])]
        if reasons and reasons[0] == "ConditionalCheckFailed":
            existing = get_reservation(reservation_id)
            if existing is not None:
                return existing
        if len(reasons) > 2 and reasons[2] == "ConditionalCheckFailed":
            key = from_item(_db().get_item(TableName=table, Key=to_item(
                {"pk": key_pk(principal.key_hash), "sk": "KEY"}), ConsistentRead=True).get("Item"))
            if not key or key.get("status") != "active":
                raise AuthenticationFailed("the API key has been revoked") from None
            raise InsufficientQuota(
                f"this key's remaining quota is {key.get('remain_quota', 0)} units; "
                f"the request needs up to {units}") from None
        raise InsufficientQuota(f"the account's remaining quota is too low; the request needs up to {units} "
                                "units") from None
    return Reservation.from_record(record)


def reserve_request(principal: Principal, units: int, *, model: str, route: str, request_id: str) -> Reservation:
    """`reserve` for a synchronous request, keyed by its request id: a replayed event (the same id
    again) is a `Conflict`, never a second serving for free."""
    reservation = reserve(principal, units, model=model, route=route, reservation_id=request_id)
    if reservation.status != RESERVED:
        raise Conflict(f"request {request_id} has already been served", code="duplicate_request")
    return reservation


def get_reservation(reservation_id: str) -> Reservation | None:
    found = _db().get_item(TableName=_table(), Key=to_item({"pk": reservation_pk(reservation_id), "sk": "RES"}),
                           ConsistentRead=True).get("Item")
    return Reservation.from_record(from_item(found)) if found else None


def settle(reservation: Reservation, units: int, *, detail: dict[str, Any] | None = None) -> bool:
    """Charges the real price and returns the rest of the hold. True if this call settled it.

    A price above the hold is charged in full (the hold was an estimate); the quota may then go
    below zero by the difference, and the next reservation fails until it is topped up.
    """
    return _close(reservation, SETTLED, max(int(units), 0), detail)


def refund(reservation: Reservation, *, reason: str = "") -> bool:
    """Gives the whole hold back. True if this call refunded it."""
    return _close(reservation, REFUNDED, 0, {"reason": reason} if reason else None)


def _close(reservation: Reservation, outcome: str, units: int, detail: dict[str, Any] | None) -> bool:
    table, now = _table(), datetime.now(timezone.utc)
    give_back = reservation.units - units
    entry = {
        "pk": user_pk(reservation.user_id), "sk": usage_sk(now, reservation.reservation_id),
        "request_id": reservation.reservation_id, "key_id": reservation.key_id, "model": reservation.model,
        "route": reservation.route, "units": units, "reserved_units": reservation.units, "outcome": outcome,
        "at": int(now.timestamp() * 1000), "detail": detail or None,
    }
    retention = get_settings().ledger_retention_days
    if retention:
        entry["expires_ttl"] = int(now.timestamp()) + retention * 86400
    user_counts = "ADD quota :back, used_quota :used, request_count :one"
    writes: list[dict[str, Any]] = [
        {"Update": {"TableName": table, "Key": to_item({"pk": reservation_pk(reservation.reservation_id), "sk": "RES"}),
                    "UpdateExpression": "SET #s = :outcome, closed_units = :used, closed_at = :now",
                    "ConditionExpression": "#s = :reserved", "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": to_values({":outcome": outcome, ":used": units, ":reserved": RESERVED,
                                                            ":now": int(now.timestamp())})}},
        {"Update": {"TableName": table, "Key": to_item({"pk": user_pk(reservation.user_id), "sk": PROFILE}),
                    "UpdateExpression": user_counts if outcome == SETTLED else "ADD quota :back",
                    "ExpressionAttributeValues": to_values(
                        {":back": give_back, ":used": units, ":one": 1} if outcome == SETTLED else {":back": give_back})}},
        {"Update": {"TableName": table, "Key": to_item({"pk": key_pk(reservation.key_hash), "sk": "KEY"}),
                    "UpdateExpression": ("ADD remain_quota :back, used_quota :used" if reservation.limited_key
                                         else "ADD used_quota :used"),
                    "ExpressionAttributeValues": to_values(
                        {":back": give_back, ":used": units} if reservation.limited_key else {":used": units})}},
        {"Put": {"TableName": table, "Item": to_item(entry), "ConditionExpression": "attribute_not_exists(pk)"}},
    ]
    writes += day_total_updates(table, user_id=reservation.user_id, key_id=entry["key_id"], model=entry["model"],
                                units=entry["units"], at=now)  # the usage read's day totals, in step with the ledger
    try:
        _db().transact_write_items(TransactItems=writes)
    except Exception as exc:
        if is_condition_failure(exc):
            return False  # already settled or refunded: nothing moves twice
        raise
    return True
