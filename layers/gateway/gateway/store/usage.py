"""The ledger and the day totals of the accounts table: where every closed request is written (its
ledger entry, on one of the user's ledger shards, indexed by key and by model; its day's totals, per
user, key and model) and how it is read back (the ledger by time, the request log's access paths,
usage over any range). Written by `admission` (billing, leases) and `commerce.credits`; read as
stored here (`admission.balances` adds what the user's open quota leases have counted).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as day_time
from typing import Any

from gateway.settings import get_settings
from gateway.store.aws import from_item, to_item, to_values
from gateway.store.table import AccountsTable, user_pk

# A user's ledger entries spread over this many partition keys (shard 0 is the user's own, where
# every entry written before the shards lives), so that one account's settlements never meet one
# partition's 1000 write units a second; the reads merge the shards newest first.
LEDGER_SHARDS = 8


def ledger_pk(user_id: int, request_id: str) -> str:
    shard = zlib.crc32(request_id.encode()) % LEDGER_SHARDS
    return user_pk(user_id) if shard == 0 else f"{user_pk(user_id)}#L{shard}"


def ledger_pks(user_id: int) -> list[str]:
    return [user_pk(user_id)] + [f"{user_pk(user_id)}#L{shard}" for shard in range(1, LEDGER_SHARDS)]


def below(sort_key: str) -> str:
    """The greatest sort key a query may name as an inclusive bound that is still below `sort_key`
    (a continuation without `ExclusiveStartKey`, whose table key differs from shard to shard)."""
    if not sort_key:
        return ""
    return sort_key[:-1] + chr(ord(sort_key[-1]) - 1) + "\uffff"


def usage_sk(at: datetime, request_id: str) -> str:
    return f"USAGE#{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z#{request_id}"


def ledger_index(user_id: int, key_id: str, model: str, sk: str) -> dict[str, str]:
    """The index keys of a ledger entry: the request log reads one key's (gsi1) or one model's
    (gsi2) entries newest first without reading the rest of the account's ledger."""
    return {"gsi1pk": f"KEYLOG#{key_id}", "gsi1sk": sk, "gsi2pk": f"{user_pk(user_id)}#MODEL#{model}", "gsi2sk": sk}


# The request log's access paths: (index name or None, partition attribute, sort attribute).
LOG_BY_USER, LOG_BY_KEY, LOG_BY_MODEL = (None, "pk", "sk"), ("gsi1", "gsi1pk", "gsi1sk"), ("gsi2", "gsi2pk", "gsi2sk")


def days_pk(user_id: int) -> str:
    return f"DAYS#{user_id}"


def day_counters(*, key_id: str | None = None, model: str | None = None) -> tuple[str, str]:
    """The names of the (units, requests) counters of one series on a day item: the user's,
    a key's or a model's."""
    if key_id and model:
        raise ValueError("usage totals are kept per key or per model, not per key and model")
    prefix = f"key:{key_id}:" if key_id else f"model:{model}:" if model else ""
    return f"{prefix}units", f"{prefix}requests"


def day_total_updates(table: str, *, user_id: int, key_id: str, model: str, units: int,
                      at: datetime, detail: dict[str, Any] | None = None,
                      failed: bool = False) -> list[dict[str, Any]]:
    """The transaction item that adds one closed request to its UTC day's totals: one item per
    user and day, counting units and requests for the user, per key and per model.

    Written in the same transaction as the ledger entry, so the totals and the ledger never
    disagree; a usage read then costs the days it spans instead of every entry in them.
    """
    return [day_total_additions(table, user_id=user_id, day=at.astimezone(UTC).date(),
                                counters=closed_request_counters(key_id=key_id, model=model, units=units,
                                                                 detail=detail, failed=failed))]


def closed_request_counters(*, key_id: str, model: str, units: int,
                            detail: dict[str, Any] | None = None, failed: bool = False) -> dict[str, int]:
    """What one closed request adds to its day's counters: units and one request, for the user,
    its key and its model; and the model's input and output tokens its ledger detail counts
    (`model:<name>:input_tokens`, `...:output_tokens`, only when there are some). A request
    refunded, not settled (`failed`), is also counted as the model's `failed`: the spend rows
    count the requests served, as the user's `request_count` does (`requests` stays one per
    ledger entry, which the usage reads add up)."""
    counters = {counter: int(units) if counter.endswith("units") else 1
                for counter in (*day_counters(), *day_counters(key_id=key_id), *day_counters(model=model))}
    for name in TOKEN_COUNTERS:
        tokens = int((detail or {}).get(name) or 0)
        if tokens > 0:
            counters[f"model:{model}:{name}"] = tokens
    if failed:
        counters[f"model:{model}:failed"] = 1
    return counters


#: The ledger detail's token counts kept per model and day (`closed_request_counters`).
TOKEN_COUNTERS = ("input_tokens", "output_tokens")


