"""The admission seam: checks a request passes before its worst case is held, and hears when it closes.

`billing.reserve_request` runs every registered step's `enter` in order before it takes the hold;
a step refuses by raising a `GatewayError` (a `RateLimited` for rpm/tpm/max_parallel, an
`InsufficientQuota` for a budget). When a later step or the hold refuses, the steps already
entered are left (`leave` with `units=None`: nothing was charged), so a refused request holds
nothing. When the request closes (settled: the units charged; refunded: 0), `billing.settle` or
`billing.refund` calls `leave` exactly once per entered step, after the ledger entry is written.

Steps see the request, never DynamoDB's transactions on the hold: a step that keeps its own
counters (per key, per instance, or in its own items) keeps them off the account's hot path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.auth import Principal


@dataclass(frozen=True)
class AdmissionRequest:
    principal: Principal
    units: int  # the worst case to be held
    model: str
    route: str
    request_id: str
    parallel: bool = True  # a synchronous request (counted under max_parallel); False for a task
    tokens: int = 0  # its worst case in tokens (prompt + every output token it may produce), for tpm
    notes: dict[str, Any] = field(default_factory=dict, compare=False)  # what steps took, for `leave`


class AdmissionStep(Protocol):
    name: str

    def enter(self, request: AdmissionRequest) -> None:
        """Admits the request or raises a `GatewayError`; it may count the request as in flight."""

    def leave(self, request: AdmissionRequest, units: int | None) -> None:
        """The request closed: `units` charged (0 for a refund), or None if it was never admitted."""


_steps: list[AdmissionStep] = []


def register(step: AdmissionStep) -> None:
    """Adds a step after those already registered (a step of the same name replaces it in place)."""
    for n, existing in enumerate(_steps):
        if existing.name == step.name:
            _steps[n] = step
            return
    _steps.append(step)


def unregister(name: str) -> None:
    _steps[:] = [step for step in _steps if step.name != name]


def steps() -> tuple[AdmissionStep, ...]:
    return tuple(_steps)


def enter(request: AdmissionRequest) -> tuple[AdmissionStep, ...]:
    """Runs every step's `enter`; on a refusal leaves those already entered and raises it."""
    entered: list[AdmissionStep] = []
    try:
        for step in steps():
            step.enter(request)
            entered.append(step)
    except BaseException:
        leave(request, tuple(entered), None)
        raise
    return tuple(entered)


def leave(request: AdmissionRequest, entered: tuple[AdmissionStep, ...], units: int | None) -> None:
    for step in reversed(entered):
        step.leave(request, units)
