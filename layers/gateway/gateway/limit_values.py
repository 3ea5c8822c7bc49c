"""A user's or a key's limits as a plain value (`Limits`): requests and tokens per minute, concurrent
requests, and a budget that resets each UTC day, week or month, kept on the profile or the key record
as plain attributes (`rpm`, `tpm`, `max_parallel`, `budget_units`, `budget_period`; the budget in
quota units, 500000 per USD, so that the money stays integral). A zero (or an absent attribute) is
no limit. `auth` puts a key's on its `Principal`; `admission.limits` enforces them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

from gateway.prices import UNITS_PER_USD

PERIODS = ("daily", "weekly", "monthly")
ATTRIBUTES = ("rpm", "tpm", "max_parallel", "budget_units", "budget_period")
#: A key record's mark of the limits an operator set on it (a map of their attributes): the key's
#: owner may tighten each of them, never loosen or clear one (`Limits.loosening`).
OPERATOR_LIMITS = "operator_limits"


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
        return Limits(rpm=cap(self.rpm, outer.rpm), tpm=cap(self.tpm, outer.tpm),
                      max_parallel=cap(self.max_parallel, outer.max_parallel),
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
        for name in ("rpm", "tpm", "max_parallel"):
            mine, theirs = getattr(self, name), getattr(outer, name)
            if theirs and mine > theirs:
                problems.append((name, f"must not exceed the user's own {name} of {theirs}"))
        if outer.budget_units and self.budget_units > outer.budget_units:
            problems.append(("budget_usd", f"must not exceed the user's own budget of {outer.budget_usd} USD "
                                           f"({outer.budget_period})"))
        return problems

    def loosening(self, operator: Limits) -> list[tuple[str, str]]:
        """Where these limits, asked for by a key's owner, would loosen or clear one the operator
        set (`operator`, from the key's `OPERATOR_LIMITS` mark): (field, rule) pairs, empty when
        each operator-set limit stays as tight or tighter."""
        problems = []
        for name in ("rpm", "tpm", "max_parallel"):
            mine, theirs = getattr(self, name), getattr(operator, name)
            if theirs and not 0 < mine <= theirs:
                problems.append((name, f"the operator set this key's {name} to {theirs}: it may be lowered, "
                                       "not raised or cleared"))
        # A cleared budget has no period (`__post_init__`), so the period's check refuses it too.
        if operator.budget_units and not (self.budget_units <= operator.budget_units
                                          and self.budget_period == operator.budget_period):
            problems.append(("budget_usd", f"the operator set this key's budget to {operator.budget_usd} USD "
                                           f"({operator.budget_period}): it may be lowered, not raised, cleared "
                                           "or given another period"))
        return problems

    @classmethod
    def operator_set(cls, record: dict[str, Any] | None) -> Limits:
        """The limits an operator set on a key (its `OPERATOR_LIMITS` mark; none: no limits)."""
        return cls.of((record or {}).get(OPERATOR_LIMITS))

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
