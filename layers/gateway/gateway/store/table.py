"""The accounts table (single-table design): its items, and what every room of it shares (`AccountsTable`:
the table, the client, a read of one item).

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

One room per concept, each a repository over this table: `users` (profiles, access tokens,
invitation codes, the operator's user actions), `keys` (API keys), `signin` (sign-in names,
passwords, console sessions, sign-in counters), `usage` (the ledger, the day totals and their
reads), `holds` (the items that hold units: reservations, quota leases, the hold index). The store
reads and writes items as they are; the account as its user sees it, its open leases added, is
`admission.balances`.
"""

from __future__ import annotations

from typing import Any

from gateway.settings import get_settings
from gateway.store.aws import client, from_item, query_all, to_item

PROFILE = "PROFILE"


def user_pk(user_id: int) -> str:
    return f"USER#{user_id}"


def key_pk(key_hash: str) -> str:
    return f"KEY#{key_hash}"


def assignments(changes: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
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


class AccountsTable:
    """What every repository of the accounts table shares: the table, the client, one item read."""

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
