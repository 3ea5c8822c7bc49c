"""boto3 clients, made once per execution environment and reused across invocations.

`AWS_ENDPOINT_URL` (read by boto3 itself) points them at the local emulator, DynamoDB Local or
LocalStack; deployed, it is unset and they reach real AWS.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from typing import Any, TypeVar, overload

from gateway.aws_failures import cancelled_to_ask_again

T = TypeVar("T")

_lock = threading.Lock()
_clients: dict[str, Any] = {}


class WouldWait(BaseException):
    """Raised by `client` under `no_wait`: what was asked needs an AWS call; ask again where waiting
    is allowed (a worker thread). A BaseException, so that no `except Exception` swallows it."""


_no_wait: ContextVar[bool] = ContextVar("no_wait", default=False)


@contextmanager
def no_wait() -> Iterator[None]:
    """Within it (on an event loop), any AWS call about to be made raises `WouldWait` first, before
    it is sent: the work a request does from what this instance already has in memory (a cached
    key, a lease in hand) runs on the loop, without a hop to a worker thread and back."""
    token = _no_wait.set(True)
    try:
        yield
    finally:
        _no_wait.reset(token)


async def here_unless_it_waits(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` on the calling event loop under `no_wait`, or, if it needs an AWS call
    (`WouldWait`), again from the start on a worker thread."""
    import anyio.to_thread

    try:
        with no_wait():
            return function(*args)
    except WouldWait:
        return await anyio.to_thread.run_sync(function, *args)


def store_call_ahead() -> None:
    """Called before anything that waits on AWS (or on another thread's AWS call): `WouldWait`
    under `no_wait`."""
    if _no_wait.get():
        raise WouldWait


def client(service: str):
    """The shared low-level client for `service` (dynamodb, sqs, ssm, secretsmanager); under
    `no_wait`, `WouldWait` instead."""
    store_call_ahead()
    found = _clients.get(service)
    if found is None:
        with _lock:
            found = _clients.get(service)
            if found is None:
                found = _new_client(service)
                _clients[service] = found
    return found


def _new_client(service: str):
    # botocore (boto3's engine) directly, imported on first use: its imports cost ~150 ms, which
    # a function that answers without AWS (a 401, a 400) should not pay; boto3's own layer on
    # top (s3transfer) would add more for nothing.
    import botocore.session
    from botocore.config import Config

    # Every request the layer sends is built by its own code (and checked by the service itself):
    # botocore's own check of each one against the service model is CPU on every call for nothing.
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=3, read_timeout=10,
                    parameter_validation=False,
                    # Presigned S3 links with Signature Version 4: botocore's default for a presign is
                    # still SigV2, which regions opened since 2014 refuse.
                    **({"signature_version": "s3v4"} if service == "s3" else {}))
    return botocore.session.get_session().create_client(service, config=config)


def reset_clients() -> None:
    """Forget the clients (the environment they were made from changed: tests, local runner)."""
    with _lock:
        _clients.clear()


def serialize(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value (numbers as exact decimal strings)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, (int, Decimal)):
        return {"N": str(value)}
    if isinstance(value, float):
        return {"N": repr(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, (bytes, bytearray)):
        return {"B": bytes(value)}
    if isinstance(value, dict):
        return {"M": {str(k): serialize(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [serialize(v) for v in value]}
    raise TypeError(f"cannot store a {type(value).__name__} in DynamoDB")


def _number(text: str) -> int | float:
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


def deserialize(attribute: dict[str, Any]) -> Any:
    (kind, value), = attribute.items()
    if kind == "S":
        return value
    if kind == "N":
        return _number(value)
    if kind == "BOOL":
        return value
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: deserialize(v) for k, v in value.items()}
    if kind == "L":
        return [deserialize(v) for v in value]
    if kind == "B":
        return value
    if kind == "SS":
        return list(value)
    if kind == "NS":
        return [_number(v) for v in value]
    raise TypeError(f"unexpected DynamoDB type {kind}")


def to_item(data: dict[str, Any]) -> dict[str, Any]:
    """A plain dict as a DynamoDB item (None values are left out)."""
    return {k: serialize(v) for k, v in data.items() if v is not None}


def to_values(data: dict[str, Any]) -> dict[str, Any]:
    """Expression attribute values from a plain dict."""
    return {k: serialize(v) for k, v in data.items()}


@overload
def from_item(item: dict[str, Any]) -> dict[str, Any]: ...
@overload
def from_item(item: None) -> None: ...
def from_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {k: deserialize(v) for k, v in item.items()}


def is_condition_failure(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in ("ConditionalCheckFailedException", "TransactionCanceledException")


def query_all(params: dict[str, Any], db: Any = None) -> list[dict[str, Any]]:
    """Every item of a DynamoDB Query, page after page, as plain dicts (through `db`, a repository's
    own client, when given)."""
    db = db or client("dynamodb")
    params = dict(params)
    items: list[dict[str, Any]] = []
    while True:
        answer = db.query(**params)
        items.extend(from_item(item) for item in answer.get("Items", []))
        if "LastEvaluatedKey" not in answer:
            return items
        params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


TRANSACT_ATTEMPTS = 6


def transact(db: Any, writes: list[dict[str, Any]], *, attempts: int = TRANSACT_ATTEMPTS,
             asked_again: Callable[[], None] | None = None) -> None:
    """One `TransactWriteItems` through `db`, asked again after a short random pause while DynamoDB
    cancels it only for a conflict or for throughput (`aws_failures.ASK_AGAIN`); a failed condition, any other
    error, and the last cancellation once `attempts` are spent, are raised. A cancelled transaction
    applied nothing, so asking again applies it at most once. `asked_again` is told each time."""
    for attempt in range(attempts):
        try:
            db.transact_write_items(TransactItems=writes)
            return
        except Exception as exc:
            if not cancelled_to_ask_again(exc) or attempt == attempts - 1:
                raise
            if asked_again is not None:
                asked_again()
            time.sleep(random.uniform(0, 0.01 * 2 ** min(attempt, 6)))
    raise AssertionError("unreachable: the last attempt returns or raises")
