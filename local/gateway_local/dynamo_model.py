"""DynamoDB's limits as DynamoDB documents them, for the emulator (off unless asked for).

moto applies every call at once and never refuses one for load; real DynamoDB does, and the
gateway's metering has to be designed against that. With the model on (`GATEWAY_LOCAL_DYNAMODB_MODEL=1`
for `make run`, `Emulator.use_model(...)` in tests and benchmarks) each DynamoDB call meets:

- **Transaction conflicts.** A transaction's items are *in flight* for the transaction's service
  time (`transaction_ms`). A `TransactWriteItems` that touches an item another in-flight transaction
  writes is cancelled (`TransactionCanceledException`, reason `TransactionConflict` on that item),
  and a `PutItem`/`UpdateItem`/`DeleteItem` on such an item fails with `TransactionConflictException`;
  nothing of either is applied. Reads see the last committed state, as in DynamoDB.
- **Per-partition throughput.** One partition key takes at most 1000 write units and 3000 read units
  per second (a one-second token bucket each). A write or read beyond that is refused with
  `ProvisionedThroughputExceededException` and applies nothing (botocore retries it, as for
  DynamoDB). Units are DynamoDB's: a write costs one unit per started KB of the larger of the item
  before and after, twice in a transaction, plus one per global secondary index the item is in
  (two when its index key changes); a read one unit per started 4 KB (half for an eventually
  consistent read, twice in a transaction). Only the table's partition keys are limited; index
  partitions are counted in the write units but not throttled.
- **Service latency.** Each call answers `latency_ms` after it arrives (`transaction_ms` for a
  transaction); the wait is outside the emulator's lock, so concurrent callers overlap as they
  would against DynamoDB.

`ModelCounts` sums what the model saw (calls, write and read units, conflicts, throttles): the
benchmarks read it for the write units per request.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WRITE_UNITS_PER_PARTITION = 1000
READ_UNITS_PER_PARTITION = 3000
_SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
_READS = frozenset({"GetItem", "Query"})

_Answer = tuple[int, dict[str, str], bytes]


@dataclass
class ModelCounts:
    calls: int = 0
    write_units: float = 0.0
    read_units: float = 0.0
    conflicts: int = 0  # calls refused for a transaction in flight
    throttles: int = 0  # calls refused for a partition over its throughput
    by_operation: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> ModelCounts:
        return ModelCounts(self.calls, self.write_units, self.read_units, self.conflicts, self.throttles,
                           dict(self.by_operation))


class _Bucket:
    """A one-second token bucket: `rate` units a second, at most `rate` saved up; it may go into
    debt by the last call's units (a call is admitted while any capacity is left)."""

    def __init__(self, rate: float, now: float):
        self.rate, self.tokens, self.at = rate, rate, now

    def has_room(self, now: float) -> bool:
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return self.tokens > 1e-6  # (float dust left by the refill is no room)

    def take(self, units: float) -> None:
        self.tokens -= units


def _error(code: str, message: str, **extra: Any) -> _Answer:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
    return 400, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code}, json.dumps(body).encode()


@dataclass
class _Write:
    table: str
    key: dict[str, Any]  # the item's key attributes, as the call gives them


