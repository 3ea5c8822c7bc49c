"""Request parsing: JSON bodies into pydantic models, failures into one clear 400 message."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gateway.errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)


def field_path(loc: tuple[Any, ...]) -> str:
    """`('messages', 0, 'content')` -> `messages[0].content`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union", "union[")):
            continue  # pydantic's internal names for validators and unions say nothing to a user
        else:
            out += f".{part}" if out else str(part)
    return out


def describe(exc: ValidationError) -> tuple[str, str | None]:
    """The first problem, as ("<field>: <rule>", field), with a count of any others."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    param = field_path(tuple(first.get("loc", ()))) or None
    rule = first.get("msg", "is invalid")
    if first.get("type") == "missing":
        rule = "is required"
    elif first.get("type") == "extra_forbidden":
        rule = "is not a known field"
    rule = rule.removeprefix("Value error, ")
    message = f"{param}: {rule}" if param else rule
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return message, param


def invalid(exc: ValidationError) -> InvalidRequest:
    message, param = describe(exc)
    return InvalidRequest(message, param=param)


def parse_json(body: str | bytes | None) -> Any:
    """The decoded JSON body, or a 400 that says why it is not JSON."""
    if body is None or (isinstance(body, (str, bytes)) and not body.strip()):
        raise InvalidRequest("request body is required and must be a JSON object")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"request body is not valid JSON: {exc}") from None


def parse_model(model: type[M], data: Any) -> M:
    """Validate `data` (already decoded) against `model`, raising a 400 that names the field."""
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from None


def parse_body(model: type[M], body: str | bytes | None) -> M:
    return parse_model(model, parse_json(body))
