"""The accounts table (single-table design).

| item | pk | sk |
|---|---|---|
| user profile | `USER#<id>` | `PROFILE` |
| API key | `KEY#<sha256 of key>` | `KEY` (gsi1: `USER#<id>#KEYS` / `<created>#<key id>`) |
| key id pointer | `KEYID#<key id>` | `KEYID` |
| system access token | `ACCESS#<sha256 of token>` | `ACCESS` |
| reservation | `RES#<reservation id>` | `RES` (billing; while open, gsi1: `HOLD#<shard>` / `<hold until>#<id>`) |
| ledger entry | `USER#<id>`[`#L<shard>`] | `USAGE#<iso time>#<request id>` (gsi1 `KEYLOG#<key id>`, gsi2 |
|  |  | `USER#<id>#MODEL#<m>`) |
| quota lease | `LEASE#<user id>#<shard>` | `LEASE#<lease id>` (admission.leases; while open, gsi1 as a |
|  |  | reservation's) |
| a user's day totals | `DAYS#<user id>` | `<yyyy-mm-dd>` (`units`, `requests`, `key:<id>:…`, `model:<name>:…`) |
| user id counter | `COUNTER` | `USER` |
| channel health | `CHANNEL_HEALTH` | `<channel name>` (`routing/health.py`) |
| an added channel (/api/channel/) | `CHANNEL` | `<channel name>` (`routing/channel_store.py`; key: Secrets Manager) |
| channel id counter | `COUNTER` | `CHANNEL` |
| username pointer (users with a password) | `USERNAME#<username, lower case>` | `USERNAME` |
| invitation code pointer | `AFF#<aff code>` | `AFF` (`user_id`) |
| console session | `SESSION#<sha256 of session token>` | `SESSION` (TTL at its expiry) |
| sign-in attempts (`api/session`) | `SIGNIN#pair:<name>/<address>`, `SIGNIN#addr:<address>`, | `<window start>` (TTL) |
|  | `SIGNIN#name:<name>` |  |

Secrets (keys, access tokens) are stored only as SHA-256 hashes.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as day_time
from decimal import Decimal
from typing import Any

from gateway import keys
from gateway.settings import get_settings
from gateway.store.aws import (
    cancellation_reasons,
    client,
    from_item,
    is_condition_failure,
    query_all,
    to_item,
    to_values,
    transact,
)

PROFILE = "PROFILE"


def user_pk(user_id: int) -> str:
    return f"USER#{user_id}"


#: The item an unknown name's sign-in reads where a known name's reads its profile (`sign_in_record`):
#: shaped like the profile of the last user given a password (the same attribute names and types,
#: strings of the same lengths, no one's data), so both reads find an item as large and parse
#: it alike. Written whenever a password is set: by the time any name can sign in, it exists.
SIGN_IN_DECOY_KEY = {"pk": "SIGNIN-DECOY", "sk": "DECOY"}


def sign_in_decoy(profile: dict[str, Any]) -> dict[str, Any]:
    """A profile's shape with no one's data: strings as as many `x`, numbers 0, the rest (flags)
    as they are; no TTL attribute (a 0 there would have DynamoDB delete the item)."""
    def blank(value: Any) -> Any:
        if isinstance(value, str):
            return "x" * len(value)
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float, Decimal)):
            return 0
        if isinstance(value, dict):
            return {name: blank(inner) for name, inner in value.items()}
        if isinstance(value, list):
            return [blank(inner) for inner in value]
        return value

    shape = {name: blank(value) for name, value in profile.items() if name not in ("pk", "sk", "expires_ttl")}
    return {**shape, **SIGN_IN_DECOY_KEY}


def username_pk(username: str) -> str:
    """A sign-in name's pointer: names compare case-insensitively (ASCII, `schemas.account.Username`)."""
    return f"USERNAME#{username.lower()}"


@dataclass(frozen=True)
class SignInCounter:
    """One counter a sign-in raises before its password is checked (`admit_sign_in`)."""

    subject: str
    window: int
    limit: int
    expires: int
    gap: int = 0


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


# A user's ledger entries spread over this many partition keys (shard 0 is the user's own, where
# every entry written before the shards lives), so that one account's settlements never meet one
# partition's 1000 write units a second; the reads merge the shards newest first.
LEDGER_SHARDS = 8


