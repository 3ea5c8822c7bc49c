"""The text simulators' answer honours what the request asks: a JSON value valid against the
schema given, and a tool call only when the tool choice and the conversation's turn call for one."""

from __future__ import annotations

import json
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from gateway_local.simulators._honour import Tools, schema_value
from gateway_local.simulators._text import plan_answer


class Step(BaseModel):
    explanation: str
    output: str


class Reasoning(BaseModel):
    steps: list[Step] = Field(min_length=2)
    final_answer: str
    confidence: float = Field(ge=0.5, le=1)
    mood: Literal["calm", "busy"]
    tags: list[str] | None
    count: int = Field(gt=3, multiple_of=5)


SCHEMAS = [
    Reasoning.model_json_schema(),
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "code": {"type": "string", "minLength": 12, "maxLength": 12}},
     "required": ["when", "code"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": 7}, "minItems": 3},
    {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"a": {"const": 42}}, "required": ["a"]}]},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
               {"properties": {"b": {"enum": ["x", "y"]}}, "required": ["b"]}]},
    {"type": "object"},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_schema_value_is_valid_against_its_schema_and_the_same_every_time(schema):
    value = schema_value(schema, "the user's words")
    jsonschema.validate(value, schema)
    assert schema_value(schema, "the user's words") == value


def test_a_pydantic_model_parses_the_value_built_for_its_schema():
    parsed = Reasoning.model_validate(schema_value(Reasoning.model_json_schema(), "two plus two"))
    assert len(parsed.steps) == 2 and parsed.final_answer == "two plus two"


def test_google_upper_case_types_are_read():
    schema = {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}, "s": {"type": "STRING"}},
              "required": ["n", "s"]}
    assert schema_value(schema, "hi") == {"n": 0, "s": "hi"}


def test_a_json_plan_is_json_text_and_counts_its_tokens():
    plan = plan_answer("hello", input_tokens=3, json_schema=Reasoning.model_json_schema())
    Reasoning.model_validate_json(plan.text)
    assert plan.output_tokens == len(plan.pieces) and plan.finish == "stop"


def test_a_json_plan_cut_by_max_tokens_says_length():
    plan = plan_answer("hello", input_tokens=3, max_tokens=3, json_schema=Reasoning.model_json_schema())
    assert plan.finish == "length" and len(plan.pieces) == 3


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": False}


@pytest.mark.parametrize(("tools", "prompt", "called"), [
    (Tools({"get_weather": WEATHER}), "what is the weather?", None),  # auto: the model answers
    (Tools({"get_weather": WEATHER}), "use get_weather for Paris", "get_weather"),  # named by the user
    (Tools({"get_weather": WEATHER, "other": {}}), "look it up #tool", "get_weather"),  # the directive
    (Tools({"get_weather": WEATHER}, choice="required"), "hi", "get_weather"),
    (Tools({"get_weather": WEATHER, "other": {}}, choice="other"), "hi", "other"),
    (Tools({"get_weather": WEATHER}, choice="none"), "use get_weather #tool", None),
    (Tools({"get_weather": WEATHER}, choice="required", user_turn=False), "use get_weather #tool", None),
    (Tools({"get_weather": WEATHER}, user_turn=False), "use get_weather #tool", None),
])
def test_a_tool_is_called_only_when_asked_and_only_on_the_users_turn(tools, prompt, called):
    plan = plan_answer(prompt, input_tokens=1, tools=tools)
    assert plan.tool_name == called
    if called:
        assert plan.finish == "tool"
        jsonschema.validate(json.loads(plan.arguments), tools.offered[called] or {"type": "object"})
    else:
        assert plan.text.startswith("You said") and plan.finish == "stop"
