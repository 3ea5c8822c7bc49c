"""A principal's limits: requests and tokens per minute, concurrent requests, and a budget that
resets each UTC day, week or month. A user has one set, each of its keys another; a request
must pass both.

A zero (or an absent attribute) is no limit. The limits are kept on the user's profile and on
the key's record as plain attributes (`rpm`, `tpm`, `max_parallel`, `budget_units`,
`budget_period`), in quota units for the budget (500000 per USD), so that the money stays
integral.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gateway.prices import UNITS_PER_USD

PERIODS = ("daily", "weekly", "monthly")
ATTRIBUTES = ("rpm", "tpm", "max_parallel", "budget_units", "budget_period")


@dataclass(frozen=True)
class Limits:
    rpm: int = 0
    tpm: int = 0
    max_parallel: int = 0
    budget_units: int = 0
    budget_period: str = ""

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "max_parallel", "budget_units"):
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
        return cls(rpm=int(record.get("rpm") or 0), tpm=int(record.get("tpm") or 0),
                   max_parallel=int(record.get("max_parallel") or 0),
                   budget_units=int(record.get("budget_units") or 0),
                   budget_period=str(record.get("budget_period") or ""))

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
        for name in ("rpm", "tpm", "max_parallel"):
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

    def view(self) -> dict[str, Any]:
        """The limits as the APIs and the admin command line show them (budget in USD)."""
        return {"rpm": self.rpm, "tpm": self.tpm, "max_parallel": self.max_parallel,
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
