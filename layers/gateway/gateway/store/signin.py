"""Signing in to the console, in the accounts table: sign-in names (`USERNAME#<name, lower case>`,
for users with a password), password hashes on the profile, console sessions (`SESSION#<sha256 of
session token>`, TTL at their expiry), the sign-in counters `api/session` raises before a password
is checked (`SIGNIN#pair:<name>/<address>`, `SIGNIN#addr:<address>`, `SIGNIN#name:<name>` /
`<window start>`, with a TTL), and the decoy item an unknown name's sign-in reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway.aws_failures import cancellation_reasons
from gateway.store.aws import is_condition_failure, to_item, to_values, transact
from gateway.store.table import PROFILE, AccountsTable, UserNotFound, user_pk

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


class SignInRepository(AccountsTable):
    """Sign-in names, passwords, console sessions and sign-in counters."""

    def set_password(self, user_id: int, password_hash: str) -> int:
        """Stores a user's password hash and makes its username a sign-in name (unique whatever
        its casing: a second user of the same name, in any case, cannot have a password). Every
        session of the user ends with it (`session_generation` moves on: a session opened under
        an earlier one is refused); answers the new generation, for the one session to keep."""
        user = self._get(user_pk(user_id), PROFILE, consistent=True)
        if user is None:
            raise UserNotFound(user_id)
        generation = int(user.get("session_generation", 0))
        try:
            transact(self._db, [
                {"Put": {"TableName": self.table, "Item": to_item(
                    {"pk": username_pk(user["username"]), "sk": "USERNAME", "user_id": user_id}),
                    "ConditionExpression": "attribute_not_exists(pk) OR user_id = :u",
                    "ExpressionAttributeValues": to_values({":u": user_id})}},
                {"Update": {"TableName": self.table, "Key": to_item({"pk": user_pk(user_id), "sk": PROFILE}),
                            "UpdateExpression": "SET password_hash = :h, session_generation = :g",
                            "ConditionExpression": "attribute_exists(pk) AND (attribute_not_exists("
                                                   "session_generation) OR session_generation = :was)",
                            "ExpressionAttributeValues": to_values({":h": password_hash, ":g": generation + 1,
                                                                    ":was": generation})}},
            ])
        except Exception as exc:
            reasons = cancellation_reasons(exc)
            if reasons[:1] == ["ConditionalCheckFailed"]:
                raise ValueError(f"username '{user['username']}' already signs in as another user") from None
            if reasons[1:2] == ["ConditionalCheckFailed"]:  # another change of this user's password meanwhile
                return self.set_password(user_id, password_hash)
            raise
        self.refresh_decoy(user_id)
        return generation + 1

    def refresh_decoy(self, user_id: int) -> None:
        """The sign-in decoy shaped like this user's profile (after a password is set)."""
        try:  # never worth failing a password change for: without it, only the two sign-in reads differ in size
            profile = self._get(user_pk(user_id), PROFILE, consistent=True)
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
        return user_id, self._get(user_pk(user_id), PROFILE, consistent=True)

    def put_session(self, token_hash: str, user_id: int, expires_at: int, generation: int = 0) -> None:
        """A session of the user's `session_generation` now (a later password change ends it)."""
        self._db.put_item(TableName=self.table, Item=to_item({
            "pk": f"SESSION#{token_hash}", "sk": "SESSION", "user_id": user_id, "created_at": int(time.time()),
            "expires_at": expires_at, "expires_ttl": expires_at, "generation": int(generation)}))

    def keep_session(self, token_hash: str, generation: int) -> None:
        """The session that changed its user's password lives on under the new generation."""
        try:
            self._db.update_item(TableName=self.table, Key=to_item({"pk": f"SESSION#{token_hash}", "sk": "SESSION"}),
                                 UpdateExpression="SET generation = :g", ConditionExpression="attribute_exists(pk)",
                                 ExpressionAttributeValues=to_values({":g": int(generation)}))
        except Exception as exc:
            if not is_condition_failure(exc):
                raise

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
