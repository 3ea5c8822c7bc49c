"""What every closed request leaves: its hold (`Reservation`) and its ledger entry.

A ledger entry is written once per request, settled or refunded, by whichever path held it
(`billing` for a durable reservation, `leases` for a hold on a quota lease). Its partition is one
of the user's ledger shards (`store.usage.ledger_pk`), chosen by the request id; the request log
reads the account's entries across the shards and one key's or one model's through the indexes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.settings import get_settings
from gateway.store.usage import ledger_index, ledger_pk, usage_sk

RESERVED, SETTLED, REFUNDED = "reserved", "settled", "refunded"
# The request log's entry types (`gateway.api.requestlog`): a settled request; a refund because the
# request failed (the upstream failed or refused it, its function died: a stale hold); any other
# refund (the client went away first, a task was cancelled); a top-up (`gateway.commerce.credits`:
# quota added by a code, a payment or a reward, `units` 0 and the amount in `credited_units`).
LOG_TOPUP, LOG_CONSUME, LOG_ERROR, LOG_REFUND = 1, 2, 5, 6
# How long after it was held a request's hold may still be in use: the longest request function's
# timeout (the text function's 900 s) plus a margin for the settlement itself.
REQUEST_HOLD_SECONDS = 900 + 120


@dataclass(frozen=True)
class Reservation:
    """A request's hold: a durable reservation record (`lease_id` empty: tasks), or a hold taken
    on a quota lease of the instance that serves the request (`lease_id`: synchronous requests)."""

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
    lease_id: str = ""
    limit_budgets: tuple[tuple[str, str], ...] = ()  # a task's budget windows (`limits.durable_notes`)
    ratelimit: tuple[tuple[str, int, int, int], ...] = ()  # what the limits left at admission (`limits.RateState`)
    # The request's group and its price ratio at admission (`gateway.groups`): `units` is the hold
    # after the ratio, `base_units` the hold before it; the settlement applies the same ratio.
    group: str = ""
    group_ratio: str = "1"
    base_units: int | None = None

    @property
    def base_hold(self) -> int:
        """The hold before the group ratio (what a price before the ratio may be capped at)."""
        return self.units if self.base_units is None else self.base_units

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Reservation:
        return cls(reservation_id=record["reservation_id"], user_id=int(record["user_id"]),
                   key_hash=record["key_hash"], key_id=record["key_id"], limited_key=bool(record["limited_key"]),
                   units=int(record["units"]), model=record["model"], route=record["route"],
                   status=record["status"], created_at=int(record.get("created_at") or 0),
                   hold_until=int(record.get("hold_until") or 0),
                   limit_budgets=tuple((str(s), str(w)) for s, w in record.get("limit_budgets") or ()),
                   group=str(record.get("group") or ""), group_ratio=str(record.get("group_ratio") or "1"),
                   base_units=int(record["base_units"]) if record.get("base_units") is not None else None)


def entry(reservation: Reservation, outcome: str, units: int, detail: dict[str, Any] | None, now: datetime, *,
          shortfall: int, log_type: int, base_units: int | None = None) -> dict[str, Any]:
    """The ledger entry of a closed request (the item, as the table stores it)."""
    sk = usage_sk(now, reservation.reservation_id)
    item = {
        "pk": ledger_pk(reservation.user_id, reservation.reservation_id), "sk": sk,
        "request_id": reservation.reservation_id, "key_id": reservation.key_id, "model": reservation.model,
        "route": reservation.route, "units": units, "reserved_units": reservation.units, "outcome": outcome,
        "at": int(now.timestamp() * 1000), "detail": detail or None,
        "log_type": log_type, "started_at": reservation.created_at or None,
    }
    # The request log reads one key's or one model's entries through these index keys.
    item.update(ledger_index(reservation.user_id, reservation.key_id, reservation.model, sk))
    if reservation.lease_id:
        item["lease_id"] = reservation.lease_id
    if reservation.group:  # the price before the group's ratio, and the ratio that made `units` of it
        item.update(group=reservation.group, group_ratio=reservation.group_ratio,
                    base_units=units if base_units is None else base_units, reserved_base_units=reservation.base_hold)
    if shortfall:
        item["shortfall"] = shortfall  # priced but not charged: the quota had no more
    retention = get_settings().ledger_retention_days
    if retention:
        item["expires_ttl"] = int(now.timestamp()) + retention * 86400
    return item
