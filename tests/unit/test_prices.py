import json
from decimal import Decimal

import pytest

from gateway.errors import InvalidRequest
from gateway.prices import (
    MAX_MODEL_NAME,
    MAX_OPTION_CHARS,
    MAX_OPTION_MODELS,
    SHIPPED,
    Price,
    PriceTable,
    parse_option,
    token_cost,
    unit_cost,
    units_to_whole_usd,
    usd_text,
    usd_to_units,
)


def test_usd_converts_to_units_rounding_up_a_fraction():
    assert usd_to_units(Decimal(1)) == 500_000
    assert usd_to_units(Decimal("0.0000001")) == 1
    assert units_to_whole_usd(1_499_999) == 2


def test_token_cost_prices_cached_input_at_its_own_rate():
    price = PriceTable().get("m-small")  # 0.50 in, 1.50 out, 0.05 cached, per million
    # 1000 fresh in = 0.0005, 1000 cached = 0.00005, 2000 out = 0.003 -> 0.00355 USD = 1775 units
    assert token_cost(price, input_tokens=2000, cached_input_tokens=1000, output_tokens=2000) == 1775


def test_token_cost_prices_cache_writes_at_the_5_minute_and_1_hour_write_rates():
    price = PriceTable().get("m-small")  # 0.50 in; writes 0.625 (1.25x) for 5 minutes, 1.00 (2x) for an hour
    # 1000 fresh = 0.0005, 1000 cached = 0.00005, 2000 written of which 1000 for an hour = 0.000625 + 0.001
    assert token_cost(price, input_tokens=4000, cached_input_tokens=1000, cache_write_tokens=2000,
                      cache_write_1h_tokens=1000, output_tokens=0) == usd_to_units(Decimal("0.002175"))
    # Writes only for 5 minutes: 1.25x the input rate
    assert token_cost(price, input_tokens=1_000_000, cache_write_tokens=1_000_000, output_tokens=0) == 312_500
    # All for an hour: 2x
    assert token_cost(price, input_tokens=1_000_000, cache_write_tokens=1_000_000, cache_write_1h_tokens=1_000_000,
                      output_tokens=0) == 500_000
    # A 1-hour count above the writes counts as writes, never as more tokens than were written
    assert token_cost(price, input_tokens=10, cache_write_tokens=10, cache_write_1h_tokens=99,
                      output_tokens=0) == usd_to_units(Decimal(10) / 1_000_000)


def test_a_prompt_without_cache_counts_is_priced_at_the_input_rate_alone():
    price = PriceTable({"p": {"input_per_million": 1_000_000, "output_per_million": 0, "cache_write_per_million":
                              2_000_000, "cache_write_1h_per_million": 4_000_000}}).get("p")
    assert token_cost(price, input_tokens=1, output_tokens=0) == usd_to_units(Decimal(1))


def test_a_price_without_an_output_rate_charges_nothing_for_output():
    price = PriceTable({"p": {"input_per_million": 2}}).get("p")
    assert token_cost(price, input_tokens=1_000_000, output_tokens=1_000_000) == usd_to_units(Decimal(2))


def test_the_shipped_text_prices_carry_the_upstreams_cache_ratios():
    for model in ("m-small", "m-large"):
        price = PriceTable().get(model)
        assert price.cached_input_per_million == price.input_per_million * Decimal("0.1")
        assert price.cache_write_per_million == price.input_per_million * Decimal("1.25")
        assert price.cache_write_1h_per_million == price.input_per_million * 2


def test_unset_cache_write_rates_fall_back_to_the_input_rate_then_the_5_minute_rate():
    plain = PriceTable({"p": {"input_per_million": 2, "output_per_million": 0}}).get("p")
    assert token_cost(plain, input_tokens=1_000_000, cache_write_tokens=1_000_000, cache_write_1h_tokens=500_000,
                      output_tokens=0) == usd_to_units(Decimal(2))
    five = PriceTable({"p": {"input_per_million": 2, "output_per_million": 0,
                             "cache_write_per_million": 3}}).get("p")
    assert token_cost(five, input_tokens=1_000_000, cache_write_tokens=1_000_000, cache_write_1h_tokens=500_000,
                      output_tokens=0) == usd_to_units(Decimal(3))


