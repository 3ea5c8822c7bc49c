"""5. and 7.: an update expression parsed once, and a plain update applied directly."""

from __future__ import annotations

from typing import Any

from gateway_local.moto_fixes import queries
from gateway_local.moto_fixes.items import ITEM_SIZE_LIMIT

PARSED_LIMIT = 1024  # distinct expressions kept parsed (the gateway uses a few dozen)


def install(originals: dict[str, Any]) -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    parse = originals["UpdateExpressionParser.make"]
    parsed: dict[str, Any] = {}

    def make(cls: Any, expression: str) -> Any:
        tree = parsed.get(expression)
        if tree is None:
            tree = parse(cls, expression)
            if len(parsed) < PARSED_LIMIT:
                parsed[expression] = tree
        return tree

    UpdateExpressionParser.make = classmethod(make)
    DynamoDBBackend.update_item = _plain_update(originals["DynamoDBBackend.update_item"])  # type: ignore


SET, ADD, REMOVE = "SET", "ADD", "REMOVE"
# (action, the path's token, whether the token is a #placeholder, the value's :placeholder or None)
_Action = tuple[str, str, bool, str | None]
_plans: dict[str, tuple[_Action, ...] | None] = {}


def _plan(expression: str) -> tuple[_Action, ...] | None:
    """The actions of a plain update expression, in order; None for any other (cached)."""
    if expression in _plans:
        return _plans[expression]
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    try:
        tree = UpdateExpressionParser.make(expression)  # the parse cache of 5.
    except Exception:  # noqa: BLE001 - moto's own way reports the syntax error
        plan = None
    else:
        plan = _plain_actions(tree)
    if len(_plans) < PARSED_LIMIT:
        _plans[expression] = plan
    return plan


def _plain_actions(tree: Any) -> tuple[_Action, ...] | None:
    actions: list[_Action] = []
    clauses: list[str] = []
    pending = [tree]
    while pending:
        node = pending.pop(0)
        kind = type(node).__name__
        if kind in ("UpdateExpression", "UpdateExpressionSetActions", "UpdateExpressionAddActions",
                    "UpdateExpressionRemoveActions"):
            pending[:0] = list(node.children)
        elif kind in ("UpdateExpressionSetClause", "UpdateExpressionAddClause", "UpdateExpressionRemoveClause"):
            clauses.append(kind)
            pending[:0] = list(node.children)
        elif kind in ("UpdateExpressionSetAction", "UpdateExpressionAddAction", "UpdateExpressionRemoveAction"):
            action = _plain_action(kind, node.children)
            if action is None:
                return None
            actions.append(action)
        else:
            return None
    if len(clauses) != len(set(clauses)):  # moto refuses a second clause of a kind
        return None
    return tuple(actions)


def _plain_action(kind: str, children: list[Any]) -> _Action | None:
    path = children[0]
    if type(path).__name__ != "UpdateExpressionPath" or len(path.children) != 1:
        return None
    target = path.children[0]
    if type(target).__name__ not in ("ExpressionAttribute", "ExpressionAttributeName"):
        return None
    token, placeholder = target.children[0], type(target).__name__ == "ExpressionAttributeName"
    if kind == "UpdateExpressionRemoveAction":
        return (REMOVE, token, placeholder, None) if len(children) == 1 else None
    if len(children) != 2:
        return None
    value = children[1]
    if kind == "UpdateExpressionSetAction":
        if type(value).__name__ != "UpdateExpressionValue" or len(value.children) != 1:
            return None  # arithmetic or a function
        value = value.children[0]
    if type(value).__name__ != "ExpressionAttributeValue":
        return None
    return (SET if kind == "UpdateExpressionSetAction" else ADD), token, placeholder, value.children[0]


