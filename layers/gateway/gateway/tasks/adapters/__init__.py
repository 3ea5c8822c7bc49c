"""Async-task upstream adapters, one module per wire protocol, all of the shape in `base`.

Adding a provider is adding its module and one line here.
"""

from gateway.tasks.adapters.base import (GENERIC_TASK_STATUS, TERMINAL, UNIFIED, InlineResult, TaskAdapter,
                                         TaskSnapshot, UpstreamRejected, poll, submit)
from gateway.tasks.adapters.delta import DeltaAdapter
from gateway.tasks.adapters.epsilon import EpsilonAdapter
from gateway.tasks.adapters.zeta import ZetaAdapter

ADAPTERS: dict[str, TaskAdapter] = {
    "delta": DeltaAdapter(),
    "epsilon": EpsilonAdapter(),
    "zeta": ZetaAdapter(),
}

__all__ = ["ADAPTERS", "GENERIC_TASK_STATUS", "TERMINAL", "UNIFIED", "InlineResult", "TaskAdapter", "TaskSnapshot",
           "UpstreamRejected", "poll", "submit"]
