"""Request parsing: JSON bodies into pydantic models, failures into one clear 400 message.

One JSON rule for every route (`parse_json`; form fields follow `check_text_fields`): the body is
UTF-8; it nests at most `MAX_DEPTH` arrays/objects; every number is finite (`NaN`, `Infinity`
and literals such as `1e400` that overflow a double are refused, since no upstream, DynamoDB or
our own JSON writer can carry them); no string or key holds a lone UTF-16 surrogate (`"\\ud800"`:
it cannot be encoded as UTF-8, so it could be neither stored nor relayed). A broken rule is a
400 naming where in the body it was broken, before anything is reserved or stored. A query's
numbers (`p`, `page_size`, a window's seconds) are read by `integer_param`, with the same 400.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError

from gateway.errors import InvalidRequest, shown

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


def _problem(error: Any) -> tuple[str, str | None]:
    """One pydantic error as ("<field>: <rule>", field). A model's own rule that names its field
    ("password2: must ...", pydantic giving it no place) is that field's."""
    param = field_path(tuple(error.get("loc", ()))) or None
    rule = error.get("msg", "is invalid")
    if error.get("type") == "missing":
        rule = "is required"
    elif error.get("type") == "extra_forbidden":
        rule = "is not a known field"
    rule = rule.removeprefix("Value error, ")
    if param is None:
        named = re.match(r"([A-Za-z_][A-Za-z0-9_]*): ", rule)
        return rule, named.group(1) if named else None
    return f"{param}: {rule}", param


def describe(exc: ValidationError) -> tuple[str, str | None]:
    """The first problem, as ("<field>: <rule>", field), with a count of any others."""
    errors = exc.errors(include_url=False)
    message, param = _problem(errors[0])
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return message, param


# A form has fewer fields; a long list's every item broken is said by the first ones.
MAX_PROBLEMS = 20


def invalid(exc: ValidationError) -> InvalidRequest:
    """The 400 of a body that broke its model: the first problem in the message (with a count of
    the others, for a script that reads only that), every problem in `problems`."""
    message, param = describe(exc)
    error = InvalidRequest(message, param=param)
    error.problems = tuple({"param": p, "message": shown(m, 300)} for m, p in
                           (_problem(e) for e in exc.errors(include_url=False)[:MAX_PROBLEMS]))
    return error


# Deeper than any real request (a JSON schema in a tool or response format included), and far
# below the recursion that would break the parser, pydantic or a deep copy.
MAX_DEPTH = 64


class _NonFinite:
    """Stands in for a NaN / Infinity while parsing, so the check can name where it was."""

    __slots__ = ("token",)

    def __init__(self, token: str):
        self.token = token


def _parse_float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text[:40])


def _lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _path(trail: tuple[Any, ...] | None) -> str:
    parts: list[Any] = []
    while trail is not None:
        trail, key = trail
        parts.append(key)
    return field_path(tuple(reversed(parts)))


def _located(trail: tuple[Any, ...] | None, rule: str, what: str) -> InvalidRequest:
    path = _path(trail)
    return InvalidRequest(f"{path}: {rule}" if path else f"{what}: {rule}", param=path or None)


def check_value(value: Any, what: str = "request body") -> None:
    """The JSON rule on an already decoded value: depth, finite numbers, no lone surrogates."""
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 0, None)]
    while stack:
        item, depth, trail = stack.pop()
        if isinstance(item, str):
            if _lone_surrogate(item):
                raise _located(trail, "contains a lone UTF-16 surrogate (not valid Unicode text)", what)
        elif isinstance(item, dict):
            if depth >= MAX_DEPTH:
                raise _located(trail, f"nests deeper than {MAX_DEPTH} levels of arrays and objects", what)
            for key, child in item.items():
                if _lone_surrogate(key):
                    raise _located(trail, "has a key with a lone UTF-16 surrogate (not valid Unicode text)", what)
                stack.append((child, depth + 1, (trail, key)))
        elif isinstance(item, list):
            if depth >= MAX_DEPTH:
                raise _located(trail, f"nests deeper than {MAX_DEPTH} levels of arrays and objects", what)
            stack.extend((child, depth + 1, (trail, index)) for index, child in enumerate(item))
        elif isinstance(item, _NonFinite) or (isinstance(item, float) and not math.isfinite(item)):
            token = item.token if isinstance(item, _NonFinite) else str(item)
            raise _located(trail, f"must be a finite number ({token} is not JSON)", what)


def check_text_fields(fields: dict[str, str]) -> None:
    """The same rule for the text fields of a form (multipart or query)."""
    for name, text in fields.items():
        if _lone_surrogate(name) or _lone_surrogate(text):
            raise InvalidRequest(f"{name[:64]}: contains a lone UTF-16 surrogate (not valid Unicode text)",
                                 param=name[:64])


def parse_json(body: str | bytes | None, what: str = "request body") -> Any:
    """The decoded JSON body under the one JSON rule, or a 400 that says what is wrong and where."""
    if body is None or (isinstance(body, (str, bytes)) and not body.strip()):
        raise InvalidRequest(f"{what} is required and must be a JSON object")
    if isinstance(body, (bytes, bytearray)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"{what} is not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(body, parse_constant=_NonFinite, parse_float=_parse_float)
    except RecursionError:
        raise InvalidRequest(f"{what} nests deeper than {MAX_DEPTH} levels of arrays and objects") from None
    except ValueError as exc:
        raise InvalidRequest(f"{what} is not valid JSON: {str(exc)[:200]}") from None
    check_value(value, what)
    return value


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


@overload
def integer_param(params: Mapping[str, Any], name: str, default: int, low: int, high: int | None) -> int: ...
@overload
def integer_param(params: Mapping[str, Any], name: str, default: None, low: int, high: int | None) -> int | None: ...
def integer_param(params: Mapping[str, Any], name: str, default: int | None, low: int, high: int | None) -> int | None:
    """A query parameter as a whole number from `low` to `high` (None: no bound), `default` when absent;
    else a 400 naming it."""
    if name not in params:
        return default
    text = str(params[name]).strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,18}", text):
        raise InvalidRequest(f"{name}: must be an integer (got {text[:40]!r})", param=name)
    value = int(text)
    if value < low or (high is not None and value > high):
        bound = f"{low} to {high}" if high is not None else f"at least {low}"
        raise InvalidRequest(f"{name}: must be {bound} (got {value})", param=name)
    return value
