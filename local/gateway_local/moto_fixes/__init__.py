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
   stream) goes moto's own way, which also says what is wrong with it. The item's size is summed once
   for the whole update, with its new values, not once per attribute set (moto's
   `LimitedSizeDict` sums the whole item on each): an update that would make the item too large
   changes nothing.
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

One module per concern: `items` (2., 10.), `answers` (4., 6., 9.), `transactions` (1., 8.),
`queries` (3., 11.), `updates` (5., 7.), `conditions` (12.). tests/integration/test_emulator.py
runs the fixed and moto's own way side by side on the same items (updates, conditions, index
queries) and compares what they answer and leave.

These reach into moto's internals, so the supported moto versions are pinned in pyproject.toml
and `apply()` checks, before changing anything, that the code it replaces is the code it was
written against: a moto upgrade that changes it fails at start, loudly, instead of silently
corrupting a transaction. (`emulator.py` adds one more saving: the calls of the process that
started the emulator reach moto's handlers without HTTP.)
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from typing import Any

from gateway_local.moto_fixes import answers, conditions, items, queries, transactions, updates

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
            f"moto {moto.__version__} changed {', '.join(changed)}; gateway_local/moto_fixes was written "
            f"against {SUPPORTED} and must be checked again before it runs on this version")


def apply() -> None:
    """Installs the fixes once per process (after `check`)."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        check()
        originals = _targets()
        items.install(originals)
        answers.install(originals)
        transactions.install(originals)
        queries.install(originals)
        updates.install(originals)
        queries.keep_indexes()  # after updates: its update_item is the one hooked
        conditions.install(originals)
        _applied = True
