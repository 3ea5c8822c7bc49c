"""Changes to moto that make the local emulator cost the same per request at any size, and less.

moto is the local stand-in for DynamoDB; the gateway's storage code is the one the cloud runs
(boto3 over HTTP). Left as it is, moto grows slower and bigger with every billed request:

1. `transact_write_items` deep-copies the whole target table once per operation, to roll back
   a cancelled transaction; billing runs two such transactions per request on the accounts
   table, which holds every reservation and ledger entry. Here a transaction keeps a copy of
   only the items it touches (taken just before each is touched) and puts exactly those back
   when it is cancelled: the same all-or-nothing result for the cost of the transaction.
2. `BaseModel.__new__` appends every instance moto ever makes to `instances_tracked` (for its
   web dashboard, which the runner does not serve), so every item and every copy stays in
   memory for good. Here nothing is tracked.
3. A table Query without an index looks at every item of the table to find its partition.
   Here it looks at the partition's items only (moto keeps them under the hash key already).
4. Every call lists moto's package directory (tens of `stat`s) to tell its service from the
   host; the listing of an installed package does not change, so it is read once.
5. Every update parses its UpdateExpression again; the parse tree is never changed (moto's
   validator works on a copy), so each distinct expression is parsed once.
6. Every answer is serialised member by member against botocore's output shape, which costs
   more than the operation itself (about half of a GetItem of a 30-attribute item). The
   data-plane answers of DynamoDB (items and their keys) are already JSON in DynamoDB's wire
   form, so they are written with `json.dumps` instead; anything else (a timestamp, bytes, an
   error, a paginated or control-plane answer) takes moto's own way.
7. Every update walks a deep copy of its expression tree ten times (one validator after
   another) and deep-copies the item for a stream the table does not have: about 3 ms for one
   `ADD a :x, b :y` here, most of a billed request's cost. The updates the gateway sends are
   plain: `SET name = :value`, `ADD name :number` and `REMOVE name` on top-level attributes
   that are not keys. Those are applied directly, with moto's own value types, arithmetic and
   size limit; anything else (a nested path, a function, arithmetic, a set, DELETE, a key
   attribute, a reserved word, a name or value not given, a type mismatch, a table with a
   stream) goes moto's own way, which also says what is wrong with it. A differential test
   (tests/unit/test_moto_fixes.py) runs both ways on the same items and compares them.
8. A transaction checks each operation's condition, then hands the operation to moto's
   put/update/delete with the same condition, which parses and checks it again on the same
   item; here it is checked once.
9. Every call lists the methods of its service's handler class (`inspect.getmembers`) to find
   the operation; a class's methods do not change, so each class is listed once.
10. A new item is filled attribute by attribute, each insert summing the size of every
   attribute already in (to keep an item under 400 KB): quadratic in its attributes. Here the
   running size is kept while it is filled: the same limit, met at the same attribute.
11. A Query of a global secondary index looks at every item of the table, sorted (about 20 ms
   for 20000 items; the sweeper asks eight such queries every few seconds). Here each table
   keeps its global indexes as partitions (the index's hash key values -> the items), brought
   up to date by every put, update and delete of an item and by a cancelled transaction's
   rollback, and built again from the table after anything else that could change items
   (PartiQL, a table update); a Query then looks at its partition's items only, and moto's own
   filtering, sorting and paging run on them as before.
12. Every condition (a put's, an update's, each operation of a transaction) is lexed and parsed
   again. Here the tree of each distinct expression (with its names, and the type of each
   value) is parsed once, with a stand-in for each value, and each use puts that call's
   values into it; an expression whose values the parse does anything else with than carry
   them is parsed every time, as before.

These reach into moto's internals, so the supported moto versions are pinned in pyproject.toml
and `apply()` checks, before changing anything, that the code it replaces is the code it was
written against: a moto upgrade that changes it fails at start, loudly, instead of silently
corrupting a transaction. (`emulator.py` adds one more saving: calls from the runner's own
process reach moto's WSGI app without a socket.)
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import threading
from typing import Any

# moto versions whose replaced functions this module was checked against (source digests).
SUPPORTED = "moto>=5.2.5,<5.3"
_EXPECTED_SOURCES = {
    "DynamoDBBackend.transact_write_items": "81db2cb7d94e",
    "BaseModel.__new__": "08cf0ef20e88",
    "Table.query": "002b4d00be6d",
    "ActionResult.execute_result": "6333faa349b5",
    "UpdateExpressionParser.make": "2c00ed96d6e1",
    "Validator.__init__": "9489b532dd0f",  # works on a copy of the tree: 5. relies on it
    "DynamoDBBackend.update_item": "218984588dd6",  # 7. applies its plain updates the same way
    "method_names_from_class": "9dbac89d082b",  # 9. a pure function of the class
    "Item.__init__": "d9c12b62cb92",  # 10. the same size check, kept as it goes
    "ConditionExpressionParser.parse": "5c9b63c5f49e",  # 12. values only carried into AttributeValue
}
_PARSED_LIMIT = 1024  # distinct update expressions kept parsed (the gateway uses a dozen)
# DynamoDB operations whose answers are written straight as JSON (6. above).
_PLAIN_JSON_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan",
                                    "BatchGetItem", "BatchWriteItem", "TransactWriteItems", "TransactGetItems"})

_applied = False
_apply_lock = threading.Lock()


class MotoChanged(RuntimeError):
    """The installed moto is not the one these fixes were written against."""


def _digest(function: Any) -> str:
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:12]


_originals: dict[str, Any] = {}


def _targets() -> dict[str, Any]:
    """moto's own functions that `apply` replaces (as they were before it did)."""
    if not _originals:
        import moto.core.utils
        from moto.core.common_models import BaseModel
        from moto.core.responses import ActionResult
        from moto.dynamodb.comparisons import ConditionExpressionParser
        from moto.dynamodb.models import DynamoDBBackend
        from moto.dynamodb.models.dynamo_type import Item
        from moto.dynamodb.models.table import Table
        from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
        from moto.dynamodb.parsing.validators import Validator

        _originals.update({"UpdateExpressionParser.make": UpdateExpressionParser.__dict__["make"].__func__,
                           "Validator.__init__": Validator.__init__,
                           "DynamoDBBackend.update_item": DynamoDBBackend.update_item,
                           "method_names_from_class": moto.core.utils.method_names_from_class,
                           "Item.__init__": Item.__init__,
                           "ConditionExpressionParser.parse": ConditionExpressionParser.parse})
        _originals.update({"DynamoDBBackend.transact_write_items": DynamoDBBackend.transact_write_items,
                           "BaseModel.__new__": BaseModel.__dict__["__new__"], "Table.query": Table.query,
                           "ActionResult.execute_result": ActionResult.execute_result})
    return _originals


