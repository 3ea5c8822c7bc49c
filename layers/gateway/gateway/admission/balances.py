"""The account as its user sees it: what the store keeps (a profile, a key, the day totals) with
what the user's open quota leases hold and have counted, read as of one moment (`with_open_leases`:
the leases, the item, the leases again, repeated while a lease was granted or folded in between).
Every reader of balances calls here: the account and console routes, the operator's, the admin
command line. The store's raw reads (`UsersRepository.raw_user`, `KeysRepository.raw_key`) are the
item alone (auth, the limits).

`quota` counts a lease's unspent units as the account's (a request's hold in flight is no longer
subtracted from it: holds live in the serving instance's memory); `used_quota`, `request_count` and
usage include every closed request the moment its close is written, before its answer ends.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from gateway.store.holds import day_counters_of, open_leases
from gateway.store.keys import KeysRepository
from gateway.store.usage import UsageRepository, UsageTotal, days_pk
from gateway.store.users import UsersRepository


def with_open_leases(user_id: int, read: Any, attempts: int = 5) -> tuple[Any, list[dict[str, Any]]]:
    """`read()` (the profile, a key, day totals) and the user's open leases as of one moment: the
    leases are read before and after, and again while a lease was granted or folded in between
    (a fold moves a lease's units into the profile in one transaction)."""
    before = open_leases(user_id)
    result = read()
    for _ in range(attempts):
        after = open_leases(user_id)
        if {lease["lease_id"] for lease in after} == {lease["lease_id"] for lease in before}:
            return result, after
        before, result = after, read()
    return result, before


def account_view(profile: dict[str, Any], leases: list[dict[str, Any]]) -> dict[str, Any]:
    """The profile as users see it: the units on open leases are still the account's (`quota`)
    until spent, and what they spent is used (`used_quota`, `request_count`)."""
    spent = sum(int(lease["spent"]) for lease in leases)
    unspent = sum(int(lease["granted"]) - int(lease["spent"]) for lease in leases)
    return {**profile, "quota": int(profile.get("quota", 0)) + unspent,
            "used_quota": int(profile.get("used_quota", 0)) + spent,
            "request_count": int(profile.get("request_count", 0)) + sum(int(lease["requests"]) for lease in leases)}


def key_view(key: dict[str, Any], leases: list[dict[str, Any]]) -> dict[str, Any]:
    """A key as users see it, its open leases included (as `account_view`)."""
    mine = [lease for lease in leases if lease.get("key_hash") == key.get("pk", "").removeprefix("KEY#")
            or lease.get("key_id") == key.get("key_id")]
    spent = sum(int(lease["spent"]) for lease in mine)
    view = {**key, "used_quota": int(key.get("used_quota", 0)) + spent}
    if not key.get("unlimited"):
        # Only a lease granted from the key's own quota gives its unspent units back to it: a key
        # limited after its lease opened (an edit) holds nothing in that lease.
        view["remain_quota"] = int(key.get("remain_quota", 0)) + sum(
            int(lease["granted"]) - int(lease["spent"]) for lease in mine if lease.get("limited_key", True))
    return view


def open_day_counters(leases: list[dict[str, Any]]) -> dict[date, dict[str, int]]:
    """The open leases' day counters, added up per day."""
    days: dict[date, dict[str, int]] = {}
    for lease in leases:
        for day, counters in day_counters_of(lease).items():
            into = days.setdefault(day, {})
            for name, value in counters.items():
                into[name] = into.get(name, 0) + value
    return days


def get_user(user_id: int) -> dict[str, Any] | None:
    """The profile as its user sees it: the units on the account's open quota leases included."""
    profile, leases = with_open_leases(user_id, lambda: UsersRepository().raw_user(user_id, consistent=True))
    return account_view(profile, leases) if profile is not None else None


def list_users() -> list[dict[str, Any]]:
    """Every user profile as its user sees it (as `get_user`), by id (a Scan: an operator's
    occasional question, not a request path)."""
    users = (get_user(user_id) for user_id in sorted(UsersRepository().user_ids()))
    return [user for user in users if user is not None]


def users_page(size: int, after: int | None) -> tuple[list[dict[str, Any]], int | None]:
    """A page of users by id (`UsersRepository.users_page`), each as its user sees it (as `get_user`):
    the operator's list shows the balance and use the user's own dashboard shows."""
    page, last = UsersRepository().users_page(size, after)
    views = (get_user(int(user["id"])) for user in page)
    return [view for view in views if view is not None], last


def add_user_quota(user_id: int, units: int) -> int:
    """Adds `units` on top of the user's remaining quota (`UsersRepository.add_quota`: exactly once);
    returns the quota as its user sees it after, its open leases included."""
    UsersRepository().add_quota(user_id, units)
    return int((get_user(user_id) or {}).get("quota", 0))


def get_key(key_hash: str) -> dict[str, Any] | None:
    """A key as its user sees it: its quota counters with its open leases included, read consistently."""
    keys = KeysRepository()
    key = keys.raw_key(key_hash, consistent=True)
    if key is None:
        return None
    key, leases = with_open_leases(int(key["user_id"]), lambda: keys.raw_key(key_hash, consistent=True))
    return key_view(key, leases) if key is not None else None


def list_keys(user_id: int, *, include_deleted: bool = False) -> list[dict[str, Any]]:
    """A user's keys, oldest first, their quota counters as its user sees them (open leases
    included); with `include_deleted`, the deleted ones' remains too (id and name)."""
    found, leases = with_open_leases(user_id, lambda: KeysRepository().raw_keys(user_id, include_deleted=True))
    return [key_view(key, leases) for key in found if include_deleted or key.get("status") != "deleted"]


def day_totals(user_id: int, first: date, last: date) -> list[dict[str, Any]]:
    """A user's day items from `first` to `last` (inclusive): `units`, `requests` and the
    per-key and per-model counters (`model:<name>:units`, ...), with what the user's open
    quota leases have counted for those days and not yet folded into them."""
    stored, leases = with_open_leases(user_id, lambda: UsageRepository().day_items(user_id, first, last))
    days = {str(item["sk"]): dict(item) for item in stored}
    for day, counted in open_day_counters(leases).items():
        if first <= day <= last:
            into = days.setdefault(day.isoformat(), {"pk": days_pk(user_id), "sk": day.isoformat()})
            for name, value in counted.items():
                into[name] = int(into.get(name, 0)) + value
    return [days[day] for day in sorted(days)]


def usage(user_id: int, *, start: datetime | None = None, end: datetime | None = None,
          key_id: str | None = None, model: str | None = None) -> UsageTotal:
    """What the user's ledger adds up to between `start` and `end` (units, entries), for the user,
    one key or one model (`UsageRepository.usage`), the whole days' totals with what the user's open
    quota leases have counted for them."""
    return UsageRepository().usage(user_id, _whole_days, start=start, end=end, key_id=key_id, model=model)


def _whole_days(user_id: int, counters: tuple[str, str], first: date | None, last: date | None) -> UsageTotal:
    """The day items' totals of the days in [first, last], plus what the user's open quota
    leases have counted for those days and not yet folded into them."""
    total, leases = with_open_leases(user_id, lambda: UsageRepository().day_sums(user_id, counters, first, last))
    for day, counted in open_day_counters(leases).items():
        if (first is None or day >= first) and (last is None or day <= last):
            total += UsageTotal(counted.get(counters[0], 0), counted.get(counters[1], 0))
    return total
