"""The accounts table (single-table design).

| item | pk | sk |
|---|---|---|
| user profile | `USER#<id>` | `PROFILE` |
| API key | `KEY#<sha256 of key>` | `KEY` (gsi1: `USER#<id>#KEYS` / `<created>#<key id>`) |
| key id pointer | `KEYID#<key id>` | `KEYID` |
| system access token | `ACCESS#<sha256 of token>` | `ACCESS` |
| reservation | `RES#<reservation id>` | `RES` (billing; while open, gsi1: `HOLD#<shard>` / `<hold until>#<id>`) |
| ledger entry | `USER#<id>` | `USAGE#<iso time>#<request id>` (gsi1 `KEYLOG#<key id>`, gsi2 `USER#<id>#MODEL#<m>`) |
| a user's day totals | `DAYS#<user id>` | `<yyyy-mm-dd>` (`units`, `requests`, `key:<id>:…`, `model:<name>:…`) |
| user id counter | `COUNTER` | `USER` |

Secrets (keys, access tokens) are stored only as SHA-256 hashes.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as day_time
from typing import Any

from gateway import keys
from gateway.settings import get_settings
from gateway.store.aws import client, from_item, is_condition_failure, to_item, to_values

PROFILE = "PROFILE"


def user_pk(user_id: int) -> str:
    return f"USER#{user_id}"


def key_pk(key_hash: str) -> str:
    return f"KEY#{key_hash}"


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
                      at: datetime) -> list[dict[str, Any]]:
    """The transaction item that adds one closed request to its UTC day's totals: one item per
    user and day, counting units and requests for the user, per key and per model.

    Written in the same transaction as the ledger entry, so the totals and the ledger never
    disagree; a usage read then costs the days it spans instead of every entry in them.
    """
    day = at.astimezone(UTC).date()
    names: dict[str, str] = {}
    additions = []
    for n, counter in enumerate((*day_counters(), *day_counters(key_id=key_id), *day_counters(model=model))):
        names[f"#c{n}"] = counter
        additions.append(f"#c{n} {':u' if counter.endswith('units') else ':one'}")
    values: dict[str, Any] = {":u": int(units), ":one": 1}
    expression = "ADD " + ", ".join(additions)
    retention = get_settings().ledger_retention_days
    if retention:  # a day's totals outlive its last ledger entry by the same retention
        day_end = datetime.combine(day, day_time(), UTC) + timedelta(days=1)
        values[":ttl"] = int(day_end.timestamp()) + retention * 86400
        expression += " SET expires_ttl = :ttl"
    return [{"Update": {"TableName": table, "Key": to_item({"pk": days_pk(user_id), "sk": day.isoformat()}),
                        "UpdateExpression": expression, "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": to_values(values)}}]


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


def _assignments(changes: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """An update expression that sets each attribute of `changes` (a None value removes it), with
    its names and values."""
    names = {f"#a{n}": name for n, name in enumerate(changes)}
    sets = [f"#a{n} = :v{n}" for n, value in enumerate(changes.values()) if value is not None]
    removes = [f"#a{n}" for n, value in enumerate(changes.values()) if value is None]
    values = {f":v{n}": value for n, value in enumerate(changes.values()) if value is not None}
    expression = " ".join(part for part in (
        "SET " + ", ".join(sets) if sets else "", "REMOVE " + ", ".join(removes) if removes else "") if part)
    return expression, names, values


class UserNotFound(LookupError):
    pass


class KeyNotFound(LookupError):
    pass


class AccountsRepository:
    """Users, keys and access tokens. Quota movements of billed requests live in `billing`."""

    def __init__(self, table: str | None = None):
        self._table = table

    @property
    def table(self) -> str:
        return self._table or get_settings().accounts_table

    @property
    def _db(self):
        return client("dynamodb")

    def _get(self, pk: str, sk: str, consistent: bool = False) -> dict[str, Any] | None:
        answer = self._db.get_item(TableName=self.table, Key=to_item({"pk": pk, "sk": sk}),
                                   ConsistentRead=consistent)
        return from_item(answer.get("Item"))

    # Users ---------------------------------------------------------------------------------

    def create_user(self, *, username: str, display_name: str = "", email: str = "", role: int = 1,
                    group: str = "default", quota: int = 0, user_id: int | None = None,
                    access_token: str | None = None) -> dict[str, Any]:
        """A new user; `user_id` None takes the next free id. Fails if the id is taken."""
        now = int(time.time())
        while True:
            uid = user_id if user_id is not None else self._next_user_id()
            profile = {
                "pk": user_pk(uid), "sk": PROFILE, "id": uid, "username": username,
                "display_name": display_name or username, "role": role, "status": 1, "email": email,
                "github_id": "", "wechat_id": "", "oidc_id": "", "google_id": "",
                "quota": int(quota), "used_quota": 0, "request_count": 0, "group": group,
                "can_use_self_group": False, "aff_code": keys.new_secret(4), "inviter_id": 0,
                "aff_count": 0, "aff_quota": 0, "aff_history_quota": 0, "created_at": now,
                "last_login_at": 0, "last_login_ip": "", "group_ratio": 1, "topup_ratio": 1,
            }
            try:
                self._db.put_item(TableName=self.table, Item=to_item(profile),
                                  ConditionExpression="attribute_not_exists(pk)")
                break
            except Exception as exc:
                if not is_condition_failure(exc):
                    raise
                if user_id is not None:
                    raise ValueError(f"user {user_id} already exists") from None
        if access_token:
            self.set_access_token(uid, access_token)
        return profile

    def _next_user_id(self) -> int:
        answer = self._db.update_item(
            TableName=self.table, Key=to_item({"pk": "COUNTER", "sk": "USER"}),
            UpdateExpression="ADD #v :one", ExpressionAttributeNames={"#v": "value"},
            ExpressionAttributeValues=to_values({":one": 1}), ReturnValues="UPDATED_NEW")
        return int(answer["Attributes"]["value"]["N"])

    def get_user(self, user_id: int, consistent: bool = False) -> dict[str, Any] | None:
        return self._get(user_pk(user_id), PROFILE, consistent)

    def add_user_quota(self, user_id: int, units: int) -> int:
        """Adds `units` on top of the remaining quota (a changed quota accumulates); returns it."""
        try:
            answer = self._db.update_item(
                TableName=self.table, Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                UpdateExpression="ADD quota :u", ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=to_values({":u": int(units)}), ReturnValues="UPDATED_NEW")
        except Exception as exc:
            if is_condition_failure(exc):
                raise UserNotFound(user_id) from None
            raise
        return int(answer["Attributes"]["quota"]["N"])

    def set_access_token(self, user_id: int, token: str) -> None:
        """The system access token of `/api/user/self`; replaces any earlier one."""
        user = self.get_user(user_id, consistent=True)
        if user is None:
            raise UserNotFound(user_id)
        token_hash = keys.hash_secret(token)
        writes: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table, "Item": to_item(
                {"pk": f"ACCESS#{token_hash}", "sk": "ACCESS", "user_id": user_id})}},
            {"Update": {"TableName": self.table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                        "UpdateExpression": "SET access_token_hash = :h",
                        "ExpressionAttributeValues": to_values({":h": token_hash})}},
        ]
        old = user.get("access_token_hash")
        if old and old != token_hash:
            writes.append({"Delete": {"TableName": self.table,
                                      "Key": to_item({"pk": f"ACCESS#{old}", "sk": "ACCESS"})}})
        self._db.transact_write_items(TransactItems=writes)

    def user_id_for_access_token(self, token: str) -> int | None:
        found = self._get(f"ACCESS#{keys.hash_secret(token)}", "ACCESS")
        return int(found["user_id"]) if found else None

    # Keys ----------------------------------------------------------------------------------

    def create_key(self, user_id: int, *, name: str, key: str | None = None, quota: int | None = None,
                   expires_at: int = 0, allowed_models: list[str] | None = None,
                   limits: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Issues a key; returns the key (shown once) and its record. `quota` None is unlimited;
        `limits` are its limit attributes (`admission.limits.Limits.attributes`)."""
        if self.get_user(user_id) is None:
            raise UserNotFound(user_id)
        secret = key or keys.new_key()
        if not keys.looks_like_key(secret):
            raise ValueError("an API key is 'sk-' followed by at least 32 characters")
        key_hash = keys.hash_secret(secret)
        key_id = keys.key_id_of(key_hash)
        now_ms = time.time_ns() // 1_000_000
        now = now_ms // 1000
        record = {
            "pk": key_pk(key_hash), "sk": "KEY", "created_ms": now_ms, "key_id": key_id, "user_id": user_id,
            "name": name,
            "status": "active", "expires_at": int(expires_at), "unlimited": quota is None,
            "remain_quota": int(quota or 0), "used_quota": 0,
            "allowed_models": list(allowed_models) if allowed_models else None,
            "created_at": now, "last_used_at": 0, "key_hint": keys.hint(secret), **(limits or {}),
            "gsi1pk": f"{user_pk(user_id)}#KEYS", "gsi1sk": f"{now:012d}#{key_id}",
        }
        self._db.transact_write_items(TransactItems=[
            {"Put": {"TableName": self.table, "Item": to_item(record),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": self.table, "Item": to_item(
                {"pk": f"KEYID#{key_id}", "sk": "KEYID", "key_hash": key_hash, "user_id": user_id})}},
        ])
        return secret, record

    def get_key(self, key_hash: str) -> dict[str, Any] | None:
        return self._get(key_pk(key_hash), "KEY")

    def key_hash_for_id(self, key_id: str) -> str:
        pointer = self._get(f"KEYID#{key_id}", "KEYID")
        if pointer is None:
            raise KeyNotFound(key_id)
        return pointer["key_hash"]

    def list_keys(self, user_id: int) -> list[dict[str, Any]]:
        """Every key of a user, oldest first."""
        params: dict[str, Any] = {
            "TableName": self.table, "IndexName": "gsi1", "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": to_values({":p": f"{user_pk(user_id)}#KEYS"})}
        return self._every_item(params)

    def _every_item(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item a Query finds, page after page."""
        found: list[dict[str, Any]] = []
        while True:
            answer = self._db.query(**params)
            found.extend(from_item(item) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                return found
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def user_key(self, user_id: int, key_id: str) -> dict[str, Any] | None:
        """The key `key_id` if it belongs to `user_id`, else None (another user's key and a key
        that does not exist look the same)."""
        pointer = self._get(f"KEYID#{key_id}", "KEYID", consistent=True)
        if pointer is None or int(pointer.get("user_id", -1)) != int(user_id):
            return None
        record = self._get(key_pk(pointer["key_hash"]), "KEY", consistent=True)
        return record if record is not None and int(record["user_id"]) == int(user_id) else None

    def update_key(self, key_hash: str, user_id: int, changes: dict[str, Any],
                   condition: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """Sets the attributes of `changes` on a key of `user_id` (a None value removes one);
        returns the record after. Raises `KeyNotFound` when the key is gone, is another user's
        or fails the extra `condition` (an expression over `#s` (status) and its values)."""
        expression, names, values = _assignments(changes)
        values[":owner"] = int(user_id)
        test = "attribute_exists(pk) AND user_id = :owner"
        if condition:
            test += f" AND ({condition[0]})"
            values.update(condition[1])
            names["#s"] = "status"
        try:
            answer = self._db.update_item(
                TableName=self.table, Key=to_item({"pk": key_pk(key_hash), "sk": "KEY"}),
                UpdateExpression=expression, ConditionExpression=test, ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_values(values), ReturnValues="ALL_NEW")
        except Exception as exc:
            if is_condition_failure(exc):
                raise KeyNotFound(key_hash) from None
            raise
        return from_item(answer["Attributes"])

    def set_limits(self, *, limits: dict[str, Any], user_id: int | None = None, key_id: str | None = None) -> None:
        """Sets a user's or a key's limit attributes (a None value clears one)."""
        if user_id is not None:
            pk, sk = user_pk(user_id), PROFILE
        else:
            pk, sk = key_pk(self.key_hash_for_id(str(key_id))), "KEY"
        expression, names, values = _assignments(limits)
        params: dict[str, Any] = {"TableName": self.table, "Key": to_item({"pk": pk, "sk": sk}),
                                  "UpdateExpression": expression, "ConditionExpression": "attribute_exists(pk)",
                                  "ExpressionAttributeNames": names}
        if values:
            params["ExpressionAttributeValues"] = to_values(values)
        try:
            self._db.update_item(**params)
        except Exception as exc:
            if is_condition_failure(exc):
                raise (UserNotFound(user_id) if user_id is not None else KeyNotFound(key_id)) from None
            raise

    def revoke_key(self, key_id: str) -> None:
        self._db.update_item(
            TableName=self.table, Key=to_item({"pk": key_pk(self.key_hash_for_id(key_id)), "sk": "KEY"}),
            UpdateExpression="SET #s = :revoked", ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=to_values({":revoked": "revoked"}))

    def add_key_quota(self, key_id: str, units: int) -> int:
        """Adds `units` on top of a limited key's remaining quota; returns the new remainder."""
        answer = self._db.update_item(
            TableName=self.table, Key=to_item({"pk": key_pk(self.key_hash_for_id(key_id)), "sk": "KEY"}),
            UpdateExpression="ADD remain_quota :u SET unlimited = :f",
            ExpressionAttributeValues=to_values({":u": int(units), ":f": False}), ReturnValues="UPDATED_NEW")
        return int(answer["Attributes"]["remain_quota"]["N"])

    def touch_key(self, key_hash: str, now: int) -> None:
        self._db.update_item(
            TableName=self.table, Key=to_item({"pk": key_pk(key_hash), "sk": "KEY"}),
            UpdateExpression="SET last_used_at = :now", ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=to_values({":now": now}))

    # Operator actions (admin command line) ---------------------------------------------------

    def list_users(self) -> list[dict[str, Any]]:
        """Every user profile, by id (a Scan: an operator's occasional question, not a request path)."""
        params: dict[str, Any] = {"TableName": self.table, "FilterExpression": "sk = :profile",
                                  "ExpressionAttributeValues": to_values({":profile": PROFILE})}
        users: list[dict[str, Any]] = []
        while True:
            answer = self._db.scan(**params)
            users.extend(from_item(item) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                return sorted(users, key=lambda u: int(u["id"]))
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def set_user_enabled(self, user_id: int, enabled: bool) -> list[str]:
        """Disables a user (profile status 2, each active key `disabled`, so every key is refused at
        once) or enables it again (status 1, the keys this disabled become active; a revoked key
        stays revoked). Returns the ids of the keys it changed."""
        try:
            self._db.update_item(
                TableName=self.table, Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                UpdateExpression="SET #s = :status", ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_values({":status": 1 if enabled else 2}))
        except Exception as exc:
            if is_condition_failure(exc):
                raise UserNotFound(user_id) from None
            raise
        before, after = ("disabled", "active") if enabled else ("active", "disabled")
        changed = []
        for record in self.list_keys(user_id):
            try:
                self._db.update_item(
                    TableName=self.table, Key=to_item({"pk": record["pk"], "sk": "KEY"}),
                    UpdateExpression="SET #s = :after", ConditionExpression="#s = :before",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues=to_values({":after": after, ":before": before}))
                changed.append(record["key_id"])
            except Exception as exc:
                if not is_condition_failure(exc):
                    raise
        return changed

    def delete_key(self, key_id: str) -> None:
        """Removes a key and its id pointer together; its ledger entries stay (they name the key id)."""
        key_hash = self.key_hash_for_id(key_id)
        self._db.transact_write_items(TransactItems=[
            {"Delete": {"TableName": self.table, "Key": to_item({"pk": key_pk(key_hash), "sk": "KEY"})}},
            {"Delete": {"TableName": self.table, "Key": to_item({"pk": f"KEYID#{key_id}", "sk": "KEYID"})}},
        ])

    # Ledger --------------------------------------------------------------------------------

    def ledger(self, user_id: int, *, start: datetime | None = None, end: datetime | None = None,
               key_id: str | None = None) -> list[dict[str, Any]]:
        """Ledger entries of a user between `start` and `end` (inclusive), one Query."""
        low = usage_sk(start, "") if start else "USAGE#"
        high = usage_sk(end, "\uffff") if end else "USAGE#\uffff"
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            # A bill is readable the moment its answer is: the settlement was written before it.
            "ConsistentRead": True,
            "ExpressionAttributeValues": to_values({":pk": user_pk(user_id), ":low": low, ":high": high}),
        }
        if key_id:
            params["FilterExpression"] = "key_id = :k"
            params["ExpressionAttributeValues"].update(to_values({":k": key_id}))
        return self._every_item(params)

    def log_query(self, user_id: int, path: tuple[str | None, str, str], partition: str, *, low: str, high: str,
                  limit: int, start_after: str | None = None, count_only: bool = False,
                  filter_expression: str | None = None, names: dict[str, str] | None = None,
                  values: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], int, int, str | None]:
        """One read of a user's ledger entries on an access path, newest first: examines at most
        `limit` entries with sort keys in [low, high] below `start_after`. Returns the entries that
        pass the filter (none when `count_only`), how many passed, how many were examined, and the
        sort key to continue after (None when the path is exhausted)."""
        index, pk_name, sk_name = path
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "#p = :p AND #s BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#p": pk_name, "#s": sk_name, **(names or {})},
            "ExpressionAttributeValues": to_values({":p": partition, ":low": low, ":high": high, **(values or {})}),
            "ScanIndexForward": False, "Limit": limit,
        }
        if index:
            params["IndexName"] = index
        if filter_expression:
            params["FilterExpression"] = filter_expression
        if count_only:
            params["Select"] = "COUNT"
        if start_after:
            # A position on an index is the entry's table key plus its index key.
            params["ExclusiveStartKey"] = to_item({"pk": user_pk(user_id), "sk": start_after,
                                                   pk_name: partition, sk_name: start_after})
        answer = self._db.query(**params)
        items = [from_item(item) for item in answer.get("Items", [])]
        last = answer.get("LastEvaluatedKey")
        return (items, int(answer.get("Count", len(items))), int(answer.get("ScannedCount", len(items))),
                from_item(last)[sk_name] if last else None)
    def usage(self, user_id: int, *, start: datetime | None = None, end: datetime | None = None,
              key_id: str | None = None, model: str | None = None) -> UsageTotal:
        """What `ledger(user_id, start=start, end=end)` adds up to (units, entries), for the user,
        one key or one model: the day totals of the whole UTC days in the range, plus the raw
        entries of the partial days at its ends. With no dates, the day totals only."""
        counters = day_counters(key_id=key_id, model=model)
        start, end = (t.astimezone(UTC) if t else None for t in (start, end))
        if start and end and start > end:
            return UsageTotal()
        first = None if start is None else start.date() if start.time() == _FIRST_INSTANT \
            else start.date() + timedelta(days=1)
        last = None if end is None else end.date() if end.time() == _LAST_INSTANT else end.date() - timedelta(days=1)
        partial: list[tuple[datetime, datetime]] = []
        if start and end and start.date() == end.date() and (first is None or first > end.date()
                                                              or last is None or last < start.date()):
            partial.append((start, end))  # one day, not whole: its entries only
        else:
            if start and start.time() != _FIRST_INSTANT:
                partial.append((start, _day_end(start.date())))
            if end and end.time() != _LAST_INSTANT:
                partial.append((_day_start(end.date()), end))
        total = self._day_totals(user_id, counters, first, last) if first is None or last is None or first <= last \
            else UsageTotal()
        for low, high in partial:
            entries = [e for e in self.ledger(user_id, start=low, end=high, key_id=key_id)
                       if model is None or e.get("model") == model]
            total += UsageTotal(sum(int(e.get("units", 0)) for e in entries), len(entries))
        return total

    def _day_totals(self, user_id: int, counters: tuple[str, str], first: date | None,
                    last: date | None) -> UsageTotal:
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": to_values({":pk": days_pk(user_id),
                                                    ":low": first.isoformat() if first else "0",
                                                    ":high": last.isoformat() if last else "9999-12-31"}),
            "ProjectionExpression": "#u, #r", "ExpressionAttributeNames": {"#u": counters[0], "#r": counters[1]},
            "ConsistentRead": True,
        }
        total = UsageTotal()
        while True:
            answer = self._db.query(**params)
            for item in answer.get("Items", []):
                day = from_item(item)
                total += UsageTotal(int(day.get(counters[0], 0)), int(day.get(counters[1], 0)))
            if "LastEvaluatedKey" not in answer:
                return total
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
