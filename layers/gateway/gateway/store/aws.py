"""boto3 clients, made once per execution environment and reused across invocations.

`AWS_ENDPOINT_URL` (read by boto3 itself) points them at the local emulator, DynamoDB Local or
LocalStack; deployed, it is unset and they reach real AWS.
"""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_CONFIG = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=3, read_timeout=10)

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def client(service: str):
    """The shared low-level client for `service` (dynamodb, sqs, ssm, secretsmanager)."""
    found = _clients.get(service)
    if found is None:
        with _lock:
            found = _clients.get(service)
            if found is None:
                found = boto3.session.Session().client(service, config=_CONFIG)
                _clients[service] = found
    return found


def reset_clients() -> None:
    """Forget the clients (the environment they were made from changed: tests, local runner)."""
    with _lock:
        _clients.clear()


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return [_from_dynamo(v) for v in value]
    return value


def to_item(data: dict[str, Any]) -> dict[str, Any]:
    """A plain dict as a DynamoDB item (None values are left out)."""
    return {k: _serializer.serialize(_to_dynamo(v)) for k, v in data.items() if v is not None}


def to_values(data: dict[str, Any]) -> dict[str, Any]:
    """Expression attribute values from a plain dict."""
    return {k: _serializer.serialize(_to_dynamo(v)) for k, v in data.items()}


def from_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {k: _from_dynamo(_deserializer.deserialize(v)) for k, v in item.items()}


def is_condition_failure(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in ("ConditionalCheckFailedException", "TransactionCanceledException")
