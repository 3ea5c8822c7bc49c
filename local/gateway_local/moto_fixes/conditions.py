"""12.: each distinct condition parsed once, each use's values put into it."""

from __future__ import annotations

from typing import Any

from gateway_local.moto_fixes.updates import PARSED_LIMIT


def install(originals: dict[str, Any]) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    ConditionExpressionParser.parse = _parsed_once(originals["ConditionExpressionParser.parse"])  # type: ignore


class _Slot:
    """Where a value goes in a parsed condition."""

    def __init__(self, name: str):
        self.name = name


# (expression, names, (value name, type)...) -> (tree, [(AttributeValue node, value name)], names
# found, values found); None: this expression is parsed every time.
_ParsedCondition = tuple[Any, list[tuple[Any, str]], list[str], list[str]]
_conditions: dict[tuple[Any, ...], _ParsedCondition | None] = {}


def _parsed_once(original: Any) -> Any:
    def parse(self: Any) -> Any:
        expression, names, values = (self.condition_expression, self.expression_attribute_names,
                                     self.expression_attribute_values)
        key = _condition_key(expression, names, values)
        if key is None:
            return original(self)
        if key not in _conditions:
            entry = _parse_with_slots(original, self, values or {})
            if entry is None:
                return original(self)  # moto's own way says what is wrong, or this one is not kept
            if len(_conditions) < PARSED_LIMIT:
                _conditions[key] = entry
        else:
            entry = _conditions[key]
            if entry is None:
                return original(self)
        tree, bindings, names_found, values_found = entry
        for node, name in bindings:
            node.value = values[name][node.type]
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        return tree

    return parse


def _condition_key(expression: Any, names: Any, values: Any) -> tuple[Any, ...] | None:
    if not expression or not isinstance(expression, str):
        return None
    try:
        typed = tuple(sorted((name, *value) for name, value in (values or {}).items()
                             if isinstance(value, dict) and len(value) == 1))
        if len(typed) != len(values or {}):
            return None
        return expression, tuple(sorted((names or {}).items())), typed
    except TypeError:  # unhashable or unorderable: not kept
        return None


def _parse_with_slots(original: Any, parser: Any, values: dict[str, Any]) -> _ParsedCondition | None:
    """The expression parsed with a stand-in for each value, and where each stand-in landed;
    None if the parse fails (moto's own way then tells why) or a stand-in went anywhere but into
    a value node (then it is not kept)."""
    from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser

    slotted: Any = {name: {next(iter(value)): _Slot(name)} for name, value in values.items()}
    probe = ConditionExpressionParser(parser.condition_expression, parser.expression_attribute_names, slotted)
    try:
        tree = original(probe)
    except Exception:  # noqa: BLE001 - parsed again the usual way, which raises it with the real values
        return None
    bindings: list[tuple[Any, str]] = []
    leaked = [False]

    def walk(node: Any, seen: set[int]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, _Slot):
            leaked[0] = True
        elif isinstance(node, AttributeValue):
            if isinstance(node.value, _Slot):
                bindings.append((node, node.value.name))
            else:
                walk(node.value, seen)
        elif isinstance(node, list | tuple | set | frozenset):
            for child in node:
                walk(child, seen)
        elif isinstance(node, dict):
            for child in node.values():
                walk(child, seen)
        elif hasattr(node, "__dict__") and type(node).__module__ == "moto.dynamodb.comparisons":
            for child in vars(node).values():
                walk(child, seen)

    walk(tree, set())
    if leaked[0]:
        return None
    return tree, bindings, list(probe.expr_attr_names_found), list(probe.expr_attr_values_found)