def ledger_pk(user_id: int, request_id: str) -> str:
    shard = zlib.crc32(request_id.encode()) % LEDGER_SHARDS
    return user_pk(user_id) if shard == 0 else f"{user_pk(user_id)}#L{shard}"


def ledger_pks(user_id: int) -> list[str]:
    return [user_pk(user_id)] + [f"{user_pk(user_id)}#L{shard}" for shard in range(1, LEDGER_SHARDS)]


# A user's open quota leases spread over this many partition keys (each lease takes one write per
# request it settles); a balance read queries them all.
LEASE_SHARDS = 8


def lease_key(user_id: int, lease_id: str) -> dict[str, str]:
    return {"pk": f"LEASE#{user_id}#{zlib.crc32(lease_id.encode()) % LEASE_SHARDS}", "sk": f"LEASE#{lease_id}"}


def lease_pks(user_id: int) -> list[str]:
    return [f"LEASE#{user_id}#{shard}" for shard in range(LEASE_SHARDS)]


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
                      at: datetime, detail: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The transaction item that adds one closed request to its UTC day's totals: one item per
    user and day, counting units and requests for the user, per key and per model.

    Written in the same transaction as the ledger entry, so the totals and the ledger never
    disagree; a usage read then costs the days it spans instead of every entry in them.
    """
    return [day_total_additions(table, user_id=user_id, day=at.astimezone(UTC).date(),
                                counters=closed_request_counters(key_id=key_id, model=model, units=units,
                                                                 detail=detail))]


def quota_debit(table: str, user_id: int, units: int) -> dict[str, Any]:
    """The transaction item that takes `units` from an enabled user's quota, only if it has them."""
    return {"Update": {"TableName": table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                       "UpdateExpression": "ADD quota :neg", "ConditionExpression": "quota >= :u AND #s = :enabled",
                       "ExpressionAttributeNames": {"#s": "status"},
                       "ExpressionAttributeValues": to_values({":u": units, ":neg": -units, ":enabled": 1})}}


