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
        from moto.core.common_models import BaseModel
        from moto.core.responses import ActionResult
        from moto.dynamodb.models import DynamoDBBackend
        from moto.dynamodb.models.table import Table
        from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
        from moto.dynamodb.parsing.validators import Validator

        _originals.update({"UpdateExpressionParser.make": UpdateExpressionParser.__dict__["make"].__func__,
                           "Validator.__init__": Validator.__init__})
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
            if op_type == "Put":
                self.put_item(table_name, op["Item"], condition_expression=condition_expression,
                              expression_attribute_names=expression_attribute_names,
                              expression_attribute_values=expression_attribute_values)
            elif op_type == "Delete":
                self.delete_item(table_name, key, condition_expression=condition_expression,
                                 expression_attribute_names=expression_attribute_names,
                                 expression_attribute_values=expression_attribute_values)
            elif op_type == "Update":
                self.update_item(table_name, key, update_expression=op["UpdateExpression"],
                                 condition_expression=condition_expression,
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
