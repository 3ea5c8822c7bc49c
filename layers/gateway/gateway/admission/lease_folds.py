"""A quota lease folded (`fold`, one transaction, exactly once): the lease closes (conditioned on
being open and on `spent` being what was read), the profile gets `granted − spent` back into
`quota` and `spent` into `used_quota` and `request_count`, the key likewise, the day totals get the
lease's day counters. Whoever folds first writes the lease's `last_entries` again (its holder may
have died between the two writes of a batch, `admission.lease_closes`). The holder folds a lease
once its window is over and its last hold closed (`LeasePool.fold_idle`); the sweeper (`sweep`)
folds one still open after its `hold_until` (its holder died or froze).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from gateway.admission import lease_closes
from gateway.admission.transactions import transact
from gateway.aws_failures import cancellation_reasons
from gateway.observability import logger
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values
from gateway.store.holds import CLOSED, OPEN, day_counters_of, lease_key
from gateway.store.table import PROFILE, key_pk, user_pk
from gateway.store.usage import day_total_additions

# A fold is not a client's request: it waits out conflicts on the account's items longer.
_FOLD_ATTEMPTS = 12


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


def fold(user_id: int, lease_id: str, *, reason: str) -> bool:
    """Closes an open lease: what it did not spend goes back to the quotas, what it spent to the
    used counters and day totals, in one transaction conditioned on it being open with the spend
    read. True if this call folded it (exactly once, whoever calls: holder or sweeper)."""
    pk_sk = lease_key(user_id, lease_id)
    for _ in range(5):
        lease = from_item(_db().get_item(TableName=_table(), Key=to_item(pk_sk), ConsistentRead=True).get("Item"))
        if not lease or lease.get("status") != OPEN:
            return False
        if lease.get("last_entries"):
            # closes whose holder died between their two writes
            lease_closes.put_entries(lease_closes.carried_entries(lease))
        granted, spent, requests = int(lease["granted"]), int(lease["spent"]), int(lease["requests"])
        back = granted - spent
        writes: list[dict[str, Any]] = [
            {"Update": {"TableName": _table(), "Key": to_item(pk_sk),
                        "UpdateExpression": "SET #s = :closed, closed_at = :now, fold_reason = :why "
                                            "REMOVE gsi1pk, gsi1sk, last_entries",
                        "ConditionExpression": "#s = :open AND spent = :spent",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": to_values({":closed": CLOSED, ":open": OPEN, ":spent": spent,
                                                                ":now": int(time.time()), ":why": reason})}},
            {"Update": {"TableName": _table(), "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                        "UpdateExpression": "ADD quota :back, used_quota :spent, request_count :n",
                        "ExpressionAttributeValues": to_values({":back": back, ":spent": spent, ":n": requests})}},
        ]
        key_values = {":spent": spent, **({":back": back} if lease["limited_key"] else {})}
        writes.append({"Update": {
            "TableName": _table(), "Key": to_item({"pk": key_pk(lease["key_hash"]), "sk": "KEY"}),
            "UpdateExpression": "ADD used_quota :spent" + (", remain_quota :back" if lease["limited_key"] else ""),
            # The key may have been deleted since: its used counters go with it.
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": to_values(key_values)}})
        for day, counters in sorted(day_counters_of(lease).items()):
            writes.append(day_total_additions(_table(), user_id=user_id, day=day, counters=counters))
        try:
            transact(writes, attempts=_FOLD_ATTEMPTS)
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            reasons = cancellation_reasons(exc)
            if len(reasons) > 2 and reasons[2] == "ConditionalCheckFailed" and reasons[0] != "ConditionalCheckFailed":
                _drop_key_write(writes)
                transact(writes, attempts=_FOLD_ATTEMPTS)
                return True
            continue  # closed meanwhile, or a close landed after the read: read again
        return True
    return False


def _drop_key_write(writes: list[dict[str, Any]]) -> None:
    del writes[2]


def sweep(records: Iterator[dict[str, Any]]) -> dict[str, int]:
    """Folds the overdue open leases among `records` (the hold index's overdue items)."""
    counts = {"leases_folded": 0, "leases_already_closed": 0}
    for record in records:
        try:
            folded = fold(int(record["user_id"]), record["lease_id"], reason="swept: its holder stopped")
        except Exception:
            logger.exception("sweeping a lease failed", extra={"lease_id": record.get("lease_id")})
            continue
        counts["leases_folded" if folded else "leases_already_closed"] += 1
        if folded:
            logger.warning("stale lease folded", extra={"lease_id": record["lease_id"]})
    return counts
