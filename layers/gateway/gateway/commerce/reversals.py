"""What a refunded or disputed payment takes back (Stripe's `charge.refunded`,
`charge.dispute.created`, `charge.dispute.closed`), exactly once and in any order of delivery.

An order credited through Stripe keeps what it has taken back so far (`taken_units`) and the
state of the events seen: the most refunded (`refunded_cents`, Stripe's cumulative
`amount_refunded`, so a late event of a smaller refund changes nothing) and its dispute
(`dispute`: `open`, then `won` or `lost`; a closed dispute is never reopened by a late
`created`). What the order should have taken back follows from those alone (`units_taken`):

- a refund of `r` of the order's `c` cents: `units x r / c` (rounded down; all of it for a full
  refund);
- an open dispute freezes the whole credit (all of it taken back) until it closes; won, the
  credit is given back less any refund; lost, it stays taken back.

Each event moves the account by the difference between that and `taken_units`, in one
transaction with the order's new state (conditioned on the state it was read in: a duplicate, a
reordered or a racing delivery recomputes and moves nothing twice) and a log entry. Taking back
never makes the quota negative: it takes what the quota holds, down to zero, and what was
already spent is recorded as owed (`owed_quota`): the account is held at zero (no lease is granted
while it owes, `store.holds.quota_debit`) until a credit repays it (`credits.apply` pays what
is owed first). Giving back pays what is owed first, the rest goes to the quota.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.aws_failures import cancellation_reasons
from gateway.commerce import credits
from gateway.commerce.store import order_key
from gateway.settings import get_settings
from gateway.store.aws import TRANSACT_ATTEMPTS, to_item, to_values
from gateway.store.table import PROFILE, user_pk

OPEN, WON, LOST = "open", "won", "lost"


class NotCredited(Exception):
    """The order was not credited (yet): nothing to take back now."""


def units_taken(order: Mapping[str, Any], refunded_cents: int, dispute: str) -> int:
    """What the order takes back given the most refunded and its dispute's state (see the module)."""
    units, cents = int(order["units"]), int(order["money_cents"])
    if dispute in (OPEN, LOST):
        return units
    refunded = max(0, min(int(refunded_cents), cents))
    return units * refunded // cents  # an order charges at least Stripe's smallest charge: never 0 cents


def later_dispute(seen: str, new: str) -> str:
    """The dispute state after `new` is delivered where `seen` was recorded: a closed dispute stays
    closed (a late `created` never reopens it); nothing said keeps what was seen."""
    if seen in (WON, LOST):
        return seen
    return new or seen


def profile_move(user_id: int, profile: Mapping[str, Any], delta: int) -> dict[str, Any]:
    """The profile update that takes `delta` units back (or gives `-delta` back): down to zero,
    the rest owed; a gift pays what is owed first. Conditioned on the quota and debt just read."""
    quota, owed = max(int(profile.get("quota") or 0), 0), int(profile.get("owed_quota") or 0)
    if delta >= 0:
        taken = min(quota, delta)
        quota_add, owed_add = -taken, delta - taken
    else:
        paid = min(owed, -delta)
        quota_add, owed_add = -delta - paid, -paid
    values = {":q": quota_add, ":o": owed_add, ":need": -quota_add if quota_add < 0 else 0, ":owed": owed}
    owed_now = "owed_quota = :owed" if owed else "(attribute_not_exists(owed_quota) OR owed_quota = :owed)"
    # Owing means the quota went to zero: then it must still be all that was read (a credit landing
    # between the read and this write would otherwise stay beside the new debt).
    enough = "quota = :need" if owed_add > 0 else "quota >= :need"
    return {"Update": {
        "TableName": get_settings().accounts_table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
        "UpdateExpression": "ADD quota :q, owed_quota :o",
        "ConditionExpression": f"attribute_exists(pk) AND {enough} AND {owed_now}",
        "ExpressionAttributeValues": to_values(values)}}


def _log(order: Mapping[str, Any], version: int, delta: int, why: str, now: datetime) -> dict[str, Any]:
    """The log entry of a reversal: a top-up entry of `-delta` units (negative: taken back)."""
    entry = credits.Credit(credit_id=f"order-{order['trade_no']}-reversal-{version}", user_id=int(order["user_id"]),
                           units=-int(delta), route=f"stripe {why}", detail={"trade_no": order["trade_no"]})
    return {"Put": {"TableName": get_settings().accounts_table, "Item": to_item(credits.log_entry(entry, now)),
                    "ConditionExpression": "attribute_not_exists(pk)"}}


def apply(trade_no: str, *, refunded_cents: int = 0, dispute: str = "", repo: Any = None,
          accounts: Any = None) -> int:
    """Records a refund (`refunded_cents`, cumulative) or a dispute's state on the order and moves
    the account by what that changes; answers the units taken back by this call (negative: given
    back; 0 for a duplicate). `NotCredited` while the order is not credited."""
    from gateway.admission.transactions import transact
    from gateway.commerce.store import CommerceRepository
    from gateway.store.users import UsersRepository

    repo, accounts = repo or CommerceRepository(), accounts or UsersRepository()
    for _ in range(TRANSACT_ATTEMPTS):  # read again at most as often as a transaction is asked again
        order = repo.order(trade_no)
        if order is None or order.get("status") != "success":
            raise NotCredited(trade_no)
        seen_cents, seen_dispute = int(order.get("refunded_cents") or 0), str(order.get("dispute") or "")
        new_cents, new_dispute = max(seen_cents, int(refunded_cents)), later_dispute(seen_dispute, dispute)
        if (new_cents, new_dispute) == (seen_cents, seen_dispute):
            return 0  # delivered before, or said less than what was seen
        version = int(order.get("reversal_version") or 0)
        next_version = version + 1  # the order's, and its log entry's id
        delta = units_taken(order, new_cents, new_dispute) - int(order.get("taken_units") or 0)
        was = "reversal_version = :v" if version else "attribute_not_exists(reversal_version)"
        writes = [{"Update": {
            "TableName": get_settings().accounts_table, "Key": to_item(order_key(trade_no)),
            "UpdateExpression": "SET refunded_cents = :c, dispute = :d, taken_units = :t, reversal_version = :next",
            "ConditionExpression": f"#s = :success AND {was}", "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": to_values({
                ":c": new_cents, ":d": new_dispute, ":t": int(order.get("taken_units") or 0) + delta,
                ":next": next_version, ":success": "success", **({":v": version} if version else {})})}}]
        if delta:
            user_id = int(order["user_id"])
            profile = accounts.raw_user(user_id, consistent=True) or {}
            why = "dispute" if dispute else "refund"  # what this delivery said (one or the other)
            writes += [profile_move(user_id, profile, delta), _log(order, next_version, delta, why,
                                                                   datetime.fromtimestamp(time.time(), UTC))]
        try:
            transact(writes)
            return delta
        except Exception as exc:
            if "ConditionalCheckFailed" not in cancellation_reasons(exc):
                raise
            continue  # another delivery, a request's lease or a credit moved first: read again
    raise RuntimeError(f"order {trade_no}: the reversal kept meeting other writes; Stripe will deliver it again")