def test_the_channels_document_prices_cache_writes_too():
    table = PriceTable({"m-x": {"input_per_million": 1, "output_per_million": 2, "cache_write_per_million": "1.25",
                                "cache_write_1h_per_million": 2}})
    assert (table.get("m-x").cache_write_per_million, table.get("m-x").cache_write_1h_per_million) == \
        (Decimal("1.25"), Decimal(2))
    with pytest.raises(ValueError, match="prices.m-y: cache_write_per_million must not be negative"):
        PriceTable({"m-y": {"input_per_million": 1, "cache_write_per_million": -1}})


def test_unit_cost_multiplies_each_count_and_adds_an_edits_input_image_tokens():
    price = PriceTable({"p": {"per_call": "0.2", "per_image": "0.04", "image_input_per_million": 10,
                              "per_second": "0.1"}}).get("p")
    assert unit_cost(price, calls=3) == usd_to_units(Decimal("0.6"))
    assert unit_cost(price, images=2, image_input_tokens=1000) == usd_to_units(Decimal("0.08") + Decimal("0.01"))
    assert unit_cost(price, seconds=Decimal("2.5")) == usd_to_units(Decimal("0.25"))
    # input image tokens of a model that does not price them are free
    assert unit_cost(PriceTable().get("theta-3"), images=1, image_input_tokens=1000) == usd_to_units(Decimal("0.04"))


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


# --- the operator's ModelPrice option (`parse_option`, `PriceTable.with_option`) -------------------

def test_the_option_is_parsed_exactly_from_text_or_numbers():
    parsed = parse_option('{"m-small": {"input_per_million": "0.1", "output_per_million": 2.5, "per_call": 0}}')
    assert parsed == {"m-small": Price(input_per_million=Decimal("0.1"), output_per_million=Decimal("2.5"),
                                       per_call=Decimal(0))}
    assert parse_option("{}") == {} and parse_option("{}") is parse_option("{}")  # parsed once per text
    # The bounds themselves are allowed
    edge = parse_option('{"' + "m" * MAX_MODEL_NAME + '": {"per_image": "1000000", "per_call": "0.000000000001"}}')
    assert edge["m" * MAX_MODEL_NAME] == Price(per_image=Decimal(1_000_000), per_call=Decimal("1E-12"))


@pytest.mark.parametrize(("text", "words"), [
    ("[]", "must be a JSON object of model names to prices"),
    ("not json", "must be a JSON object of model names to prices"),
    ('{"m": 1}', "m: must be an object of price fields"),
    ('{"m": {}}', "m: must set at least one price field"),
    ('{"m": {"per_cal": 1}}', "m.per_cal: is not a price field"),
    ('{"m": {"per_call": -0.01}}', "m.per_call: must be at least 0 and at most 1000000 USD"),
    ('{"m": {"per_call": "1000000.01"}}', "m.per_call: must be at least 0 and at most 1000000 USD"),
    ('{"m": {"per_call": "0.0000000000001"}}', "m.per_call: must have at most 12 decimal places"),
    ('{"m": {"per_call": "abc"}}', "m.per_call: must be a number of USD"),
    ('{"m": {"per_call": ""}}', "m.per_call: must be a number of USD"),
    ('{"m": {"per_call": "' + "1" * 41 + '"}}', "m.per_call: must be a number of USD"),
    ('{"m": {"per_call": NaN}}', "m.per_call: must be a number of USD"),
    ('{"m": {"per_call": "-Infinity"}}', "m.per_call: must be a number of USD"),
    ('{"m": {"per_call": true}}', "m.per_call: must be a number of USD"),
    ('{"m": {"per_call": [1]}}', "m.per_call: must be a number of USD"),
    ('{"": {"per_call": 1}}', "a model name has 1 to 200"),
    ('{"' + "m" * (MAX_MODEL_NAME + 1) + '": {"per_call": 1}}', "a model name has 1 to 200"),
    ('{"m ": {"per_call": 1}}', "a model name"),
    ('{"a\\u0000b": {"per_call": 1}}', "a model name"),
    ('{"*": {"per_call": 1}}', "a model name"),
])
def test_a_bad_option_names_the_model_and_the_field(text, words):
    with pytest.raises(ValueError) as refused:
        parse_option(text)
    assert words in str(refused.value)


