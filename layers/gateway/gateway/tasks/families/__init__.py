"""The task families: one folder each (`<name>/`: the family object, its adapter, its request
models), and one line here. A family is imported on first use, so a function loads only those
it serves."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from functools import cache

from gateway.tasks.families.base import TaskFamily

#: Every family, by the name stored on its tasks.
FAMILIES = (
    "beta",
    "alpha",
    "delta",
    "epsilon",
    "gamma",
    "zeta",
    "imgtask",
    "batch",
)


@cache
def family_of(name: str) -> TaskFamily:
    """The family of that name; KeyError for a name not in the registry."""
    if name not in FAMILIES:
        raise KeyError(f"no task family {name!r}")
    family = importlib.import_module(f"{__name__}.{name}").FAMILY
    assert family.name == name, f"the family in {name}/ calls itself {family.name!r}"
    return family


def families() -> Iterator[TaskFamily]:
    return (family_of(name) for name in FAMILIES)
