from decimal import Decimal

import pytest

from gateway.errors import InvalidRequest
from gateway.prices import PriceTable, token_cost, unit_cost, units_to_whole_usd, usd_to_units


def test_usd_converts_to_units_rounding_up_a_fraction():
    assert usd_to_units(Decimal(1)) == 500_000
    assert usd_to_units(Decimal("0.0000001")) == 1
    assert units_to_whole_usd(1_499_999) == 2


def test_token_cost_prices_cached_input_at_its_own_rate():
    price = PriceTable().get("m-small")  # 0.50 in, 1.50 out, 0.05 cached, per million
    # 1000 fresh in = 0.0005, 1000 cached = 0.00005, 2000 out = 0.003 -> 0.00355 USD = 1775 units
    assert token_cost(price, input_tokens=2000, cached_input_tokens=1000, output_tokens=2000) == 1775


def test_overrides_replace_and_extend_the_shipped_table():
    table = PriceTable({"m-small": {"input_per_million": 1, "output_per_million": 2},
                        "new-video": {"per_second": "0.2"}})
    assert table.get("m-small").input_per_million == 1
    assert unit_cost(table.get("new-video"), seconds=8) == 800_000


def test_a_model_without_a_price_is_refused():
    with pytest.raises(InvalidRequest, match="no price"):
        PriceTable().get("free-lunch")
    with pytest.raises(ValueError, match="prices.bad"):
        PriceTable({"bad": {"per_image": -1}})
