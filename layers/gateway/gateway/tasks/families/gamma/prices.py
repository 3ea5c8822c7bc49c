"""How a gamma task is priced, and the sizes its resolutions stand for.

The model's price (gateway/prices.py) is per second at 720P; a task costs it x seconds x the
factor of its resolution. The upstream reports what it rendered in the task's `usage`
(`video_duration` or `duration`, `video_count`, and the tier as `SR` or the size as
`video_ratio`/`size`: DashScope's Wan reference; new-api's relay/channel/task/ali `AliUsage`):
the settlement prices that, never above the hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

#: Text-to-video sizes (`W*H`) per resolution tier, the first of each the 16:9 landscape one that
#: a tier word is relayed as (DashScope's Wan text-to-video reference, the `size` table).
T2V_SIZES: dict[str, tuple[str, ...]] = {
    "480P": ("832*480", "480*832", "624*624"),
    "720P": ("1280*720", "720*1280", "960*960", "1088*832", "832*1088"),
    "1080P": ("1920*1080", "1080*1920", "1440*1440", "1632*1248", "1248*1632"),
}


def tier_of_size(size: str) -> str | None:
    return next((tier for tier, sizes in T2V_SIZES.items() if size in sizes), None)


#: Resolution -> factor of the per-second price (the table's price is the 720P one).
RESOLUTION_FACTORS: dict[str, Decimal] = {"480P": Decimal("0.5"), "720P": Decimal("1"), "1080P": Decimal("1.5")}


def reported_tier(usage: Mapping[str, Any]) -> str | None:
    """The resolution tier the upstream says it rendered, from `SR` (480, 720, 1080) or a size."""
    sr = usage.get("SR")
    if isinstance(sr, (int, str)) and not isinstance(sr, bool) and f"{sr}P".upper() in RESOLUTION_FACTORS:
        return f"{sr}P".upper()
    for key in ("video_ratio", "size"):
        if isinstance(usage.get(key), str) and (tier := tier_of_size(usage[key])) is not None:
            return tier
    return None