def day_total_additions(table: str, *, user_id: int, day: date, counters: dict[str, int]) -> dict[str, Any]:
    """The transaction item that adds `counters` (named as `day_counters` names them) to one
    user's totals of one UTC day."""
    names = {f"#c{n}": counter for n, counter in enumerate(counters)}
    values: dict[str, Any] = {f":v{n}": int(amount) for n, amount in enumerate(counters.values())}
    expression = "ADD " + ", ".join(f"#c{n} :v{n}" for n in range(len(counters)))
    retention = get_settings().ledger_retention_days
    if retention:  # a day's totals outlive its last ledger entry by the same retention
        day_end = datetime.combine(day, day_time(), UTC) + timedelta(days=1)
        values[":ttl"] = int(day_end.timestamp()) + retention * 86400
        expression += " SET expires_ttl = :ttl"
    return {"Update": {"TableName": table, "Key": to_item({"pk": days_pk(user_id), "sk": day.isoformat()}),
                       "UpdateExpression": expression, "ExpressionAttributeNames": names,
                       "ExpressionAttributeValues": to_values(values)}}


@dataclass(frozen=True)
class UsageTotal:
    units: int = 0
    requests: int = 0

    def __add__(self, other: UsageTotal) -> UsageTotal:
        return UsageTotal(self.units + other.units, self.requests + other.requests)


_FIRST_INSTANT, _LAST_INSTANT = day_time(0, 0, 0, 0), day_time(23, 59, 59, 999999)


def _day_start(day: date) -> datetime:
    return datetime.combine(day, _FIRST_INSTANT, UTC)


def _day_end(day: date) -> datetime:
    return datetime.combine(day, _LAST_INSTANT, UTC)


#: The totals of the whole days [first, last] of one series of a user's day counters:
#: `(user_id, counters, first, last) -> UsageTotal` (`UsageRepository.day_sums`, or with open leases).
WholeDays = Callable[[int, tuple[str, str], date | None, date | None], UsageTotal]