def check() -> None:
    """Raises `MotoChanged` unless every replaced function is the one this module knows."""
    import moto

    changed = [name for name, function in _targets().items() if _digest(function) != _EXPECTED_SOURCES[name]]
    if changed:
        raise MotoChanged(
            f"moto {moto.__version__} changed {', '.join(changed)}; gateway_local/moto_fixes.py was written "
            f"against {SUPPORTED} and must be checked again before it runs on this version")


def apply() -> None:
    """Installs the fixes once per process (after `check`)."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        check()
        from moto.core.common_models import BaseModel
        from moto.core.responses import ActionResult
        from moto.dynamodb.models import DynamoDBBackend
        from moto.dynamodb.models.table import Table

        original_query = _targets()["Table.query"]
        BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]
        DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]

        def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
            index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
            if index_name is None and hash_key is not None and self.range_key_attr is not None:
                return original_query(_Partition(self, hash_key), hash_key, *args, **kwargs)
            if index_name is not None:
                conditions = kwargs.get("hash_key_conditions", args[9] if len(args) > 9 else None)
                view = _index_partition(self, index_name, conditions)
                if view is not None:
                    return original_query(view, hash_key, *args, **kwargs)
            return original_query(self, hash_key, *args, **kwargs)

        Table.query = query  # type: ignore[method-assign]
        ActionResult.execute_result = _plain_json(_targets()["ActionResult.execute_result"])  # type: ignore
        import moto.backends

        modules = tuple(moto.backends.list_of_moto_modules())
        moto.backends.list_of_moto_modules = lambda: modules
        from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

        parse = _targets()["UpdateExpressionParser.make"]
        parsed: dict[str, Any] = {}

        def make(cls: Any, expression: str) -> Any:
            tree = parsed.get(expression)
            if tree is None:
                tree = parse(cls, expression)
                if len(parsed) < _PARSED_LIMIT:
                    parsed[expression] = tree
            return tree

        UpdateExpressionParser.make = classmethod(make)
        DynamoDBBackend.update_item = _plain_update(_targets()["DynamoDBBackend.update_item"])  # type: ignore
        import moto.core.responses

        listed: dict[type, list[str]] = {}
        list_methods = _targets()["method_names_from_class"]

        def method_names_from_class(cls: type) -> list[str]:
            if cls not in listed:
                listed[cls] = list_methods(cls)
            return listed[cls]

        moto.core.responses.method_names_from_class = method_names_from_class  # type: ignore[assignment]
        from moto.dynamodb.models.dynamo_type import Item

        Item.__init__ = _item_init  # type: ignore[method-assign]
        _keep_indexes(Table, DynamoDBBackend)  # after 7.: its update_item is the one hooked
        from moto.dynamodb.comparisons import ConditionExpressionParser

        ConditionExpressionParser.parse = _parsed_once(_targets()["ConditionExpressionParser.parse"])  # type: ignore
        _applied = True


def _plain_json(original: Any) -> Any:
    def execute_result(self: Any, context: Any) -> Any:
        if (isinstance(self.result, dict)
                and context.service_model.service_name == "dynamodb"
                and context.operation_model.name in _PLAIN_JSON_OPERATIONS):
            try:
                body = json.dumps(_without_none(self.result), separators=(",", ":"))
            except (TypeError, ValueError):  # not plain JSON after all: moto's own way
                return original(self, context)
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original(self, context)

    return execute_result


def _without_none(value: Any) -> Any:
    """Drops None members, as the shape serialiser does (None means 'absent')."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


