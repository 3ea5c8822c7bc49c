"""The pieces every text dialect's request models share: strict scalars, an object whose unknown
fields pass through (`Open`), a field checked against the one shape that fits its value
(`by_shape`), the limits of a model name and of an output, and the token estimate of a prompt."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationInfo,
    create_model,
)
from pydantic_core import PydanticCustomError

from gateway.tokens import estimate_value_tokens

Int = Annotated[int, Strict()]
Num = Annotated[float, Strict()]  # strict float still takes an int such as 1
Bool = StrictBool
Str = StrictStr
NonEmptyStr = Annotated[StrictStr, Field(min_length=1)]
# Longer than any model id, short enough to echo in an error.
MAX_MODEL_NAME = 256
ModelName = Annotated[StrictStr, Field(min_length=1, max_length=MAX_MODEL_NAME)]
# An output limit above this is no limit any model has: a 400 naming the field, rather than a
# reservation no quota could hold.
MAX_OUTPUT_TOKENS = 1_000_000
OutputTokens = Annotated[Int, Field(ge=1, le=MAX_OUTPUT_TOKENS)]


class Open(BaseModel):
    """A JSON object whose unknown fields pass through untouched."""

    model_config = ConfigDict(extra="allow")


@cache
def _adapter(target: Any) -> TypeAdapter:
    return TypeAdapter(target)


def by_shape(choose: Callable[[Any], Any], expected: str) -> PlainValidator:
    """The validator of a field (`Annotated[Any, by_shape(...)]`) that checks the value against the
    one shape `choose` picks for it.

    `choose` returns a type, or None when nothing fits (then the error says `expected`).
    """

    def validate(value: Any) -> Any:
        target = choose(value)
        if target is None:
            raise PydanticCustomError("invalid_shape", expected)
        return _adapter(target).validate_python(value)

    return PlainValidator(validate)


def by_type(variants: dict[str, Any], fallback: Any = None, *, what: str = "type") -> Callable[[Any], Any]:
    """A `choose` for objects told apart by their `type` (or `what`) field.

    With no fallback, an unknown value is checked against the list of known ones, so the error
    lands on the field itself (`messages[0].role: Input should be 'user' or ...`).
    """
    if fallback is None:
        known: Any = (Literal[tuple(variants)], ...)  # built from the table, so only pydantic reads it
        fallback = create_model(f"Unknown_{what}", __base__=Open, **{what: known})

    def choose(value: Any) -> Any:
        if not isinstance(value, dict):
            return None
        kind = value.get(what)
        # An unhashable or non-string `type` / `role` gets the fallback, whose Literal names it.
        return variants.get(kind, fallback) if isinstance(kind, str) else fallback

    return choose


def only_when_streaming(value: Any, info: ValidationInfo) -> Any:
    # The chat and responses upstreams refuse stream_options on a non-streamed request.
    if value is not None and info.data.get("stream") is not True:
        raise ValueError("is only allowed when stream is true")
    return value


def prompt_tokens(model: BaseModel, fields: tuple[str, ...]) -> int:
    data = model.model_dump(include=set(fields), exclude_none=True)
    return sum(estimate_value_tokens(data[name], name) for name in fields if name in data)


def string_or_list(item: Any, *, non_empty: bool = True) -> Callable[[Any], Any]:
    min_length = 1 if non_empty else 0
    parts = Annotated[list[item], Field(min_length=min_length)]
    return lambda value: str if isinstance(value, str) else parts if isinstance(value, list) else None


# The tool choice of the openai dialects (chat and responses).
ToolChoice = Annotated[Any, by_shape(
    lambda v: Literal["none", "auto", "required"] if isinstance(v, str) else Open if isinstance(v, dict) else None,
    "must be none, auto, required or an object")]
