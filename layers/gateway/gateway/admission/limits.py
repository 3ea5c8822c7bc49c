"""A principal's limits: requests per minute, concurrent requests, and a budget that resets each
UTC day, week or month. A user has one set, each of its keys another; a request must pass both.

A zero (or an absent attribute) is no limit. The limits are kept on the user's profile and on
the key's record as plain attributes (`rpm`, `max_parallel`, `budget_units`, `budget_period`),
in quota units for the budget (500000 per USD), so that the money stays integral. Their live
counters sit beside them on the same item (`rpm_window`/`rpm_left`, `budget_window`/
`budget_left`, `inflight`), moved by the reservation's own transaction (`Admission`) and by the
closing one (`give_back`): a limit costs the request no extra round trip.

- `rpm` counts the requests admitted in the current UTC minute (a fixed window: a client sending
  one request at a time gets exactly `rpm` a minute; across the turn of a minute up to twice
  that may pass within 60 s).
- `max_parallel` counts synchronous requests between their reservation and their settlement; a
  request whose function died is counted until the sweeper refunds its hold.
- a budget counts the holds and then the charges of the current day, ISO week or month; a price
  above its hold is charged to the quota (as far as it goes) but not beyond the budget's hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gateway.errors import InsufficientQuota, RateLimited
from gateway.prices import UNITS_PER_USD

PERIODS = ("daily", "weekly", "monthly")
ATTRIBUTES = ("rpm", "max_parallel", "budget_units", "budget_period")


@dataclass(frozen=True)
class Limits:
    rpm: int = 0
    max_parallel: int = 0
    budget_units: int = 0
    budget_period: str = ""

    def __post_init__(self) -> None:
        for name in ("rpm", "max_parallel", "budget_units"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must not be negative")
        if self.budget_units and self.budget_period not in PERIODS:
            raise ValueError(f"budget_period: must be one of {', '.join(PERIODS)} when a budget is set")
        if not self.budget_units and self.budget_period:
            object.__setattr__(self, "budget_period", "")  # a period without an amount is no budget

    @classmethod
    def of(cls, record: dict[str, Any] | None) -> Limits:
        """The limits kept on a profile or key record (absent: none)."""
        record = record or {}
        return cls(rpm=int(record.get("rpm") or 0),
                   max_parallel=int(record.get("max_parallel") or 0),
                   budget_units=int(record.get("budget_units") or 0),
                   budget_period=str(record.get("budget_period") or ""))

    @classmethod
    def defaults(cls) -> Limits:
        """What a new key gets unless it is given its own (the `GATEWAY_DEFAULT_KEY_*` settings)."""
        from gateway.prices import usd_to_units
        from gateway.settings import get_settings

        settings = get_settings()
        budget = usd_to_units(Decimal(str(settings.default_key_budget_usd)))
        return cls(rpm=settings.default_key_rpm, max_parallel=settings.default_key_max_parallel,
                   budget_units=budget, budget_period=settings.default_key_budget_period if budget else "")

    def capped(self, outer: Limits) -> Limits:
        """These limits, each no more than `outer`'s where `outer` has one."""
        def cap(mine: int, theirs: int) -> int:
            return min(mine, theirs) if mine and theirs else mine

        budget = cap(self.budget_units, outer.budget_units)
        return Limits(rpm=cap(self.rpm, outer.rpm), max_parallel=cap(self.max_parallel, outer.max_parallel),
                      budget_units=budget, budget_period=self.budget_period if budget else "")

    @property
    def any(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    @property
    def budget_usd(self) -> Decimal:
        return Decimal(self.budget_units) / UNITS_PER_USD

    def replace(self, **changes: Any) -> Limits:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update({k: v for k, v in changes.items() if v is not None})
        return Limits(**values)

    def excess_over(self, outer: Limits) -> list[tuple[str, str]]:
        """The fields where these limits would let more through than `outer` allows: (field,
        rule) pairs, empty when they stay within. A zero here under a limit there is fine (the
        outer limit still applies to every request)."""
        problems = []
        for name in ("rpm", "max_parallel"):
            mine, theirs = getattr(self, name), getattr(outer, name)
            if theirs and mine > theirs:
                problems.append((name, f"must not exceed the user's own {name} of {theirs}"))
        if outer.budget_units and self.budget_units > outer.budget_units:
            problems.append(("budget_usd", f"must not exceed the user's own budget of {outer.budget_usd} USD "
                                           f"({outer.budget_period})"))
        return problems

    def attributes(self, *, clearing: bool = False) -> dict[str, Any]:
        """The record attributes of these limits: the ones set; with `clearing`, the others as
        None too (an update removes them)."""
        values = {name: getattr(self, name) or None for name in ATTRIBUTES}
        return values if clearing else {k: v for k, v in values.items() if v is not None}

    def renewing(self, before: Limits) -> dict[str, None]:
        """The live counters a change from `before` starts afresh (removed: the next request opens
        its window with the new limit): a changed `rpm` its minute, a changed budget its period."""
        stale: dict[str, None] = {}
        if self.rpm != before.rpm:
            stale["rpm_window"] = None
        if (self.budget_units, self.budget_period) != (before.budget_units, before.budget_period):
            stale["budget_window"] = None
        return stale

    def view(self) -> dict[str, Any]:
        """The limits as the APIs and the admin command line show them (budget in USD)."""
        return {"rpm": self.rpm, "max_parallel": self.max_parallel,
                "budget_usd": float(self.budget_usd) if self.budget_units else 0,
                "budget_period": self.budget_period}


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The budget period containing `now`, calendar-aligned in UTC: [start, end). A week starts
    on Monday."""
    now = now.astimezone(UTC)
    day = datetime(now.year, now.month, now.day, tzinfo=UTC)
    if period == "daily":
        return day, day + timedelta(days=1)
    if period == "weekly":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if period == "monthly":
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return start, end
    raise ValueError(f"unknown budget period {period!r}")


def shown(record: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """A profile's or a key's limits as the account routes show them, with what is left of the
    budget in its current period and when that period ends (epoch seconds)."""
    limits = Limits.of(record)
    view = limits.view()
    if limits.budget_units:
        record = record or {}
        current = record.get("budget_window") == window_ids(now)[limits.budget_period]
        left = max(int(record.get("budget_left") or 0), 0) if current else limits.budget_units
        view["budget_left_usd"] = float(Decimal(left) / UNITS_PER_USD)
        view["budget_resets_at"] = int(period_bounds(limits.budget_period, now)[1].timestamp())
    return view


def window_ids(now: datetime) -> dict[str, str]:
    """The id of the current window of each kind: the minute of `rpm`, and each budget period's,
    prefixed by its kind so that one stored id names its own kind."""
    now = now.astimezone(UTC)
    ids = {"minute": now.strftime("m%Y%m%d%H%M")}
    for period in PERIODS:
        start, _ = period_bounds(period, now)
        ids[period] = period[0].upper() + start.strftime("%Y-%m-%d")
    return ids


@dataclass
class Admission:
    """The part of a reservation's update of one item (a user's profile or a key) that admits it
    under that item's limits: conditions and additions written into the same transaction as the
    quota, so that a limit costs no extra round trip. `renew` names the windows (`rpm`, `budget`)
    whose counters this attempt starts afresh (their stored window is over)."""

    units: int
    now: datetime
    parallel: bool
    renew: dict[str, str] = field(default_factory=dict)  # "rpm" -> "", "budget" -> its period

    def parts(self) -> tuple[list[str], list[str], list[str], dict[str, Any]]:
        """(conditions, SET clauses, ADD clauses, values), names in `limit_*`, values in `:l_*`."""
        ids = window_ids(self.now)
        conditions: list[str] = []
        sets: list[str] = []
        adds: list[str] = []
        values: dict[str, Any] = {":l_one": 1, ":l_u": self.units}
        values[":l_rw"] = ids["minute"]
        if "rpm" in self.renew:
            conditions.append("attribute_exists(rpm) AND (attribute_not_exists(rpm_window) OR rpm_window <> :l_rw)"
                              " AND rpm >= :l_one")
            sets += ["rpm_window = :l_rw", "rpm_left = rpm - :l_one"]
        else:
            conditions.append("(attribute_not_exists(rpm) OR (rpm_window = :l_rw AND rpm_left >= :l_one))")
            adds.append("rpm_left :l_negone")
            values[":l_negone"] = -1
        if "budget" in self.renew:
            values[":l_kind"], values[":l_bw"] = self.renew["budget"], ids[self.renew["budget"]]
            conditions.append("attribute_exists(budget_units) AND budget_period = :l_kind AND (attribute_not_exists("
                              "budget_window) OR budget_window <> :l_bw) AND budget_units >= :l_u")
            sets += ["budget_window = :l_bw", "budget_left = budget_units - :l_u"]
        else:
            values.update({":l_bd": ids["daily"], ":l_bwk": ids["weekly"], ":l_bm": ids["monthly"]})
            conditions.append("(attribute_not_exists(budget_units) OR (budget_window IN (:l_bd, :l_bwk, :l_bm) "
                              "AND budget_left >= :l_u))")
            adds.append("budget_left :l_negu")
            values[":l_negu"] = -self.units
        if self.parallel:
            conditions.append("(attribute_not_exists(max_parallel) OR attribute_not_exists(inflight) "
                              "OR inflight < max_parallel)")
            adds.append("inflight :l_one")
        return conditions, sets, adds, values

    def verdict(self, item: dict[str, Any], whose: str) -> bool:
        """After the item's condition failed: True when an attempt that renews a window may pass
        (`renew` updated); raises the refusal when a limit is reached; False when nothing here
        refuses it (the quota or the status did, or the item changed meanwhile)."""
        ids = window_ids(self.now)
        limits = Limits.of(item)
        if self.parallel and limits.max_parallel and int(item.get("inflight") or 0) >= limits.max_parallel:
            raise RateLimited(f"{whose} max_parallel of {limits.max_parallel} concurrent requests is reached; "
                              "retry when one of them has finished", headers={"Retry-After": "1"})
        if limits.rpm and item.get("rpm_window") != ids["minute"]:
            self.renew["rpm"] = ""
        elif limits.rpm and int(item.get("rpm_left") or 0) < 1:
            wait = 60 - self.now.astimezone(UTC).second
            raise RateLimited(f"{whose} rpm limit of {limits.rpm} requests per minute is reached; "
                              f"retry in {wait} s", headers={"Retry-After": str(wait)})
        if limits.budget_units:
            period = limits.budget_period
            if item.get("budget_window") != ids[period]:
                if limits.budget_units >= self.units:
                    self.renew["budget"] = period
                    return True
            elif int(item.get("budget_left") or 0) >= self.units:
                return "rpm" in self.renew
            _, resets = period_bounds(period, self.now)
            raise InsufficientQuota(
                f"{whose} {period} budget of {limits.budget_usd} USD is spent (this request needs up to "
                f"{Decimal(self.units) / UNITS_PER_USD} USD); it resets at {resets.strftime('%Y-%m-%dT%H:%M:%SZ')}",
                code="budget_exceeded", headers={"X-Budget-Resets-At": str(int(resets.timestamp()))})
        return "rpm" in self.renew


def give_back(item_budget_ids: list[str], back: int, parallel: bool) -> tuple[str, list[str], dict[str, Any]]:
    """The part of a closing update that returns the unused hold to the budget of the window it
    was taken from (a condition: only while that window is current) and frees the request's place
    under `max_parallel`: (condition, ADD clauses, values)."""
    adds: list[str] = []
    values: dict[str, Any] = {}
    condition = ""
    if item_budget_ids and back:
        values.update({":l_back": back, ":l_b0": item_budget_ids[0], ":l_b1": item_budget_ids[1],
                       ":l_b2": item_budget_ids[2]})
        condition = "(attribute_not_exists(budget_units) OR budget_window IN (:l_b0, :l_b1, :l_b2))"
        adds.append("budget_left :l_back")
    if parallel:
        adds.append("inflight :l_negone")
        values[":l_negone"] = -1
    return condition, adds, values
