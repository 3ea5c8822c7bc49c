"""The pricing page's data (`GET /api/pricing`): every model the caller may use, with its prices
after the caller's group ratio.

The caller is a signed-in user (access token or session, `api.session.caller`), priced and routed
by its group; without credentials, anyone when the operator's option `PricingAnonymous` allows
(the default group's view), else a 401. A model is listed as the model list lists it
(`api.models.describe`: priced, and served by a channel of the caller's group). Its prices are
those `prices.py` charges by, in USD, times the group's ratio (`gateway.groups`): per million
tokens (input, output, and for text models the cache read and the 5-minute and 1-hour cache
write, each at the rate `prices.token_cost` falls back to when the table leaves it unset; the
batch ratio and a batch line's input and output rates), per
image (each megapixel past the first where priced so, and per million input-image tokens of an
edit), per second of video, per call. A task
family's own multipliers (a resolution, a mode, a clip's seconds) apply on top (docs/prices.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gateway import groups
from gateway.api.models import describe, kind_of
from gateway.errors import AuthenticationFailed, PermissionDenied
from gateway.prices import DEFAULT_BATCH_RATIO, OPTION_FIELDS, UNITS_PER_USD, Price
from gateway.routing.catalog import Catalog
from gateway.routing.channel import ANY_MODEL
from gateway.routing.channels import get_catalog

# A price field and whether it is a text model's rate that falls back to another.
_UNIT_FIELDS = ("per_image", "per_extra_megapixel", "image_input_per_million", "per_second", "per_call",
                "per_search_unit", "rerank_per_million", "per_moderation", "per_million_characters",
                "audio_output_per_million", "per_audio_second", "audio_input_per_million")


def _usd(amount: Decimal, ratio: Decimal) -> float:
    return float((amount * ratio).normalize())


def price_row(model: str, kind: str, family: str, price: Price, ratio: Decimal) -> dict[str, Any]:
    """One model's prices after `ratio`, the fields that apply to it only."""
    row: dict[str, Any] = {"model_name": model, "kind": kind, "family": family}
    if kind in ("text", "embedding"):
        # The rates `prices.token_cost` charges by, an unset one at the rate it falls back to.
        input_rate = price.input_per_million or Decimal(0)
        row["input_per_million"] = _usd(input_rate, ratio)
        if kind == "text":
            write = input_rate if price.cache_write_per_million is None else price.cache_write_per_million
            write_1h = write if price.cache_write_1h_per_million is None else price.cache_write_1h_per_million
            cached = input_rate if price.cached_input_per_million is None else price.cached_input_per_million
            row.update(output_per_million=_usd(price.output_per_million or Decimal(0), ratio),
                       cached_input_per_million=_usd(cached, ratio), cache_write_per_million=_usd(write, ratio),
                       cache_write_1h_per_million=_usd(write_1h, ratio))
        # What a line of a batch (`/v1/batches`) pays: every rate above times the batch ratio.
        batch = DEFAULT_BATCH_RATIO if price.batch_ratio is None else price.batch_ratio
        row.update(batch_ratio=float(batch), batch_input_per_million=_usd(input_rate * batch, ratio))
        if kind == "text":
            row["batch_output_per_million"] = _usd((price.output_per_million or Decimal(0)) * batch, ratio)
    else:  # a media model priced by tokens too (an upstream's video tokens): its token rates as set
        for name in ("input_per_million", "output_per_million"):
            if getattr(price, name) is not None:
                row[name] = _usd(getattr(price, name), ratio)
    for name in _UNIT_FIELDS:
        amount = getattr(price, name)
        if amount is not None:
            row[name] = _usd(amount, ratio)
    return row


def rows_for(group: str, ratio: Decimal, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    catalog = catalog or get_catalog()
    found = []
    for name in catalog.models(group=group):
        info = describe(name, catalog, group)
        if info is not None:
            found.append(price_row(name, info.kind, info.family, catalog.prices.get(name), ratio))
    return found


def answer(headers: Mapping[str, str]) -> dict[str, Any]:
    """GET /api/pricing: a caller with credentials is identified (bad ones are a 401, never an
    anonymous answer); one without sees the default group's prices if the operator allows."""
    from gateway import options
    from gateway.api.session import SESSION_COOKIE, caller

    signed_in = (headers.get("authorization") or "").strip() or f"{SESSION_COOKIE}=" in (headers.get("cookie") or "")
    if signed_in:
        return pricing(caller(headers)[1])
    if not options.current("PricingAnonymous"):
        raise AuthenticationFailed("sign in to see prices (the operator keeps them for users)", code="sign_in_required")
    return pricing(None)


def pricing(profile: dict[str, Any] | None) -> dict[str, Any]:
    """GET /api/pricing for a signed-in user's `profile`, or None for an anonymous caller."""
    group = str((profile or {}).get("group") or groups.DEFAULT_GROUP)
    ratio = groups.ratio_of(group)
    if ratio is None:
        raise PermissionDenied(f"group '{group}' has no price ratio (GroupRatio); ask the operator",
                               code="group_not_priced")
    return {"success": True, "message": "", "data": rows_for(group, ratio), "group": group,
            "group_ratio": float(ratio), "currency": "USD", "quota_per_unit": UNITS_PER_USD}


def operator_view(catalog: Catalog | None = None) -> dict[str, Any]:
    """GET /api/admin/prices (operators): every model priced anywhere or named by a channel, with
    the price in force and where it comes from (`option`: the operator's `ModelPrice`, over the
    `channels document`'s, over the `shipped` table), its default (the price without the option,
    what "Reset to default" returns to) and whether a channel serves it. Before any group ratio,
    as the option takes them: decimal text in USD."""
    catalog = catalog or get_catalog()
    table = catalog.prices
    named = {m for c in catalog.channels for m in c.models if m != ANY_MODEL}
    rows = []
    for name in sorted(set(table.models()) | named):
        price = table.get(name) if name in table else None
        default = table.default(name)
        info = describe(name, catalog) if price is not None else None
        rows.append({"model_name": name, "kind": kind_of(price) if price is not None else None,
                     "source": table.source(name), "price": price.fields() if price is not None else None,
                     "default": default.fields() if default is not None else None,
                     "served": info is not None or (price is None and name in named)})
    return {"success": True, "message": "", "data": rows, "currency": "USD", "fields": list(OPTION_FIELDS)}
