"""The money's transactions: every one that moves quota (a durable reservation and its close, a
lease's grant and fold, a credit) is one DynamoDB transaction over the accounts table, sent here.

DynamoDB cancels a transaction that meets another on the same item (a user's profile and day
totals are in every reservation, grant and fold of that user) or whose table is over its
throughput for the moment: it is asked again (`store.aws.transact`). A failed condition or anything
else is raised at once, so neither is ever read as "already closed" or "quota too low"; still
cancelled after `attempts`, a 429 to retry.
"""

from __future__ import annotations

from typing import Any

from gateway import observability
from gateway.aws_failures import cancelled_to_ask_again
from gateway.errors import RateLimited
from gateway.store.aws import TRANSACT_ATTEMPTS, client
from gateway.store.aws import transact as aws_transact


def _db():
    return client("dynamodb")


def transact(writes: list[dict[str, Any]], *, attempts: int = TRANSACT_ATTEMPTS) -> None:
    """One transaction (`store.aws.transact`), asked again while it is cancelled for a conflict or
    for throughput; still cancelled after `attempts`, a 429 to retry (`account_busy`)."""
    try:
        aws_transact(_db(), writes, attempts=attempts,
                     asked_again=lambda: observability.incident("TransactionConflicts"))
    except Exception as exc:
        if not cancelled_to_ask_again(exc):
            raise
        observability.incident("AccountBusy")
        raise RateLimited("the account is busy with other requests at this moment; retry",
                          code="account_busy", headers={"Retry-After": "1"}) from None