# --- 7. plain updates ------------------------------------------------------------------------------

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
    if len(_plans) < _PARSED_LIMIT:
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
    if kept is None or kept[0] != _index_generation:  # a table update bumps the generation
        own = frozenset(table.table_key_attrs)
        every = frozenset({*own, *table.attribute_keys, *(a["AttributeName"] for a in table.attr)})
        kept = table.__dict__["_gateway_keys"] = (_index_generation, own, every)
    return kept[1], kept[2]


_reserved: frozenset[str] = frozenset()


def _reserved_words() -> frozenset[str]:
    global _reserved
    if not _reserved:
        from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

        _reserved = frozenset(ReservedKeywords.get_reserved_keywords())
    return _reserved


def _plain_update(original: Any) -> Any:
    """moto's `update_item`, applying a plain update directly (7. above)."""

    def update_item(self: Any, table_name: str, key: dict[str, dict[str, Any]], update_expression: str,
                    expression_attribute_names: dict[str, Any], expression_attribute_values: dict[str, Any],
                    attribute_updates: dict[str, Any] | None = None, expected: dict[str, Any] | None = None,
                    condition_expression: str | None = None,
                    return_values_on_condition_check_failure: str | None = None) -> Any:
        from moto.dynamodb.comparisons import create_condition_expression_parser
        from moto.dynamodb.exceptions import ConditionalCheckFailed, ItemSizeToUpdateTooLarge
        from moto.dynamodb.models.dynamo_type import DynamoType, ItemSizeTooLarge

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
        try:
            for action, name, value in actions:
                if action == SET:
                    item.attrs[name] = value
                elif action == ADD:
                    current = item.attrs.get(name)
                    item.attrs[name] = (current if current is not None else DynamoType({"N": "0"})) + value
                else:
                    item.attrs.pop(name, None)
        except ItemSizeTooLarge:
            raise ItemSizeToUpdateTooLarge() from None
        return item

    return update_item


