"""The one JSON rule every route parses its body with (gateway.validation.parse_json)."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidRequest
from gateway.validation import MAX_DEPTH, check_text_fields, parse_json


def refusal(body) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_json(body)
    assert caught.value.status == 400
    return caught.value


def test_a_body_nested_a_hundred_thousand_deep_is_a_400_not_a_recursion_error():
    assert "nests deeper than" in refusal("[" * 100_000 + "]" * 100_000).message


def test_nesting_is_allowed_up_to_the_limit_and_refused_one_past_it_naming_the_place():
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    error = refusal('{"a":' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}")
    assert error.message.startswith("a" + "[0]" * (MAX_DEPTH - 2)) and error.param


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_a_number_that_is_not_finite_is_refused_naming_the_field(token):
    error = refusal('{"messages":[{"temperature":' + token + '}]}')
    assert error.param == "messages[0].temperature"
    assert "finite" in error.message


@pytest.mark.parametrize("body", ['{"a":"\\ud800"}', '{"a":["x\\udfffy"]}', '{"\\ud800":1}'])
def test_a_lone_surrogate_in_a_string_or_a_key_is_refused(body):
    assert "surrogate" in refusal(body).message


def test_a_surrogate_pair_is_ordinary_text():
    assert parse_json('{"a":"\\ud83d\\ude00"}') == {"a": "\U0001F600"}


def test_bytes_must_be_utf8_and_the_message_says_so():
    assert "not UTF-8" in refusal(b'{"a":"\xff"}').message


def test_a_huge_integer_literal_is_a_400():
    assert "not valid JSON" in refusal('{"a":' + "9" * 5000 + "}").message


def test_form_fields_follow_the_same_text_rule():
    check_text_fields({"prompt": "a fern \U0001F600"})
    with pytest.raises(InvalidRequest):
        check_text_fields({"prompt": "\ud800"})