def test_the_option_is_bounded_in_models_and_characters():
    many = {f"m{n}": {"per_call": 1} for n in range(MAX_OPTION_MODELS)}
    assert len(parse_option(json.dumps(many))) == MAX_OPTION_MODELS
    with pytest.raises(ValueError, match=f"at most {MAX_OPTION_MODELS} models"):
        parse_option(json.dumps({**many, "one-more": {"per_call": 1}}))
    with pytest.raises(ValueError, match=f"at most {MAX_OPTION_CHARS} characters"):
        parse_option('{"m": {"per_call": 1}}' + " " * MAX_OPTION_CHARS)


def test_the_option_wins_over_the_document_over_the_shipped_table_and_removing_it_falls_back():
    document = PriceTable({"m-small": {"input_per_million": 2, "output_per_million": 4},
                           "doc-only": {"per_call": "0.3"}})
    option = parse_option('{"m-small": {"per_call": "0.5"}, "m-large": {"input_per_million": "1"}, '
                          '"new-model": {"per_image": "0.02"}}')
    table = document.with_option(option)
    # The option replaces a model's whole price (no field inherited from the layer below)
    assert table.get("m-small") == Price(per_call=Decimal("0.5"))
    assert table.get("m-large") == Price(input_per_million=Decimal(1))
    assert table.get("new-model") == Price(per_image=Decimal("0.02")) and "new-model" in table
    assert "new-model" in table.models() and "new-model" not in document.models()
    assert [table.source(m) for m in ("m-small", "m-large", "new-model", "doc-only", "theta-3", "nowhere")] == \
        ["option", "option", "option", "channels document", "shipped", None]
    # The defaults are the prices without the option
    assert table.default("m-small") == Price(input_per_million=Decimal(2), output_per_million=Decimal(4))
    assert table.default("m-large") == SHIPPED["m-large"] and table.default("new-model") is None
    # The table it layers over is unchanged; an empty option is the table itself
    assert document.get("m-small").per_call is None and "new-model" not in document
    assert document.with_option({}) is document
    assert table.with_option({}).get("m-small") == document.get("m-small")  # an emptied option: the defaults
    # Layered again (the option changed): over the defaults, not over the last option
    again = table.with_option(parse_option('{"m-large": {"per_call": "9"}}'))
    assert again.get("m-small") == document.get("m-small") and again.source("m-small") == "channels document"
    assert again.get("m-large") == Price(per_call=Decimal(9))
    with pytest.raises(InvalidRequest, match="no price configured"):
        again.get("new-model")


def test_a_price_as_text_is_exact_and_reads_back():
    price = Price.of({"input_per_million": "0.50", "output_per_million": "1E+3", "per_call": 0, "per_image": "2.000"})
    assert price.fields() == {"input_per_million": "0.5", "output_per_million": "1000", "per_image": "2",
                              "per_call": "0"}
    assert Price.of(price.fields()) == price
    assert Price(per_second=Decimal("0.000000000001")).fields() == {"per_second": "0.000000000001"}
    assert Price(per_second=Decimal("10")).fields() == {"per_second": "10"}


def test_a_long_bad_model_name_is_quoted_cut_at_40_characters():
    name = "m " * 101  # a space at its end, and longer than a name may be
    with pytest.raises(ValueError) as refused:
        parse_option(json.dumps({name: {"per_call": 1}}))
    assert str(refused.value).startswith(f"model '{name[:40]}... ({len(name)} characters)': a model name has")


@pytest.mark.parametrize(("units", "said"), [
    (2_500_000, "$5.00 (2,500,000 units)"), (500_000, "$1.00 (500,000 units)"), (250, "$0.0005 (250 units)"),
    (1, "$0.000002 (1 unit)"), (5_000, "$0.01 (5,000 units)"), (-1_500_000, "-$3.00 (-1,500,000 units)"),
])
def test_quota_is_said_in_dollars_with_its_units_beside(units, said):
    assert usd_text(units) == said