def closed_request_counters(*, key_id: str, model: str, units: int,
                            detail: dict[str, Any] | None = None) -> dict[str, int]:
    """What one closed request adds to its day's counters: units and one request, for the user,
    its key and its model; and the model's input and output tokens its ledger detail counts
    (`model:<name>:input_tokens`, `...:output_tokens`, only when there are some)."""
    counters = {counter: int(units) if counter.endswith("units") else 1
                for counter in (*day_counters(), *day_counters(key_id=key_id), *day_counters(model=model))}
    for name in TOKEN_COUNTERS:
        tokens = int((detail or {}).get(name) or 0)
        if tokens > 0:
            counters[f"model:{model}:{name}"] = tokens
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

    def _query_all(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of a Query, page after page."""
        return query_all(params, self._db)

    def _get(self, pk: str, sk: str, consistent: bool = False) -> dict[str, Any] | None:
        answer = self._db.get_item(TableName=self.table, Key=to_item({"pk": pk, "sk": sk}),
                                   ConsistentRead=consistent)
        return from_item(answer.get("Item"))

    # Users ---------------------------------------------------------------------------------

    def create_user(self, *, username: str, display_name: str = "", email: str = "", role: int = 1,
                    group: str = "default", quota: int = 0, user_id: int | None = None,
                    access_token: str | None = None, inviter_id: int = 0) -> dict[str, Any]:
        """A new user; `user_id` None takes the next free id. Fails if the id is taken. Its
        invitation code finds it (`user_id_for_aff_code`)."""
        if user_id is not None and user_id < 1:
            raise ValueError("a user id is a whole number from 1")
        now = int(time.time())
        while True:
            uid = user_id if user_id is not None else self._next_user_id()
            profile = {
                "pk": user_pk(uid), "sk": PROFILE, "id": uid, "username": username,
                "display_name": display_name or username, "role": role, "status": 1, "email": email,
                "github_id": "", "wechat_id": "", "oidc_id": "", "google_id": "",
                "quota": int(quota), "used_quota": 0, "request_count": 0, "group": group,
                "can_use_self_group": False, "aff_code": keys.new_secret(4), "inviter_id": int(inviter_id),
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
        if user_id is not None:
            self.raise_user_counter(user_id)
        profile["aff_code"] = self.claim_aff_code(uid, str(profile["aff_code"]))
        if access_token:
            self.set_access_token(uid, access_token)
        return profile

    def claim_aff_code(self, user_id: int, code: str) -> str:
        """Makes `code` find the user (a pointer item); another code, written on the profile, if
        it is someone else's already."""
        first = code
        for _ in range(8):
            try:
                self._db.put_item(TableName=self.table, Item=to_item({"pk": f"AFF#{code}", "sk": "AFF",
                                                                       "user_id": user_id}),
                                  ConditionExpression="attribute_not_exists(pk) OR user_id = :u",
                                  ExpressionAttributeValues=to_values({":u": user_id}))
                break
            except Exception as exc:
                if not is_condition_failure(exc):
                    raise
                code = keys.new_secret(6)
        else:
            raise RuntimeError("no free invitation code was found")
        if code != first:
            self._db.update_item(TableName=self.table, Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                                 UpdateExpression="SET aff_code = :c",
                                 ExpressionAttributeValues=to_values({":c": code}))
        return code

    def user_id_for_aff_code(self, code: str) -> int | None:
        found = self._get(f"AFF#{code}", "AFF", consistent=True) if code else None
        return int(found["user_id"]) if found else None

    def raise_user_counter(self, user_id: int) -> None:
        """Keeps the user id counter at or above every id taken, so that `users_page` sees an id
        chosen explicitly too."""
        try:
            self._db.update_item(
                TableName=self.table, Key=to_item({"pk": "COUNTER", "sk": "USER"}), UpdateExpression="SET #v = :id",
                ConditionExpression="attribute_not_exists(#v) OR #v < :id", ExpressionAttributeNames={"#v": "value"},
                ExpressionAttributeValues=to_values({":id": int(user_id)}))
        except Exception as exc:
            if not is_condition_failure(exc):
                raise

    def _next_user_id(self) -> int:
        answer = self._db.update_item(
            TableName=self.table, Key=to_item({"pk": "COUNTER", "sk": "USER"}),
            UpdateExpression="ADD #v :one", ExpressionAttributeNames={"#v": "value"},
            ExpressionAttributeValues=to_values({":one": 1}), ReturnValues="UPDATED_NEW")
        return int(answer["Attributes"]["value"]["N"])

    def get_user(self, user_id: int, consistent: bool = False) -> dict[str, Any] | None:
        """The profile as users see it: the units on the account's open quota leases included
        (`admission.leases.account_view`); `raw_user` is the item alone."""
        from gateway.admission import leases

        profile, open_leases = leases.with_open_leases(user_id, lambda: self._get(user_pk(user_id), PROFILE, True))
        return leases.account_view(profile, open_leases) if profile is not None else None

    def raw_user(self, user_id: int, consistent: bool = False) -> dict[str, Any] | None:
        return self._get(user_pk(user_id), PROFILE, consistent)

    def add_user_quota(self, user_id: int, units: int) -> int:
        """Adds `units` on top of the remaining quota (a changed quota accumulates); returns it.

        Exactly once: an `ADD` DynamoDB applied whose answer was lost would be added again by
        botocore's retry, so it goes as a one-item transaction, which DynamoDB applies once per
        `ClientRequestToken` (botocore makes one per call and keeps it for its retries)."""
        try:
            transact(self._db, [{"Update": {
                "TableName": self.table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                "UpdateExpression": "ADD quota :u", "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": to_values({":u": int(units)})}}])
        except Exception as exc:
            if cancellation_reasons(exc)[:1] == ["ConditionalCheckFailed"]:
                raise UserNotFound(user_id) from None
            raise
        return int((self.get_user(user_id, consistent=True) or {}).get("quota", 0))  # its open leases included

    def set_access_token(self, user_id: int, token: str) -> None:
        """The system access token of `/api/user/self`; replaces any earlier one."""
        user = self.raw_user(user_id, consistent=True)
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
        if old and old != token_hash:  # the old token now only says it was replaced
            writes.append({"Put": {"TableName": self.table, "Item": to_item(
                {"pk": f"ACCESS#{old}", "sk": "ACCESS", "user_id": user_id, "replaced_at": int(time.time())})}})
        transact(self._db, writes)

    def user_id_for_access_token(self, token: str) -> int | None:
        """The user whose current system access token this is, else None."""
        found = self.access_token_record(token)
        return int(found["user_id"]) if found and not found.get("replaced_at") else None

    def access_token_record(self, token: str) -> dict[str, Any] | None:
        """The token's record: `user_id`, and `replaced_at` once set-access-token replaced it."""
        return self._get(f"ACCESS#{keys.hash_secret(token)}", "ACCESS")

    # Keys ----------------------------------------------------------------------------------

    def create_key(self, user_id: int, *, name: str, key: str | None = None, quota: int | None = None,
                   expires_at: int = 0, allowed_models: list[str] | None = None,
                   limits: dict[str, Any] | None = None, group: str = "") -> tuple[str, dict[str, Any]]:
        """Issues a key; returns the key (shown once) and its record. `quota` None is unlimited;
        `limits` are its limit attributes (`limit_values.Limits.attributes`); `group` its own
        group (empty: its user's, `gateway.groups`)."""
        if self.raw_user(user_id) is None:
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
            **({"group": group} if group else {}),
            "gsi1pk": f"{user_pk(user_id)}#KEYS", "gsi1sk": f"{now:012d}#{key_id}",
        }
        transact(self._db, [
            {"Put": {"TableName": self.table, "Item": to_item(record),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": self.table, "Item": to_item(
                {"pk": f"KEYID#{key_id}", "sk": "KEYID", "key_hash": key_hash, "user_id": user_id})}},
        ])
        return secret, record

    def get_key(self, key_hash: str, *, balances: bool = True, consistent: bool = False) -> dict[str, Any] | None:
        """A key; with `balances`, its quota counters as users see them (its open leases included)
        and read consistently, as with `consistent`."""
        key = self._get(key_pk(key_hash), "KEY", consistent=balances or consistent)
        if key is None or not balances:
            return key
        from gateway.admission import leases

        key, open_leases = leases.with_open_leases(int(key["user_id"]),
                                                   lambda: self._get(key_pk(key_hash), "KEY", True))
        return leases.key_view(key, open_leases) if key is not None else None

    def key_hash_for_id(self, key_id: str) -> str:
        pointer = self._get(f"KEYID#{key_id}", "KEYID")
        if pointer is None:
            raise KeyNotFound(key_id)
        return pointer["key_hash"]

    def list_keys(self, user_id: int, *, include_deleted: bool = False) -> list[dict[str, Any]]:
        """A user's keys, oldest first, their quota counters as users see them (open leases
        included); with `include_deleted`, the deleted ones' remains too (id and name)."""
        from gateway.admission import leases

        def read() -> list[dict[str, Any]]:
            return self._query_all({
                "TableName": self.table, "IndexName": "gsi1", "KeyConditionExpression": "gsi1pk = :p",
                "ExpressionAttributeValues": to_values({":p": f"{user_pk(user_id)}#KEYS"})})

        found, open_leases = leases.with_open_leases(user_id, read)
        return [leases.key_view(key, open_leases) for key in found
                if include_deleted or key.get("status") != "deleted"]

    def user_key(self, user_id: int, key_id: str) -> dict[str, Any] | None:
        """The key `key_id` if it belongs to `user_id`, else None (another user's key and a key
        that does not exist look the same)."""
        pointer = self._get(f"KEYID#{key_id}", "KEYID", consistent=True)
        if pointer is None or int(pointer.get("user_id", -1)) != int(user_id):
            return None
        # The pointer and the key record name the same user (both written once, at issue).
        return self._get(key_pk(pointer["key_hash"]), "KEY", consistent=True)

    def update_key(self, key_hash: str, user_id: int, changes: dict[str, Any],
                   condition: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """Sets the attributes of `changes` on a key of `user_id` (a None value removes one);
        returns the record after. Raises `KeyNotFound` when the key is gone, is another user's
        or fails the extra `condition` (an expression over `#s` (status) or any attribute by its
        name, and its values)."""
        expression, names, values = _assignments(changes)
        values[":owner"] = int(user_id)
        test = "attribute_exists(pk) AND user_id = :owner"
        if condition:
            test += f" AND ({condition[0]})"
            values.update(condition[1])
            if "#s" in condition[0]:
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

    def set_user_fields(self, user_id: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Sets attributes of an existing profile (the operator's `PUT /api/user/`); the profile after."""
        expression, names, values = _assignments(changes)
        try:
            answer = self._db.update_item(
                TableName=self.table, Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                UpdateExpression=expression, ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=names, ExpressionAttributeValues=to_values(values), ReturnValues="ALL_NEW")
        except Exception as exc:
            if is_condition_failure(exc):
                raise UserNotFound(user_id) from None
            raise
        return from_item(answer["Attributes"])

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
        """Every user profile as users see it (the units on open quota leases included, as
        `get_user`), by id (a Scan: an operator's occasional question, not a request path)."""
        params: dict[str, Any] = {"TableName": self.table, "FilterExpression": "sk = :profile",
                                  "ExpressionAttributeValues": to_values({":profile": PROFILE})}
        ids: list[int] = []
        while True:
            answer = self._db.scan(**params)
            ids.extend(int(from_item(item)["id"]) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                break
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        users = (self.get_user(user_id, consistent=True) for user_id in sorted(ids))
        return [user for user in users if user is not None]

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
        """Deletes a key for good: its record shrinks to what its past needs (id, user, name, the
        status `deleted`, so it is refused as deleted and its log entries keep its name), and its
        id pointer goes, so no command finds it again. Its ledger entries stay."""
        key_hash = self.key_hash_for_id(key_id)
        record = self.get_key(key_hash) or {}
        kept = ("key_id", "user_id", "name", "created_at", "gsi1pk", "gsi1sk")
        remains: dict[str, Any] = {name: record[name] for name in kept if name in record}
        transact(self._db, [
            {"Put": {"TableName": self.table, "Item": to_item(
                {**remains, "pk": key_pk(key_hash), "sk": "KEY", "key_id": key_id, "status": "deleted",
                 "deleted_at": int(time.time())}),
                "ConditionExpression": "attribute_exists(pk)"}},
            {"Delete": {"TableName": self.table, "Key": to_item({"pk": f"KEYID#{key_id}", "sk": "KEYID"})}},
        ])

    def users_page(self, limit: int, after: int | None = None) -> tuple[list[dict[str, Any]], int | None]:
        """At most `limit` user profiles with ids above `after`, by id, and the id to continue
        after (None at the end). Profiles are found by walking ids from the counter down to
        `after`: one BatchGetItem per page, never a Scan of the table."""
        counter = self._get("COUNTER", "USER", consistent=True)
        highest = int(counter["value"]) if counter else 0
        first = (after or 0) + 1
        users: list[dict[str, Any]] = []
        uid = first
        while uid <= highest and len(users) < limit:
            ids = list(range(uid, min(uid + 100, highest + 1)))
            keys_ = [to_item({"pk": user_pk(i), "sk": PROFILE}) for i in ids]
            found: list[dict[str, Any]] = []
            while keys_:
                answer = self._db.batch_get_item(RequestItems={self.table: {"Keys": keys_, "ConsistentRead": True}})
                found.extend(from_item(item) for item in answer.get("Responses", {}).get(self.table, []))
                keys_ = answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
            for user in sorted(found, key=lambda u: int(u["id"])):
                if len(users) < limit:
                    users.append(user)
            uid = ids[-1] + 1
        last = int(users[-1]["id"]) if users else None
        more = last is not None and last < highest
        return users, last if more else None

    # Passwords, console sessions, sign-in attempts -------------------------------------------

    def set_password(self, user_id: int, password_hash: str) -> None:
        """Stores a user's password hash and makes its username a sign-in name (unique whatever
        its casing: a second user of the same name, in any case, cannot have a password)."""
        user = self.get_user(user_id, consistent=True)
        if user is None:
            raise UserNotFound(user_id)
        try:
            transact(self._db, [
                {"Put": {"TableName": self.table, "Item": to_item(
                    {"pk": username_pk(user["username"]), "sk": "USERNAME", "user_id": user_id}),
                    "ConditionExpression": "attribute_not_exists(pk) OR user_id = :u",
                    "ExpressionAttributeValues": to_values({":u": user_id})}},
                {"Update": {"TableName": self.table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                            "UpdateExpression": "SET password_hash = :h", "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": to_values({":h": password_hash})}},
            ])
        except Exception as exc:
            if is_condition_failure(exc):
                raise ValueError(f"username '{user['username']}' already signs in as another user") from None
            raise
        try:  # never worth failing a password change for: without it, only the two sign-in reads differ in size
            profile = self.raw_user(user_id, consistent=True)
            if profile is not None:
                self._db.put_item(TableName=self.table, Item=to_item(sign_in_decoy(profile)))
        except Exception:
            pass

    def note_sign_in(self, user_id: int, at: int, address: str) -> None:
        """`last_login_at` and `last_login_ip` of the account record."""
        self._db.update_item(TableName=self.table, Key=to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                             UpdateExpression="SET last_login_at = :t, last_login_ip = :ip",
                             ConditionExpression="attribute_exists(pk)",
                             ExpressionAttributeValues=to_values({":t": int(at), ":ip": address[:64]}))

    def user_id_for_username(self, username: str) -> int | None:
        found = self._get(username_pk(username), "USERNAME", consistent=True)
        return int(found["user_id"]) if found else None

    def sign_in_record(self, username: str) -> tuple[int | None, dict[str, Any] | None]:
        """The user a sign-in names and its profile item, in the same two reads whether the name
        exists or not (an unknown name reads `SIGN_IN_DECOY_KEY`, an item as large as a profile):
        the store's work does not tell a known name from an unknown one."""
        user_id = self.user_id_for_username(username)
        if user_id is None:
            self._get(SIGN_IN_DECOY_KEY["pk"], SIGN_IN_DECOY_KEY["sk"], consistent=True)
            return None, None
        return user_id, self.raw_user(user_id, consistent=True)

    def put_session(self, token_hash: str, user_id: int, expires_at: int) -> None:
        self._db.put_item(TableName=self.table, Item=to_item({
            "pk": f"SESSION#{token_hash}", "sk": "SESSION", "user_id": user_id, "created_at": int(time.time()),
            "expires_at": expires_at, "expires_ttl": expires_at}))

    def get_session(self, token_hash: str) -> dict[str, Any] | None:
        return self._get(f"SESSION#{token_hash}", "SESSION", consistent=True)

    def delete_session(self, token_hash: str) -> None:
        self._db.delete_item(TableName=self.table, Key=to_item({"pk": f"SESSION#{token_hash}", "sk": "SESSION"}))

    # Sign-in counters (`api/session`): `SIGNIN#<subject>` / `<window start>`, with a TTL.

    def sign_in_counter(self, subject: str, window_start: int) -> dict[str, Any]:
        """A sign-in counter item (`attempts`, `failures`, `next_at`, `last_at`), {} if none."""
        return self._get(f"SIGNIN#{subject}", str(window_start), consistent=True) or {}

    def admit_sign_in(self, counters: list[SignInCounter], now: int) -> int | None:
        """Raises each counter's `attempts` by one, in one transaction, if each is still within its
        rule (fewer than its `limit` attempts, past its `next_at`, and, for one with `gap`, its last
        attempt at least `gap` seconds ago); else changes nothing and answers the index of the
        first counter that refused. This runs before the password is checked, so parallel tries
        never check more passwords than the limit."""
        items = []
        for counter in counters:
            condition = "(attribute_not_exists(attempts) OR attempts < :limit) " \
                        "AND (attribute_not_exists(next_at) OR next_at <= :now)"
            values: dict[str, Any] = {":one": 1, ":limit": counter.limit, ":now": now, ":ttl": counter.expires}
            if counter.gap:
                condition += " AND (attribute_not_exists(last_at) OR last_at <= :since)"
                values[":since"] = now - counter.gap
            items.append({"Update": {
                "TableName": self.table, "Key": to_item({"pk": f"SIGNIN#{counter.subject}", "sk": str(counter.window)}),
                "UpdateExpression": "ADD attempts :one SET last_at = :now, expires_ttl = :ttl",
                "ConditionExpression": condition, "ExpressionAttributeValues": to_values(values)}})
        try:
            transact(self._db, items)
        except Exception as exc:  # anything but a counter's refusal (a throttle, a conflict) goes up
            refused = [i for i, code in enumerate(cancellation_reasons(exc)) if code == "ConditionalCheckFailed"]
            if not refused:
                raise
            return refused[0]
        return None

    def count_sign_in_failure(self, subject: str, window_start: int, expires: int) -> int:
        """One more failure of `subject` in the window; answers the failures so far."""
        answer = self._db.update_item(
            TableName=self.table, Key=to_item({"pk": f"SIGNIN#{subject}", "sk": str(window_start)}),
            UpdateExpression="ADD failures :one SET expires_ttl = :ttl",
            ExpressionAttributeValues=to_values({":one": 1, ":ttl": expires}), ReturnValues="UPDATED_NEW")
        return int(answer["Attributes"]["failures"]["N"])

    def delay_sign_ins(self, subject: str, window_start: int, until: int) -> None:
        """No attempt of `subject` before `until` (never brought earlier by a racing failure)."""
        try:
            self._db.update_item(
                TableName=self.table, Key=to_item({"pk": f"SIGNIN#{subject}", "sk": str(window_start)}),
                UpdateExpression="SET next_at = :until",
                ConditionExpression="attribute_not_exists(next_at) OR next_at < :until",
                ExpressionAttributeValues=to_values({":until": until}))
        except Exception as exc:
            if not is_condition_failure(exc):
                raise

    def forget_sign_in_attempt(self, subject: str, window_start: int, *, reset: bool) -> None:
        """A successful sign-in: its attempt no longer counts (`reset`: the counter starts over)."""
        key = to_item({"pk": f"SIGNIN#{subject}", "sk": str(window_start)})
        if reset:
            self._db.delete_item(TableName=self.table, Key=key)
        else:
            try:
                self._db.update_item(TableName=self.table, Key=key, UpdateExpression="ADD attempts :minus",
                                     ConditionExpression="attempts > :zero",
                                     ExpressionAttributeValues=to_values({":minus": -1, ":zero": 0}))
            except Exception as exc:  # the window turned meanwhile: nothing to give back
                if not is_condition_failure(exc):
                    raise

    def day_totals(self, user_id: int, first: date, last: date) -> list[dict[str, Any]]:
        """A user's day items from `first` to `last` (inclusive): `units`, `requests` and the
        per-key and per-model counters (`model:<name>:units`, ...), with what the user's open
        quota leases have counted for those days and not yet folded into them."""
        from gateway.admission import leases

        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": to_values({":pk": days_pk(user_id), ":low": first.isoformat(),
                                                    ":high": last.isoformat()}),
            "ConsistentRead": True,
        }
        stored, open_leases = leases.with_open_leases(user_id, lambda: self._query_all(params))
        days = {str(item["sk"]): dict(item) for item in stored}
        for day, counted in leases.open_day_counters(open_leases).items():
            if first <= day <= last:
                into = days.setdefault(day.isoformat(), {"pk": days_pk(user_id), "sk": day.isoformat()})
                for name, value in counted.items():
                    into[name] = int(into.get(name, 0)) + value
        return [days[day] for day in sorted(days)]

    # Ledger --------------------------------------------------------------------------------

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
        # A range no whole day fits in (start <= end here): one day, not whole; its entries only.
        if start and end and first is not None and last is not None and (first > end.date() or last < start.date()):
            partial.append((start, end))
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
        """The day items' totals of the days in [first, last], plus what the user's open quota
        leases have counted for those days and not yet folded into them."""
        from gateway.admission import leases

        total, open_leases = leases.with_open_leases(user_id, lambda: self._stored_day_totals(
            user_id, counters, first, last))
        for day, counted in leases.open_day_counters(open_leases).items():
            if (first is None or day >= first) and (last is None or day <= last):
                total += UsageTotal(counted.get(counters[0], 0), counted.get(counters[1], 0))
        return total

    def _stored_day_totals(self, user_id: int, counters: tuple[str, str], first: date | None,
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
        for day in self._query_all(params):
            total += UsageTotal(int(day.get(counters[0], 0)), int(day.get(counters[1], 0)))
        return total