class DynamoModel:
    """Decides, with the emulator's lock held, whether a DynamoDB call is refused, and charges it."""

    def __init__(self, *, latency_ms: float = 4.0, transaction_ms: float = 12.0,
                 write_units: float = WRITE_UNITS_PER_PARTITION, read_units: float = READ_UNITS_PER_PARTITION,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.latency, self.transaction_latency = latency_ms / 1000, transaction_ms / 1000
        self.write_rate, self.read_rate = write_units, read_units
        self.clock, self.sleep = clock, sleep
        self.counts = ModelCounts()
        self._in_flight: dict[tuple[str, str], float] = {}  # (table, item key) -> until
        self._writes: dict[tuple[str, str], _Bucket] = {}  # (table, partition key) -> bucket
        self._reads: dict[tuple[str, str], _Bucket] = {}

    @classmethod
    def from_environment(cls) -> DynamoModel | None:
        if os.environ.get("GATEWAY_LOCAL_DYNAMODB_MODEL", "") not in ("1", "true", "on"):
            return None
        return cls(latency_ms=float(os.environ.get("GATEWAY_LOCAL_DYNAMODB_LATENCY_MS", "4")),
                   transaction_ms=float(os.environ.get("GATEWAY_LOCAL_DYNAMODB_TRANSACTION_MS", "12")))

    # --- called by the emulator, lock held ------------------------------------------------------

    def call(self, operation: str, body: bytes, apply: Callable[[], _Answer]) -> tuple[_Answer, float]:
        """The answer to one DynamoDB call (applied by `apply` unless the model refuses it) and how
        long its caller waits before it has it."""
        now = self.clock()
        request = json.loads(body or b"{}")
        self.counts.calls += 1
        self.counts.by_operation[operation] = self.counts.by_operation.get(operation, 0) + 1
        if operation == "TransactWriteItems":
            return self._transaction(request, now, apply), self.transaction_latency
        if operation in _SINGLE_WRITES:
            return self._single_write(operation, request, now, apply), self.latency
        if operation == "BatchWriteItem":
            return self._batch_write(request, now, apply), self.latency
        if operation in _READS:
            return self._read(operation, request, now, apply), self.latency
        return apply(), self.latency

    def _transaction(self, request: dict[str, Any], now: float, apply: Callable[[], _Answer]) -> _Answer:
        writes = [_write_of(kind, part) for entry in request.get("TransactItems", []) for kind, part in entry.items()]
        reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
                   if self._busy(w, now) else {"Code": "None"} for w in writes]
        if any(r["Code"] != "None" for r in reasons):
            self.counts.conflicts += 1
            return _error("TransactionCanceledException", "Transaction cancelled, please refer cancellation "
                          "reasons for specific reasons [" + ", ".join(r["Code"] for r in reasons) + "]",
                          CancellationReasons=reasons)
        if (refused := self._over_throughput(writes, now)) is not None:
            return refused
        before = [self._item(w) for w in writes]
        answer = apply()
        for w, old in zip(writes, before, strict=True):
            self._charge(w, old, now, transactional=True)  # a cancelled one is charged too, as DynamoDB does
            if answer[0] == 200:
                self._in_flight[_item_id(w)] = now + self.transaction_latency
        return answer

    def _single_write(self, operation: str, request: dict[str, Any], now: float,
                      apply: Callable[[], _Answer]) -> _Answer:
        return self._plain_writes([_write_of("Put" if operation == "PutItem" else "Update", request)], now, apply)

    def _batch_write(self, request: dict[str, Any], now: float, apply: Callable[[], _Answer]) -> _Answer:
        """Each put or delete is a single write. (DynamoDB hands back the ones it refused as
        `UnprocessedItems`; the model refuses the whole call, which botocore retries.)"""
        return self._plain_writes([_write_of("Put", {"TableName": table, **entry["PutRequest"]})
                                   if "PutRequest" in entry else _Write(table, entry["DeleteRequest"]["Key"])
                                   for table, entries in request.get("RequestItems", {}).items()
                                   for entry in entries], now, apply)

    def _plain_writes(self, writes: list[_Write], now: float, apply: Callable[[], _Answer]) -> _Answer:
        """Writes outside a transaction: refused if an item is in a transaction in flight or its
        partition is over its throughput, else applied and charged."""
        if any(self._busy(w, now) for w in writes):
            self.counts.conflicts += 1
            return _error("TransactionConflictException", "Transaction is ongoing for the item")
        if (refused := self._over_throughput(writes, now)) is not None:
            return refused
        before = [self._item(w) for w in writes]
        answer = apply()
        for w, old in zip(writes, before, strict=True):
            self._charge(w, old, now, transactional=False)
        return answer

    def _over_throughput(self, writes: list[_Write], now: float) -> _Answer | None:
        if all(self._write_bucket(w, now).has_room(now) for w in writes):
            return None
        self.counts.throttles += 1
        return _error("ProvisionedThroughputExceededException", "The level of configured provisioned "
                      "throughput for the table was exceeded")

    def _read(self, operation: str, request: dict[str, Any], now: float, apply: Callable[[], _Answer]) -> _Answer:
        table = request.get("TableName", "")
        if operation == "GetItem":
            partition = json.dumps(request.get("Key", {}).get(self._keys(table)[0]), sort_keys=True)
        else:  # a Query names its partition in its key condition's values; any one of them marks it
            partition = json.dumps(request.get("ExpressionAttributeValues", {}), sort_keys=True)
            if request.get("IndexName"):
                return apply()  # index partitions are not throttled (see the module's docstring)
        bucket = self._reads.setdefault((table, partition), _Bucket(self.read_rate, now))
        if not bucket.has_room(now):
            self.counts.throttles += 1
            return _error("ProvisionedThroughputExceededException", "The level of configured provisioned "
                          "throughput for the table was exceeded")
        answer = apply()
        units = max(1, math.ceil(len(answer[2]) / 4096)) * (1.0 if request.get("ConsistentRead") else 0.5)
        bucket.take(units)
        self.counts.read_units += units
        return answer

    # --- items, partitions and units ----------------------------------------------------------------

    def _busy(self, write: _Write, now: float) -> bool:
        item = _item_id(write)
        until = self._in_flight.get(item)
        if until is None:
            return False
        if until <= now:
            del self._in_flight[item]
            return False
        return True

    def _keys(self, table: str) -> tuple[str, str | None]:
        found = _table_of(table)
        return found.hash_key_attr, found.range_key_attr

    def _write_bucket(self, write: _Write, now: float) -> _Bucket:
        partition = json.dumps(write.key.get(self._keys(write.table)[0]), sort_keys=True)
        return self._writes.setdefault((write.table, partition), _Bucket(self.write_rate, now))

    def _item(self, write: _Write) -> tuple[int, list[tuple[str, ...] | None]]:
        """What the write units of a write depend on: the item's size and its key in each global index."""
        table = _table_of(write.table)
        hash_key, range_key = _backend_of(write.table).get_keys_value(table, write.key)
        item = table.get_item(hash_key, range_key)
        return (int(item.size()) if item is not None else 0,
                [_index_key(index, item) for index in table.global_indexes or []])

    def _charge(self, write: _Write, before: tuple[int, list[tuple[str, ...] | None]], now: float, *,
                transactional: bool) -> None:
        after = self._item(write)
        kilobytes = max(1, math.ceil(max(before[0], after[0]) / 1024))
        units = kilobytes * (2 if transactional else 1)
        self._write_bucket(write, now).take(units)
        for old, new in zip(before[1], after[1], strict=True):
            if old is not None or new is not None:
                units += (2 if old is not None and new is not None and old != new else 1) * kilobytes
        self.counts.write_units += units


