"""The small vocabulary the rules are written in: a field's rule is a function of its value that
returns what is wrong with it (None: nothing)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Rule = Callable[[Any], str | None]
UNKNOWN, MISSING = "is not a field of this request", "is required"


@dataclass(frozen=True)
class Words:
    """How one upstream words a refusal: of a field it does not know, a missing one, a bad value.
    Each template may use {name} (the field's path), {short} (its last part), {at} (" at '<parent>'"
    for a nested field) and {what} (what is wrong with the value)."""

    unknown: str
    missing: str
    invalid: str

    def say(self, wrong: tuple[str, str] | None) -> tuple[str, str] | None:
        """(message, param) of the refusal of `first_wrong`'s answer, or None."""
        if wrong is None:
            return None
        name, what = wrong
        parent, _, short = name.rpartition(".")
        template = self.unknown if what == UNKNOWN else self.missing if what == MISSING else self.invalid
        return template.format(name=name, short=short, at=f" at '{parent}'" if parent else "", what=what), name


def anything(value: Any) -> str | None:
    return None


def number(low: float | None = None, high: float | None = None) -> Rule:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "must be a number"
        if low is not None and value < low:
            return f"must be at least {low}"
        if high is not None and value > high:
            return f"must be at most {high}"
        return None
    return check


def integer(low: int | None = None, high: int | None = None) -> Rule:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        return number(low, high)(value)
    return check


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be a boolean"


def string(value: Any) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def one_of(*words: str) -> Rule:
    def check(value: Any) -> str | None:
        return None if value in words else f"must be one of {', '.join(words)}"
    return check


def obj(value: Any) -> str | None:
    return None if isinstance(value, dict) else "must be an object"


def array(most: int | None = None, least: int = 0, each: Rule = anything) -> Rule:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return "must be an array"
        if len(value) < least:
            return f"must hold at least {least} item{'s' if least > 1 else ''}"
        if most is not None and len(value) > most:
            return f"must hold at most {most} items"
        return next((f"[{i}] {wrong}" for i, item in enumerate(value) if (wrong := each(item))), None)
    return check


def either(*rules: Rule) -> Rule:
    def check(value: Any) -> str | None:
        wrongs = [rule(value) for rule in rules]
        return None if any(w is None for w in wrongs) else " or ".join(w for w in wrongs if w)
    return check


def first_wrong(body: Any, fields: Mapping[str, Rule], required: tuple[str, ...] = (), *,
                closed: bool = True) -> tuple[str, str] | None:
    """(field, what is wrong) for the first field of `body` that breaks its rule, a missing
    required field, or (when `closed`) a field the upstream does not know; None if all is well."""
    if not isinstance(body, dict):
        return "", "the body must be a JSON object"
    for name in required:
        if name not in body:
            return name, MISSING
    for name, value in body.items():
        rule = fields.get(name)
        if rule is None:
            if closed:
                return name, UNKNOWN
            continue
        if value is None:
            continue  # null reads as unset in each of these APIs
        wrong = rule(value)
        if wrong:
            return name, wrong
    return None
