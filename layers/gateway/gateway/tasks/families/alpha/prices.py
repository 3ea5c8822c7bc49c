"""How an alpha task is priced: the model's price (gateway/prices.py, per second of std video or
per image) times the seconds asked for (so 10 s costs 2x 5 s) times the mode's factor."""

from __future__ import annotations

#: The upstream's own factor: pro costs 3.5x std.
MODE_FACTORS = {"std": "1", "pro": "3.5"}


def mode_factor(mode: str) -> str:
    return MODE_FACTORS[mode]