def _write_of(kind: str, part: dict[str, Any]) -> _Write:
    table = part["TableName"]
    if kind == "Put":
        names = _table_of(table)
        key_names = [names.hash_key_attr] + ([names.range_key_attr] if names.range_key_attr else [])
        return _Write(table, {name: part["Item"][name] for name in key_names if name in part["Item"]})
    return _Write(table, part["Key"])


def _item_id(write: _Write) -> tuple[str, str]:
    return write.table, json.dumps(write.key, sort_keys=True)


def _index_key(index: Any, item: Any) -> tuple[str, ...] | None:
    if item is None:
        return None
    values = [item.attrs.get(name) for name in index.schema_key_attrs]
    if any(v is None for v in values):
        return None
    return tuple(json.dumps(v.to_json(), sort_keys=True) for v in values)


_backends: dict[str, Any] = {}


def _backend_of(table: str) -> Any:
    backend = _backends.get(table)
    if backend is not None and table in backend.tables:
        return backend
    from moto.dynamodb.models import dynamodb_backends

    for account in list(dynamodb_backends.keys()):
        for region in list(dynamodb_backends[account].keys()):
            candidate = dynamodb_backends[account][region]
            if table in candidate.tables:
                _backends[table] = candidate
                return candidate
    raise LookupError(f"no emulated table {table}")


def _table_of(table: str) -> Any:
    return _backend_of(table).tables[table]
