"""1. and 8.: a transaction rolls back only the items it touched, and checks each condition once."""

from __future__ import annotations

import copy
from typing import Any

from gateway_local.moto_fixes import queries


def install(originals: dict[str, Any]) -> None:
    from moto.dynamodb.models import DynamoDBBackend

    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]


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
            queries.refresh(table, hash_key, range_key)

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
            # The condition held on this very item a moment ago (8., see the package docstring): not checked again.
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
