"""4., 6. and 9.: how moto finds a call's service and operation, and writes its answer."""

from __future__ import annotations

import json
from typing import Any

# DynamoDB operations whose answers are written straight as JSON (6.).
_PLAIN_JSON_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan",
                                    "BatchGetItem", "BatchWriteItem", "TransactWriteItems", "TransactGetItems"})


def install(originals: dict[str, Any]) -> None:
    import moto.backends
    import moto.core.responses
    from moto.core.responses import ActionResult

    modules = tuple(moto.backends.list_of_moto_modules())  # 4.
    moto.backends.list_of_moto_modules = lambda: modules
    ActionResult.execute_result = _plain_json(originals["ActionResult.execute_result"])  # type: ignore
    listed: dict[type, list[str]] = {}  # 9.
    list_methods = originals["method_names_from_class"]

    def method_names_from_class(cls: type) -> list[str]:
        if cls not in listed:
            listed[cls] = list_methods(cls)
        return listed[cls]

    moto.core.responses.method_names_from_class = method_names_from_class  # type: ignore[assignment]


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
