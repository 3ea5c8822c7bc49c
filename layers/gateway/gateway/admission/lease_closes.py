"""A quota lease's closes (settle or refund), written as a group commit per lease (`commit`): one
batch of closes at a time per lease (a batch waits up to `LINGER_SECONDS` for the closes of the
lease's other open holds in this instance), two writes per batch, in this order:

1. the lease item: `ADD spent, requests` and the day counters, `SET last_batch, last_entries` (the
   batch's ledger entries without their index keys, which `carried_entries` rebuilds: the lease
   item is billed by its size on every batch), conditioned on the lease being open, on `spent`
   staying within `granted`, and on `last_batch` not being this batch (a retry after an answer
   lost on the way is recognised, never counted twice);
2. the ledger entries (`BatchWriteItem`; writing one again is the same entry).

Because one lease's batches are written one after another, only its `last_entries` can be missing
when its holder dies between the two writes; whoever folds the lease writes them first
(`admission.lease_folds`). A first write still failing after botocore's retries may have been
applied all the same: the lease is read to see whether it counts the batch, and it is asked again
if not (`_BATCH_ATTEMPTS`). Entries whose write failed are written before the next batch replaces
them (`Lease.unwritten`).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from gateway.admission.ledger import SETTLED, Reservation
from gateway.aws_failures import passing_failure
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values
from gateway.store.holds import LEASE_COUNTER_PREFIX, OPEN, lease_key
from gateway.store.usage import closed_request_counters, ledger_index

# Closes written in one batch at most (the lease item carries them all until they are written).
MAX_BATCH = 50
# A batch's count on the lease is asked this many times (each with botocore's own retries) while
# DynamoDB throttles or fails it: the answer is already out, the bill must follow it.
_BATCH_ATTEMPTS = 6
# How long a batch of closes waits for the closes of the lease's other open holds to join it:
# two writes saved for each that does, against this much more time to the last byte.
LINGER_SECONDS = 0.008


def _table() -> str:
    return get_settings().accounts_table


def _db():
    return client("dynamodb")


@dataclass
class Lease:
    """One lease as its holder sees it, with its queue of closes (one batch written at a time)."""

    lease_id: str
    user_id: int
    key_hash: str
    key_id: str
    limited_key: bool
    granted: int
    window_until: float  # time.monotonic() after which it takes no new hold
    hold_until: int  # epoch seconds after which the sweeper folds it
    spent: int = 0
    held: int = 0
    holds: int = 0
    folded: bool = False
    # Closes waiting to be written, and whether a writer is at it (one batch at a time per lease).
    queue: list[Close] = field(default_factory=list)
    flushing: bool = False
    turn: threading.Condition = field(default_factory=threading.Condition)
    # The entries of the last batch when their write failed after the lease counted them.
    unwritten: list[dict[str, Any]] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.granted - self.spent - self.held


@dataclass
class Close:
    reservation: Reservation
    item: dict[str, Any]
    outcome: str
    charge: int
    done: bool = False
    error: BaseException | None = None


def _counters(reservation: Reservation, units: int, day: date, detail: dict[str, Any] | None = None,
              failed: bool = False) -> dict[str, int]:
    return {f"{LEASE_COUNTER_PREFIX}{day.isoformat()}|{name}": amount for name, amount in
            closed_request_counters(key_id=reservation.key_id, model=reservation.model, units=units,
                                    detail=detail, failed=failed).items()}


def commit(lease: Lease, close: Close) -> None:
    """Writes a close with whatever other closes of the lease are waiting (a group commit): one
    thread writes a batch while the next batch gathers. While other holds of the lease are open
    in this instance, a batch waits up to `LINGER_SECONDS` for their closes to join it (never
    with the lease's only hold: one request per instance, as deployed, never waits). Returns
    once this close is written."""
    with lease.turn:
        lease.queue.append(close)
        lingered = False
        while not close.done:
            if lease.flushing:
                lease.turn.wait()
                continue
            if not lingered and len(lease.queue) < min(lease.holds, MAX_BATCH):
                lingered = True
                lease.turn.wait_for(lambda: close.done or lease.flushing
                                    or len(lease.queue) >= min(lease.holds, MAX_BATCH), timeout=LINGER_SECONDS)
                continue
            batch, lease.queue = lease.queue[:MAX_BATCH], lease.queue[MAX_BATCH:]
            lease.flushing = True
            lease.turn.release()
            error: BaseException | None = None
            try:
                _write_batch(lease, batch)
            except BaseException as exc:  # every close of the batch hears it
                error = exc
            finally:
                lease.turn.acquire()
                for written in batch:
                    written.done, written.error = True, error
                lease.flushing = False
                lease.turn.notify_all()
    if close.error is not None:
        raise close.error


def _write_batch(lease: Lease, batch: list[Close]) -> None:
    """The two writes of a batch of closes (see the module's docstring), each safe to repeat:
    the lease counts them all and carries their entries, then the entries are written."""
    counters: dict[str, int] = {}
    for close in batch:
        at = datetime.fromtimestamp(int(close.item["at"]) / 1000, UTC)
        for name, amount in _counters(close.reservation, close.charge, at.date(), close.item.get("detail"),
                                      failed=close.outcome != SETTLED).items():
            counters[name] = counters.get(name, 0) + amount
    charge = sum(close.charge for close in batch)
    batch_id = batch[0].reservation.reservation_id
    items = [to_item(close.item) for close in batch]
    names = {"#s": "status", **{f"#c{n}": name for n, name in enumerate(counters)}}
    values: dict[str, Any] = {":u": charge, ":r": sum(1 for close in batch if close.outcome == SETTLED),
                              ":open": OPEN, ":batch": batch_id, ":entries": [_carried(close.item) for close in batch],
                              ":max": lease.granted - charge,
                              **{f":c{n}": amount for n, amount in enumerate(counters.values())}}
    additions = ", ".join(["spent :u", "requests :r", *(f"#c{n} :c{n}" for n in range(len(counters)))])
    pk_sk = lease_key(lease.user_id, lease.lease_id)
    if lease.unwritten:  # an earlier batch's entries, counted but not written: before this batch replaces them
        put_entries(lease.unwritten)
        lease.unwritten = []
    for attempt in range(_BATCH_ATTEMPTS):
        try:
            _db().update_item(
                TableName=_table(), Key=to_item(pk_sk),
                UpdateExpression=f"SET last_batch = :batch, last_entries = :entries ADD {additions}",
                ConditionExpression="#s = :open AND last_batch <> :batch AND spent <= :max",
                ExpressionAttributeNames=names, ExpressionAttributeValues=to_values(values))
            break
        except Exception as exc:
            refused = is_condition_failure(exc)
            if not refused and (not passing_failure(exc) or attempt == _BATCH_ATTEMPTS - 1):
                raise
            # Refused, or still failing after botocore's retries, the write may have been applied
            # all the same (its answer lost on the way): the lease says whether it counts this batch.
            found = from_item(_db().get_item(TableName=_table(), Key=to_item(pk_sk),
                                             ConsistentRead=True).get("Item")) or {}
            if found.get("last_batch") == batch_id:
                break
            if refused:
                raise RuntimeError(f"lease {lease.lease_id} refused a batch of {len(batch)} closes: status "
                                   f"{found.get('status')}, spent {found.get('spent')} of {found.get('granted')}"
                                   ) from None
            time.sleep(random.uniform(0, 0.01 * 2 ** attempt))
    try:
        put_entries(items)
    except BaseException:
        lease.unwritten = items  # the lease carries them: the next batch or the fold writes them
        raise


# What a lease carries of each entry of its last batch leaves out the index keys (rebuilt from
# the entry's own fields): the lease item is written on every batch, and DynamoDB bills it by size.
_INDEX_KEYS = ("gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")


def _carried(entry: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name not in _INDEX_KEYS and value is not None}


def carried_entries(lease: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger entries a lease record carries (its last batch's), whole, as DynamoDB items."""
    carried = lease.get("last_entries")
    if not carried:
        return []
    user_id = int(lease["user_id"])
    return [to_item({**entry, **ledger_index(user_id, entry["key_id"], entry["model"], entry["sk"])})
            for entry in carried]


def put_entries(items: list[dict[str, Any]]) -> None:
    """Writes ledger entries, given as DynamoDB items (again, if need be: the same item twice is
    one entry)."""
    for start in range(0, len(items), 25):
        puts = [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]
        requests: dict[str, Any] = {_table(): puts}
        for attempt in range(10):
            answer = _db().batch_write_item(RequestItems=requests)
            requests = answer.get("UnprocessedItems") or {}
            if not requests:
                break
            time.sleep(0.005 * 2 ** attempt)
        else:
            raise RuntimeError("DynamoDB left ledger entries unwritten after 10 attempts")
