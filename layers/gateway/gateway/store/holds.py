"""The items that hold units in the accounts table: durable reservations (`billing`), quota leases
(`admission.leases`), and the hold index the sweeper reads (`gsi1`: `HOLD#<shard>` / `<hold until>#<id>`,
on an open reservation or lease only).

A lease item: `granted`, `spent`, `requests`, `status` (`OPEN` until its fold, then `CLOSED`), its
holder and `hold_until`, `last_batch`/`last_entries` (its last batch of closes), and one counter
per day and day total it has counted and not yet folded (`c|<yyyy-mm-dd>|<counter>`,
`day_counters_of`).
"""

from __future__ import annotations

import zlib
from datetime import date
from typing import Any

from gateway.settings import get_settings
from gateway.store.aws import client, from_item, to_item, to_values
from gateway.store.table import PROFILE, user_pk


def reservation_pk(reservation_id: str) -> str:
    return f"RES#{reservation_id}"


# Open reservations spread over this many index keys, so that no one gsi1 partition takes every
# request's writes; the sweeper reads each in turn.
HOLD_SHARDS = 8


def hold_shard(shard: int) -> str:
    return f"HOLD#{shard}"


def hold_index_keys(reservation_id: str, hold_until: int) -> dict[str, str]:
    """The gsi1 keys of an open reservation: its shard, then its deadline (epoch seconds, padded
    so that string order is time order)."""
    return {"gsi1pk": hold_shard(zlib.crc32(reservation_id.encode()) % HOLD_SHARDS),
            "gsi1sk": f"{int(hold_until):012d}#{reservation_id}"}


# A user's open quota leases spread over this many partition keys (each lease takes one write per
# request it settles); a balance read queries them all.
LEASE_SHARDS = 8


def lease_key(user_id: int, lease_id: str) -> dict[str, str]:
    return {"pk": f"LEASE#{user_id}#{zlib.crc32(lease_id.encode()) % LEASE_SHARDS}", "sk": f"LEASE#{lease_id}"}


def lease_pks(user_id: int) -> list[str]:
    return [f"LEASE#{user_id}#{shard}" for shard in range(LEASE_SHARDS)]


def quota_debit(table: str, user_id: int, units: int) -> dict[str, Any]:
    """The transaction item that takes `units` from an enabled user's quota, only if it has them
    and owes nothing (an account that owes what a refund took back is held at zero until repaid,
    `commerce.reversals`)."""
    return {"Update": {"TableName": table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                       "UpdateExpression": "ADD quota :neg",
                       "ConditionExpression": "quota >= :u AND #s = :enabled AND "
                                              "(attribute_not_exists(owed_quota) OR owed_quota <= :zero)",
                       "ExpressionAttributeNames": {"#s": "status"},
                       "ExpressionAttributeValues": to_values({":u": units, ":neg": -units, ":enabled": 1,
                                                               ":zero": 0})}}


OPEN, CLOSED = "open", "closed"
LEASE_COUNTER_PREFIX = "c|"  # a lease's day counter: c|<yyyy-mm-dd>|<counter as day_counters names it>


def day_counters_of(lease: dict[str, Any]) -> dict[date, dict[str, int]]:
    """A lease record's day counters, per day, named as `day_counters` names them."""
    days: dict[date, dict[str, int]] = {}
    for name, value in lease.items():
        if isinstance(name, str) and name.startswith(LEASE_COUNTER_PREFIX):
            _, day, counter = name.split("|", 2)
            days.setdefault(date.fromisoformat(day), {})[counter] = int(value)
    return days


def is_lease(record: dict[str, Any]) -> bool:
    """Whether a record of the hold index is a quota lease (else a durable reservation)."""
    return str(record.get("sk", "")).startswith("LEASE#")


def open_leases(user_id: int) -> list[dict[str, Any]]:
    """The user's open leases, read consistently from each lease shard."""
    found: list[dict[str, Any]] = []
    for partition in lease_pks(user_id):
        params: dict[str, Any] = {
            "TableName": get_settings().accounts_table, "KeyConditionExpression": "pk = :pk", "ConsistentRead": True,
            "FilterExpression": "#s = :open", "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": to_values({":pk": partition, ":open": OPEN}),
        }
        while True:
            answer = client("dynamodb").query(**params)
            found.extend(from_item(item) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                break
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    return found
