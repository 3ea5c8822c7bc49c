"""How a beta task is priced: as BFL bills FLUX.2, by the megapixels of the image.

BFL's pricing (bfl.ai/pricing; its submit answer reports the charge as `cost` in credits and the
image's `output_mp`): the first megapixel at one rate, each further megapixel at another,
megapixels rounded up. The model's `per_image` is the first megapixel, `per_extra_megapixel` each
further one (gateway/prices.py). The hold is the megapixels of the size asked (an image is
rendered at exactly that size, in multiples of 16); the settlement the megapixels BFL reports,
never above the hold.
"""

from __future__ import annotations

import math

from gateway.prices import Price, unit_cost, usd_to_units


def megapixels(width: int, height: int) -> int:
    """Whole megapixels of an image, rounded up."""
    return max(math.ceil(width * height / 1_000_000), 1)


def megapixel_cost(price: Price, count: int) -> int:
    """Units for one image of `count` megapixels; a price without a megapixel rate is per image."""
    if price.per_extra_megapixel is None:
        return unit_cost(price, images=1)
    return unit_cost(price, images=1) if count <= 1 else \
        usd_to_units((price.per_image or 0) + price.per_extra_megapixel * (count - 1))
