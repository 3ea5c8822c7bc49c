"""API keys in the accounts table: a key's record (`KEY#<sha256 of key>`, indexed under its user),
its id pointer (`KEYID#<key id>`), issue, lookup, the owner's and the operator's changes, deletion.
A deleted key keeps a record with status `deleted` (id, user, name; its id pointer goes), so it is
refused as deleted and its log entries keep its name. Quota movements of billed requests are
`admission`'s; a key as its user sees it (its open leases added) is `admission.balances.get_key`.
"""

from __future__ import annotations

import time
from typing import Any

from gateway import keys
from gateway.aws_failures import cancellation_reasons
from gateway.store.aws import from_item, is_condition_failure, to_item, to_values, transact
from gateway.store.table import PROFILE, AccountsTable, KeyNotFound, UserNotFound, assignments, key_pk, user_pk


class KeysRepository(AccountsTable):
    """A user's API keys."""

    def create_key(self, user_id: int, *, name: str, key: str | None = None, quota: int | None = None,
                   expires_at: int = 0, allowed_models: list[str] | None = None,
                   limits: dict[str, Any] | None = None, group: str = "") -> tuple[str, dict[str, Any]]:
        """Issues a key; returns the key (shown once) and its record. `quota` None is unlimited;
        `limits` are its limit attributes (`limit_values.Limits.attributes`); `group` its own
        group (empty: its user's, `gateway.groups`)."""
        if self._get(user_pk(user_id), PROFILE) is None:
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
        try:
            transact(self._db, [
                {"Put": {"TableName": self.table, "Item": to_item(record),
                         "ConditionExpression": "attribute_not_exists(pk)"}},
                {"Put": {"TableName": self.table, "Item": to_item(
                    {"pk": f"KEYID#{key_id}", "sk": "KEYID", "key_hash": key_hash, "user_id": user_id})}},
            ])
        except Exception as exc:
            # Asked again after a lost answer, the transaction meets the key it wrote itself: that
            # is this call's success (the same user, the same moment), never another's key.
            if cancellation_reasons(exc)[:1] != ["ConditionalCheckFailed"]:
                raise
            found = self.raw_key(key_hash, consistent=True)
            if found is None or (int(found["user_id"]), int(found["created_ms"])) != (user_id, now_ms):
                raise
        return secret, record

    def raw_key(self, key_hash: str, *, consistent: bool = False) -> dict[str, Any] | None:
        """A key's record as stored (its quota counters without its open leases: `admission.balances`
        adds them)."""
        return self._get(key_pk(key_hash), "KEY", consistent=consistent)

    def key_hash_for_id(self, key_id: str) -> str:
        pointer = self._get(f"KEYID#{key_id}", "KEYID")
        if pointer is None:
            raise KeyNotFound(key_id)
        return pointer["key_hash"]

    def raw_keys(self, user_id: int, *, include_deleted: bool = False) -> list[dict[str, Any]]:
        """A user's keys as stored, oldest first; with `include_deleted`, the deleted ones' remains
        too (id and name)."""
        found = self._query_all({
            "TableName": self.table, "IndexName": "gsi1", "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": to_values({":p": f"{user_pk(user_id)}#KEYS"})})
        return [key for key in found if include_deleted or key.get("status") != "deleted"]

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
        expression, names, values = assignments(changes)
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

    def delete_key(self, key_id: str) -> None:
        """Deletes a key for good: its record shrinks to what its past needs (id, user, name, the
        status `deleted`, so it is refused as deleted and its log entries keep its name), and its
        id pointer goes, so no command finds it again. Its ledger entries stay."""
        key_hash = self.key_hash_for_id(key_id)
        record = self.raw_key(key_hash, consistent=True) or {}
        kept = ("key_id", "user_id", "name", "created_at", "gsi1pk", "gsi1sk")
        remains: dict[str, Any] = {name: record[name] for name in kept if name in record}
        transact(self._db, [
            {"Put": {"TableName": self.table, "Item": to_item(
                {**remains, "pk": key_pk(key_hash), "sk": "KEY", "key_id": key_id, "status": "deleted",
                 "deleted_at": int(time.time())}),
                "ConditionExpression": "attribute_exists(pk)"}},
            {"Delete": {"TableName": self.table, "Key": to_item({"pk": f"KEYID#{key_id}", "sk": "KEYID"})}},
        ])
