"""The group ratio's arithmetic and its option's rule (`gateway.groups`, `prices.with_ratio`)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.groups import usable
from gateway.options import parse_ratios
from gateway.prices import with_ratio


def test_a_ratio_of_one_changes_nothing_and_half_of_an_even_price_is_exact():
    assert [with_ratio(units, 1) for units in (0, 1, 7, 10**12)] == [0, 1, 7, 10**12]
    assert with_ratio(11_000, "0.5") == 5_500 and with_ratio(11_000, Decimal("0.8")) == 8_800


def test_a_fraction_of_a_unit_is_a_unit_and_a_price_within_its_hold_stays_within_it():
    assert with_ratio(3, "0.5") == 2 and with_ratio(1, "0.001") == 1 and with_ratio(3, "1.5") == 5
    for ratio in ("0.3", "0.5", "0.8", "1.25", "3"):
        held = with_ratio(1_001, ratio)
        assert all(with_ratio(price, ratio) <= held for price in range(0, 1_002, 7))


def test_the_option_takes_an_object_of_names_to_positive_numbers():
    assert parse_ratios('{"default": 1, "vip": 0.8}') == {"default": Decimal(1), "vip": Decimal("0.8")}
    for bad in ('{"default": 0}', '{"x": NaN}', '{"x": Infinity}', '{"": 1}', '{"a": 1001}', "[]", '{"a": null}',
                "{" + ",".join(f'"g{n}": 1' for n in range(101)) + "}"):
        with pytest.raises(ValueError):
            parse_ratios(bad)


def test_a_user_uses_its_own_group_and_every_priced_one_only_when_allowed(monkeypatch):
    monkeypatch.setattr("gateway.groups.ratios", lambda: {"default": Decimal(1), "vip": Decimal("0.8")})
    assert usable({"group": "vip"}) == ["vip"]
    assert usable({"group": "gold", "can_use_self_group": True}) == ["default", "gold", "vip"]
    assert usable(None) == ["default"]