def _item_init(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
    """moto's `Item.__init__` with its size check kept as a running total (10. above)."""
    from moto.dynamodb.models.dynamo_type import DynamoType, ItemSizeTooLarge, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    self.hash_key, self.range_key = hash_key, range_key
    self.attrs = LimitedSizeDict()
    size = 0
    for key, value in attrs.items():
        typed = DynamoType(value)
        size += bytesize(key) + typed.size()
        if size > 405000:  # LimitedSizeDict's limit
            raise ItemSizeTooLarge
        dict.__setitem__(self.attrs, key, typed)


def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    return object.__new__(cls)


class _Partition:
    """A table seen through one partition: `all_items` lists that partition's items only."""

    def __init__(self, table: Any, hash_key: Any):
        self._table, self._hash_key = table, hash_key

    def all_items(self) -> list[Any]:
        partition = self._table.items.get(self._hash_key)  # .get: the dict is a defaultdict
        return list(partition.values()) if partition else []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


# --- 11. global index partitions -----------------------------------------------------------------

_index_generation = 0  # bumped by a call that may change items without the hooks below seeing it


class _GlobalIndexes:
    """The global indexes of one table as partitions: the index's hash key values -> its items."""

    def __init__(self, table: Any):
        self.generation = _index_generation
        self.hash_attrs = {index.name: tuple(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH")
                           for index in table.global_indexes}
        self.partitions: dict[str, dict[tuple[Any, ...], dict[tuple[Any, Any], Any]]] = {
            name: {} for name in self.hash_attrs}
        self.memberships: dict[tuple[Any, Any], dict[str, tuple[Any, ...]]] = {}  # table key -> index -> values
        for item in _stored_items(table):
            self._add(item)

    def _add(self, item: Any) -> None:
        key, found = (item.hash_key, item.range_key), {}
        for name, attributes in self.hash_attrs.items():
            values = tuple(item.attrs.get(attribute) for attribute in attributes)
            if all(value is not None for value in values):
                self.partitions[name].setdefault(values, {})[key] = item
                found[name] = values
        if found:
            self.memberships[key] = found

    def refresh(self, table: Any, hash_key: Any, range_key: Any) -> None:
        """Files the item now stored under this key (if any) where it belongs, and only there."""
        key = (hash_key, range_key)
        for name, values in self.memberships.pop(key, {}).items():
            partition = self.partitions[name].get(values)
            if partition is not None:
                partition.pop(key, None)
                if not partition:
                    del self.partitions[name][values]
        item = _stored_item(table, hash_key, range_key)
        if item is not None:
            self._add(item)


def _stored_items(table: Any) -> list[Any]:
    if table.range_key_attr is None:
        return list(table.items.values())
    return [item for partition in table.items.values() for item in partition.values()]


def _stored_item(table: Any, hash_key: Any, range_key: Any) -> Any:
    if range_key is None:
        return None if table.range_key_attr is not None else table.items.get(hash_key)
    partition = table.items.get(hash_key)  # .get: the dict is a defaultdict
    return partition.get(range_key) if partition else None


def _indexes_of(table: Any) -> _GlobalIndexes:
    indexes = table.__dict__.get("_gateway_indexes")
    if indexes is None or indexes.generation != _index_generation:
        indexes = table.__dict__["_gateway_indexes"] = _GlobalIndexes(table)
    return indexes


def _refresh(table: Any, hash_key: Any, range_key: Any) -> None:
    indexes = table.__dict__.get("_gateway_indexes")
    if indexes is not None and indexes.generation == _index_generation:
        indexes.refresh(table, hash_key, range_key)


def _index_partition(table: Any, index_name: str, conditions: list[tuple[str, Any]] | None) -> Any:
    """The table seen through one partition of a global index; None where the whole table must be
    looked at (a local index, a condition on other attributes, an unknown index: moto judges)."""
    if not table.global_indexes:
        return None
    indexes = _indexes_of(table)
    attributes = indexes.hash_attrs.get(index_name)
    asked = dict(conditions or [])
    if attributes is None or set(asked) != set(attributes):
        return None
    items = indexes.partitions[index_name].get(tuple(asked[attribute] for attribute in attributes), {})
    return _Candidates(table, list(items.values()))


class _Candidates:
    """A table whose `all_items` are the given items."""

    def __init__(self, table: Any, items: list[Any]):
        self._table, self._items = table, items

    def all_items(self) -> list[Any]:
        return self._items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def _key_of_put(table: Any, attrs: dict[str, Any]) -> tuple[Any, Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        hash_key = DynamoType(attrs[table.hash_key_attr])
        range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
    except Exception:  # noqa: BLE001 - no key: moto refuses the put, nothing is stored
        return None
    return hash_key, range_key


def _keep_indexes(table_class: Any, backend_class: Any) -> None:
    """Hooks every way an item is stored, changed or removed to `_refresh` (11. above)."""
    put, delete, update = table_class.put_item, table_class.delete_item, backend_class.update_item

    def put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        key = _key_of_put(self, item_attrs)
        try:
            return put(self, item_attrs, *args, **kwargs)
        finally:
            if key is not None:
                _refresh(self, *key)

    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        try:
            return delete(self, hash_key, range_key)
        finally:
            _refresh(self, hash_key, range_key)

    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return update(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            if table is not None:
                found = _key_of_put(table, key) if table.hash_key_attr in key else None
                if found is not None:
                    _refresh(table, *found)
                else:
                    _forget_indexes()

    table_class.put_item, table_class.delete_item = put_item, delete_item
    backend_class.update_item = update_item
    for name in ("update_table", "update_table_global_indexes", "execute_statement", "execute_transaction",
                 "batch_execute_statement", "restore_table_from_backup", "restore_table_to_point_in_time",
                 "import_table"):
        setattr(backend_class, name, _forgetting(getattr(backend_class, name)))


def _forget_indexes() -> None:
    global _index_generation
    _index_generation += 1


def _forgetting(method: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        finally:
            _forget_indexes()

    return call


# --- 12. conditions parsed once ------------------------------------------------------------------


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
            if len(_conditions) < _PARSED_LIMIT:
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


# It follows moto's own function step by step (so a moto upgrade can be compared with it line by
# line), hence its branches stay in one function.
def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:  # noqa: C901
    """moto's `transact_write_items`, rolling back the touched items instead of whole tables."""
    from moto.dynamodb.comparisons import get_filter_expression as filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    # (table, hash key, range key) -> the item as it was before this transaction (None: absent)
    before: dict[tuple[str, Any, Any], Any] = {}

    def remember(table_name: str, key: dict[str, Any]) -> None:
        table = self.get_table(table_name)
        hash_key, range_key = self.get_keys_value(table, key)
        where = (table.name, hash_key, range_key)
        if where not in before:
            before[where] = copy.deepcopy(table.get_item(hash_key, range_key))

    def roll_back() -> None:
        for (table_name, hash_key, range_key), item in before.items():
            table = self.tables.get(table_name)
            if table is None:
                continue
            if item is None:
                table.delete_item(hash_key, range_key)
                if range_key is not None and not table.items.get(hash_key, True):
                    del table.items[hash_key]  # no empty partition left behind
            elif range_key is not None:
                table.items[hash_key][range_key] = item
            else:
                table.items[hash_key] = item
            _refresh(table, hash_key, range_key)

    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[str, str, dict[str, Any]] | tuple[None, None, None]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            expression_attribute_names = op.get("ExpressionAttributeNames")
            expression_attribute_values = op.get("ExpressionAttributeValues")
            return_values_on_condition_check_failure = op.get("ReturnValuesOnConditionCheckFailure")
            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            check_unicity(table_name, key)
            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = filter_expression(condition_expression, expression_attribute_names,
                                                 expression_attribute_values)
                if not condition_op.expr(current):
                    if return_values_on_condition_check_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)
            if op_type != "ConditionCheck":
                remember(table_name, key)
            # The condition held on this very item a moment ago (8. above): not checked again.
            if op_type == "Put":
                self.put_item(table_name, op["Item"], expression_attribute_names=expression_attribute_names,
                              expression_attribute_values=expression_attribute_values)
            elif op_type == "Delete":
                self.delete_item(table_name, key, expression_attribute_names=expression_attribute_names,
                                 expression_attribute_values=expression_attribute_values)
            elif op_type == "Update":
                self.update_item(table_name, key, update_expression=op["UpdateExpression"],
                                 expression_attribute_names=expression_attribute_names,
                                 expression_attribute_values=expression_attribute_values)
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            roll_back()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001 - moto reports any other failure as a cancellation reason
            errors.append((type(e).__name__, str(e), original_item))  # type: ignore[arg-type]

    if any(code is not None for code, _, _ in errors):
        roll_back()
        raise TransactionCanceledException(errors)