class UsageRepository(AccountsTable):
    """The ledger's entries and the day totals, read as stored."""

    def day_items(self, user_id: int, first: date, last: date) -> list[dict[str, Any]]:
        """A user's day items from `first` to `last` (inclusive), as stored: `units`, `requests` and
        the per-key and per-model counters (`model:<name>:units`, ...)."""
        return self._query_all({
            "TableName": self.table, "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": to_values({":pk": days_pk(user_id), ":low": first.isoformat(),
                                                    ":high": last.isoformat()}),
            "ConsistentRead": True,
        })

    def ledger(self, user_id: int, *, start: datetime | None = None, end: datetime | None = None,
               key_id: str | None = None) -> list[dict[str, Any]]:
        """The requests' ledger entries of a user between `start` and `end` (inclusive), oldest first:
        one Query per ledger shard. Top-ups (`commerce.credits`: they carry `credited_units`) are in
        the ledger for the request log, but spend nothing and are no request: left out."""
        low = usage_sk(start, "") if start else "USAGE#"
        high = usage_sk(end, "\uffff") if end else "USAGE#\uffff"
        entries: list[dict[str, Any]] = []
        for partition in ledger_pks(user_id):
            params: dict[str, Any] = {
                "TableName": self.table, "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
                # A bill is readable the moment its answer is: the settlement was written before it.
                "ConsistentRead": True,
                "ExpressionAttributeValues": to_values({":pk": partition, ":low": low, ":high": high}),
            }
            if key_id:
                params["FilterExpression"] = "key_id = :k"
                params["ExpressionAttributeValues"].update(to_values({":k": key_id}))
            entries.extend(e for e in self._query_all(params) if "credited_units" not in e)
        return sorted(entries, key=lambda entry: str(entry["sk"]))

    def log_query(self, user_id: int, path: tuple[str | None, str, str], partition: str, *, low: str, high: str,
                  limit: int, start_after: str | None = None, count_only: bool = False,
                  filter_expression: str | None = None, names: dict[str, str] | None = None,
                  values: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], int, int, str | None]:
        """One read of a user's ledger entries on an access path, newest first: examines at most
        `limit` entries with sort keys in [low, high] below `start_after`. Returns the entries that
        pass the filter (none when `count_only`), how many passed, how many were examined, and the
        sort key to continue after (None when the path is exhausted). The account's own path reads
        every ledger shard (`ledger_pks`); a position is a sort key, the same in every shard."""
        index, pk_name, sk_name = path
        partitions = ledger_pks(user_id) if index is None else [partition]  # the account's own path: no index
        top = min(high, below(start_after)) if start_after else high
        filtered = bool(filter_expression) or count_only

        def query(part: str, bottom: str, *, limit_to: int | None, with_filter: bool) -> tuple[list[dict[str, Any]],
                                                                                               int, str | None]:
            params: dict[str, Any] = {
                "TableName": self.table, "KeyConditionExpression": "#p = :p AND #s BETWEEN :low AND :high",
                "ExpressionAttributeNames": {"#p": pk_name, "#s": sk_name},
                "ExpressionAttributeValues": to_values({":p": part, ":low": bottom, ":high": top}),
                "ScanIndexForward": False,
            }
            if limit_to:
                params["Limit"] = limit_to
            if index:
                params["IndexName"] = index
            else:
                params["ConsistentRead"] = True
            if with_filter and filter_expression:
                params["FilterExpression"] = filter_expression
                params["ExpressionAttributeNames"].update(names or {})
                params["ExpressionAttributeValues"].update(to_values(values or {}))
            if count_only or (filtered and not with_filter):
                params["ProjectionExpression"] = "#s"
            answer = self._db.query(**params)
            items = [from_item(item) for item in answer.get("Items", [])]
            last = answer.get("LastEvaluatedKey")
            return items, int(answer.get("ScannedCount", len(items))), str(from_item(last)[sk_name]) if last else None

        if len(partitions) == 1:
            items, examined, stop = query(partitions[0], low, limit_to=limit, with_filter=True)
            return ([] if count_only else items), len(items), examined, stop
        # Several shards: the newest `limit` sort keys of all of them are the entries this read
        # examines (their keys alone, when a filter then picks among them), so that it examines
        # what one partition would and goes on from exactly where it stopped.
        heads: list[dict[str, Any]] = []
        more = False
        for part in partitions:
            items, _, stop = query(part, low, limit_to=limit, with_filter=not filtered)
            heads.extend(items)
            more = more or stop is not None
        heads.sort(key=lambda entry: str(entry[sk_name]), reverse=True)
        examined_entries = heads[:limit]
        frontier = str(examined_entries[-1][sk_name]) if examined_entries and (more or len(heads) > limit) else None
        if not filtered:
            return examined_entries, len(examined_entries), len(examined_entries), frontier
        kept: list[dict[str, Any]] = []
        for part in partitions:
            kept.extend(query(part, frontier or low, limit_to=None, with_filter=True)[0])
        kept.sort(key=lambda entry: str(entry[sk_name]), reverse=True)
        return ([] if count_only else kept), len(kept), len(examined_entries), frontier

    def usage(self, user_id: int, whole_days: WholeDays, *, start: datetime | None = None,
              end: datetime | None = None, key_id: str | None = None, model: str | None = None) -> UsageTotal:
        """What `ledger(user_id, start=start, end=end)` adds up to (units, entries), for the user,
        one key or one model: the totals of the whole UTC days in the range (`whole_days`: the day
        items' alone, `day_sums`; with the user's open leases, `admission.balances.usage`), plus the
        raw entries of the partial days at its ends. With no dates, the day totals only."""
        counters = day_counters(key_id=key_id, model=model)
        start, end = (t.astimezone(UTC) if t else None for t in (start, end))
        if start and end and start > end:
            return UsageTotal()
        first = None if start is None else start.date() if start.time() == _FIRST_INSTANT \
            else start.date() + timedelta(days=1)
        last = None if end is None else end.date() if end.time() == _LAST_INSTANT else end.date() - timedelta(days=1)
        partial: list[tuple[datetime, datetime]] = []
        # A range no whole day fits in (start <= end here): one day, not whole; its entries only.
        if start and end and first is not None and last is not None and (first > end.date() or last < start.date()):
            partial.append((start, end))
        else:
            if start and start.time() != _FIRST_INSTANT:
                partial.append((start, _day_end(start.date())))
            if end and end.time() != _LAST_INSTANT:
                partial.append((_day_start(end.date()), end))
        total = whole_days(user_id, counters, first, last) if first is None or last is None or first <= last \
            else UsageTotal()
        for low, high in partial:
            entries = [e for e in self.ledger(user_id, start=low, end=high, key_id=key_id)
                       if model is None or e.get("model") == model]
            total += UsageTotal(sum(int(e.get("units", 0)) for e in entries), len(entries))
        return total

    def day_sums(self, user_id: int, counters: tuple[str, str], first: date | None,
                 last: date | None) -> UsageTotal:
        """The stored day items' totals of one series (`counters`, as `day_counters` names them) over
        the days in [first, last] (None: open at that end)."""
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": to_values({":pk": days_pk(user_id),
                                                    ":low": first.isoformat() if first else "0",
                                                    ":high": last.isoformat() if last else "9999-12-31"}),
            "ProjectionExpression": "#u, #r", "ExpressionAttributeNames": {"#u": counters[0], "#r": counters[1]},
            "ConsistentRead": True,
        }
        total = UsageTotal()
        for day in self._query_all(params):
            total += UsageTotal(int(day.get(counters[0], 0)), int(day.get(counters[1], 0)))
        return total
