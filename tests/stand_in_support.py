"""Stand-ins for the project's own functions, built with `autospec`: a call the real function
would refuse (a renamed or missing parameter, a new keyword-only one) fails the test, so a
stand-in never drifts from what it stands for."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any
from unittest.mock import create_autospec


def stand_in(real: Callable[..., Any], does: Callable[[dict[str, Any]], Any]) -> Any:
    """A mock with `real`'s signature whose call runs `does` with every argument by name (the
    real function's defaults filled in)."""
    signature = inspect.signature(real)

    def run(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return does(dict(bound.arguments))

    return create_autospec(real, side_effect=run)