def _resolve(plan: tuple[_Action, ...], table: Any, names: dict[str, str] | None,
             values: dict[str, Any] | None) -> list[tuple[str, str, Any]] | None:
    """(action, attribute name, value) for each action; None where moto's own way must judge."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    names, values = names or {}, values or {}
    own_keys, keys = _key_attributes(table)
    reserved = _reserved_words()
    resolved: list[tuple[str, str, Any]] = []
    seen: set[str] = set()
    for action, token, placeholder, value_token in plan:
        if placeholder:
            name = names.get(token)
            if name is None:
                return None
        elif token.upper() in reserved:
            return None
        else:
            name = token
        guarded = keys if action == SET else own_keys
        if name in seen or name in guarded or token in guarded:
            return None
        seen.add(name)
        value = None
        if value_token is not None:
            raw = values.get(value_token)
            if not isinstance(raw, dict) or len(raw) != 1:
                return None
            try:
                value = DynamoType(raw)
            except Exception:  # noqa: BLE001 - moto's own way reports the bad value
                return None
            if action == ADD and value.type != "N":
                return None  # sets and wrong types: moto's own way
        resolved.append((action, name, value))
    return resolved


def _key_attributes(table: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The table's own key attributes, and every key attribute of the table and its indexes:
    moto checks a SET against the latter (type, empty string), any action against the former."""
    kept = table.__dict__.get("_gateway_keys")
    if kept is None or kept[0] != queries.generation():  # a table update bumps the generation
        own = frozenset(table.table_key_attrs)
        every = frozenset({*own, *table.attribute_keys, *(a["AttributeName"] for a in table.attr)})
        kept = table.__dict__["_gateway_keys"] = (queries.generation(), own, every)
    return kept[1], kept[2]


_reserved: frozenset[str] = frozenset()


def _reserved_words() -> frozenset[str]:
    global _reserved
    if not _reserved:
        from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

        _reserved = frozenset(ReservedKeywords.get_reserved_keywords())
    return _reserved


def _plain_update(original: Any) -> Any:
    """moto's `update_item`, applying a plain update directly (7., see the package docstring)."""

    def update_item(self: Any, table_name: str, key: dict[str, dict[str, Any]], update_expression: str,
                    expression_attribute_names: dict[str, Any], expression_attribute_values: dict[str, Any],
                    attribute_updates: dict[str, Any] | None = None, expected: dict[str, Any] | None = None,
                    condition_expression: str | None = None,
                    return_values_on_condition_check_failure: str | None = None) -> Any:
        from moto.dynamodb.comparisons import create_condition_expression_parser
        from moto.dynamodb.exceptions import ConditionalCheckFailed, ItemSizeToUpdateTooLarge
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.utilities import bytesize

        def moto_way() -> Any:
            return original(self, table_name, key, update_expression, expression_attribute_names,
                            expression_attribute_values, attribute_updates, expected, condition_expression,
                            return_values_on_condition_check_failure)

        table = self.get_table(table_name)
        plan = _plan(update_expression) if update_expression and not attribute_updates and not expected else None
        actions = _resolve(plan, table, expression_attribute_names, expression_attribute_values) if plan else None
        if actions is None or table.stream_shard is not None:
            return moto_way()
        # The key as moto's update_item reads it.
        if all([table.hash_key_attr in key, table.range_key_attr in key]):
            hash_value, range_value = DynamoType(key[table.hash_key_attr]), DynamoType(key[table.range_key_attr])
        elif table.hash_key_attr in key:
            hash_value, range_value = DynamoType(key[table.hash_key_attr]), None
        else:
            hash_value, range_value = DynamoType(key), None
        item = table.get_item(hash_value, range_value)
        condition = create_condition_expression_parser(condition_expression, expression_attribute_names,
                                                       expression_attribute_values).parse()
        if not condition.expr(item):
            if return_values_on_condition_check_failure == "ALL_OLD" and item is not None:
                raise ConditionalCheckFailed(item=item.to_json()["Attributes"])
            raise ConditionalCheckFailed
        if item is not None and any(action == ADD and name in item.attrs and item.attrs[name].type != "N"
                                    for action, name, _ in actions):
            return moto_way()  # ADD of a number to another type: moto's own error
        if item is None:
            data: dict[str, Any] = {table.hash_key_attr: {hash_value.type: hash_value.value}}
            if range_value:
                data[table.range_key_attr] = {range_value.type: range_value.value}
            table.put_item(data)
            item = table.get_item(hash_value, range_value)
        # The new values first, then the size of the item they make (LimitedSizeDict sums the
        # whole item again on every attribute set: once per action, most of an update's cost).
        changed: dict[str, Any] = {}
        for action, name, value in actions:
            if action == SET:
                changed[name] = value
            elif action == ADD:
                current = changed[name] if name in changed else item.attrs.get(name)
                changed[name] = (current if current is not None else DynamoType({"N": "0"})) + value
            else:
                changed[name] = None
        size = sum(bytesize(name) + value.size() for name, value in item.attrs.items() if name not in changed)
        size += sum(bytesize(name) + value.size() for name, value in changed.items() if value is not None)
        if size > ITEM_SIZE_LIMIT:
            raise ItemSizeToUpdateTooLarge()
        for name, value in changed.items():
            if value is None:
                item.attrs.pop(name, None)
            else:
                dict.__setitem__(item.attrs, name, value)
        return item

    return update_item
