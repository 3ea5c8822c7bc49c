"""Users in the accounts table: the profile (`USER#<id>` / `PROFILE`), the user id counter, the
invitation code pointers (`AFF#<code>`), the system access token (`ACCESS#<sha256 of token>`; a
replaced one keeps a record with `replaced_at`, so it is refused as replaced), and the operator's
actions on users (limits, fields, enabling, a page of users by id). Quota movements of billed
requests are `admission`'s; the profile as its user sees it (its open leases added) is
`admission.balances.get_user`.
"""

from __future__ import annotations

import time
from typing import Any

from gateway import keys
from gateway.aws_failures import cancellation_reasons
from gateway.store.aws import from_item, is_condition_failure, to_item, to_values, transact
from gateway.store.keys import KeysRepository
from gateway.store.signin import username_pk
from gateway.store.table import PROFILE, AccountsTable, KeyNotFound, UserNotFound, assignments, key_pk, user_pk


class NameTaken(ValueError):
    """Another user has this username (in any case): nothing was written."""


class EmailTaken(ValueError):
    """Another user claimed this verified address: nothing was written."""


def email_key(email: str) -> dict[str, str]:
    """The pointer of a verified address to its one account (sign-up with verification, reset)."""
    return {"pk": f"EMAIL#{email}", "sk": "EMAIL"}


class UsersRepository(AccountsTable):
    """Users' profiles, access tokens and invitation codes."""

    def create_user(self, *, username: str, display_name: str = "", email: str = "", role: int = 1,
                    group: str = "default", quota: int = 0, user_id: int | None = None,
                    access_token: str | None = None, inviter_id: int = 0, password_hash: str = "",
                    claim_email: bool = False) -> dict[str, Any]:
        """A new user; `user_id` None takes the next free id. Fails if the id is taken. Its
        invitation code finds it (`user_id_for_aff_code`).

        The profile, its username's claim (`USERNAME#<name, lower case>`: a name is taken once,
        with or without a password, whatever its casing), its password hash when given and, with
        `claim_email`, its verified address's claim are one transaction: no crash between them
        leaves a profile whose name is not its own, or a name no one can sign in with
        (`NameTaken`, `EmailTaken`: nothing written)."""
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
            if password_hash:
                profile["password_hash"] = password_hash
            writes: list[dict[str, Any]] = [
                {"Put": {"TableName": self.table, "Item": to_item(profile),
                         "ConditionExpression": "attribute_not_exists(pk)"}},
                {"Put": {"TableName": self.table, "Item": to_item(
                    {"pk": username_pk(username), "sk": "USERNAME", "user_id": uid}),
                    "ConditionExpression": "attribute_not_exists(pk)"}}]
            if claim_email:
                writes.append({"Put": {"TableName": self.table, "Item": to_item({**email_key(email), "user_id": uid}),
                                       "ConditionExpression": "attribute_not_exists(pk)"}})
            try:
                transact(self._db, writes)
                break
            except Exception as exc:
                reasons = cancellation_reasons(exc)
                if "ConditionalCheckFailed" not in reasons:
                    raise
                if reasons[1:2] == ["ConditionalCheckFailed"]:
                    raise NameTaken(f"username '{username}' is taken") from None
                if reasons[2:3] == ["ConditionalCheckFailed"]:
                    raise EmailTaken("an account uses this address already") from None
                if user_id is not None:
                    raise ValueError(f"user {user_id} already exists") from None
        if user_id is not None:
            self.raise_user_counter(user_id)
        profile["aff_code"] = self.claim_aff_code(uid, str(profile["aff_code"]))
        if access_token:
            self.set_access_token(uid, access_token)
        return profile

    def claim_username(self, user_id: int, username: str) -> bool:
        """Makes an existing user's name its own (a profile made before names were claimed with
        it); False when another user holds the name."""
        try:
            self._db.put_item(TableName=self.table, Item=to_item({"pk": username_pk(username), "sk": "USERNAME",
                                                                   "user_id": user_id}),
                              ConditionExpression="attribute_not_exists(pk) OR user_id = :u",
                              ExpressionAttributeValues=to_values({":u": user_id}))
            return True
        except Exception as exc:
            if not is_condition_failure(exc):
                raise
            return False

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

    def raw_user(self, user_id: int, consistent: bool = False) -> dict[str, Any] | None:
        """The profile item as stored (its quota without its open leases: `admission.balances.get_user`
        adds them)."""
        return self._get(user_pk(user_id), PROFILE, consistent)

    def add_quota(self, user_id: int, units: int) -> None:
        """Adds `units` on top of the remaining quota (a changed quota accumulates; the quota as its
        user sees it after: `admission.balances.add_user_quota`).

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

    def set_limits(self, *, limits: dict[str, Any], user_id: int | None = None, key_id: str | None = None) -> None:
        """Sets a user's or a key's limit attributes (a None value clears one)."""
        if user_id is not None:
            pk, sk = user_pk(user_id), PROFILE
        else:
            pk, sk = key_pk(KeysRepository(self._table).key_hash_for_id(str(key_id))), "KEY"
        expression, names, values = assignments(limits)
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
        expression, names, values = assignments(changes)
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

    def user_ids(self) -> list[int]:
        """Every user's id, in no order (a Scan: an operator's occasional question, not a request path)."""
        params: dict[str, Any] = {"TableName": self.table, "FilterExpression": "sk = :profile",
                                  "ExpressionAttributeValues": to_values({":profile": PROFILE})}
        ids: list[int] = []
        while True:
            answer = self._db.scan(**params)
            ids.extend(int(from_item(item)["id"]) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                break
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return ids

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
        for record in KeysRepository(self._table).raw_keys(user_id):
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
