"""Faults below the gateway, as AWS documents them, for the emulator (off unless asked for).

`GATEWAY_LOCAL_FAULTS` (for `make run`, `make bench-faults`; `Emulator.use_faults(...)` in tests)
is a comma-separated list of `<fault>=<probability>`:

- `dynamodb.throttle`: the call is refused for throughput and applies nothing. A single-item call
  or a batch answers `ProvisionedThroughputExceededException` (400); a `TransactWriteItems` either
  that or `TransactionCanceledException` with the cancellation reason `ThrottlingError` on one
  of its items ("Throughput exceeds the current capacity of your table or index"), half and half.
  Both are in DynamoDB's API reference of each operation (Errors), and botocore's standard retry
  mode retries the first, not the second (its retryable codes: botocore/retries/standard.py).
- `dynamodb.error`: `InternalServerError` (500), nothing applied ("An error occurred on the
  server side"); botocore retries it.
- `dynamodb.lost_answer`: a write (`PutItem`, `UpdateItem`, `DeleteItem`, `BatchWriteItem`,
  `TransactWriteItems`) is applied, then its answer is lost (a 500 instead of it), as when the
  connection drops after DynamoDB committed: botocore sends the same request again. A single
  conditional write then meets its own effect (`ConditionalCheckFailedException`), an unconditional
  `ADD` adds twice, as DynamoDB would. A transaction is idempotent by its `ClientRequestToken`
  (botocore fills one in every call): the same token within 10 minutes answers success without
  applying again, another request under a used token is `IdempotentParameterMismatchException`
  (TransactWriteItems, API reference). The emulator keeps that rule whether or not faults are on.
- `sqs.duplicate`: a message sent (`SendMessage`, each entry of `SendMessageBatch`) is delivered
  twice: a standard queue's at-least-once delivery ("more than one copy of a message might be
  delivered", the SQS developer guide).

The draws come from one `random.Random(GATEWAY_LOCAL_FAULTS_SEED)` (default 0), taken under the
emulator's lock in call order: the same calls in the same order meet the same faults.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_Answer = tuple[int, dict[str, str], bytes]

KINDS = ("dynamodb.throttle", "dynamodb.error", "dynamodb.lost_answer", "sqs.duplicate")
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
_DYNAMODB_CALLS = _WRITES | {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
TOKEN_SECONDS = 600  # DynamoDB: a client token is valid for 10 minutes after the request that used it


class FaultsSettingError(ValueError):
    """`GATEWAY_LOCAL_FAULTS` says something this module does not know."""


def parse(text: str) -> dict[str, float]:
    """`dynamodb.throttle=0.05,sqs.duplicate=0.1` -> {kind: probability}; raises on anything else."""
    rates: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        kind, equals, value = part.partition("=")
        kind = kind.strip()
        if kind not in KINDS or not equals:
            raise FaultsSettingError(f"GATEWAY_LOCAL_FAULTS: {part!r} is not <fault>=<probability> with a fault "
                                     f"among {', '.join(KINDS)}")
        try:
            rate = float(value)
        except ValueError:
            rate = -1.0
        if not 0.0 <= rate <= 1.0:
            raise FaultsSettingError(f"GATEWAY_LOCAL_FAULTS: {kind}'s probability must be from 0 to 1, got {value!r}")
        rates[kind] = rate
    if rates.get("dynamodb.throttle", 0) + rates.get("dynamodb.error", 0) + rates.get("dynamodb.lost_answer", 0) > 1:
        raise FaultsSettingError("GATEWAY_LOCAL_FAULTS: the DynamoDB faults' probabilities add up to more than 1")
    return rates


def _error(status: int, code: str, message: str, **extra: Any) -> _Answer:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
    return status, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code}, json.dumps(body).encode()


def _throttled() -> _Answer:
    return _error(400, "ProvisionedThroughputExceededException",
                  "The level of configured provisioned throughput for the table was exceeded. "
                  "Consider increasing your provisioning level with the UpdateTable API.")


def _internal() -> _Answer:
    return _error(500, "InternalServerError", "Internal server error")


@dataclass
class FaultCounts:
    throttled: int = 0
    errors: int = 0
    lost_answers: int = 0
    duplicates: int = 0
    token_replays: int = 0


@dataclass
class TransactionTokens:
    """DynamoDB's idempotency of `TransactWriteItems` by `ClientRequestToken` (10 minutes)."""

    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, tuple[float, str, _Answer]] = field(default_factory=dict)

    @staticmethod
    def _request_digest(params: dict[str, Any]) -> str:
        rest = {k: v for k, v in params.items() if k != "ClientRequestToken"}
        return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()

    def replay(self, body: bytes) -> tuple[str, str, _Answer | None] | None:
        """(token, digest, the answer to give instead of applying, or None to apply) for a
        transaction with a token; None for anything else."""
        try:
            params = json.loads(body)
        except ValueError:
            return None
        token = params.get("ClientRequestToken") if isinstance(params, dict) else None
        if not isinstance(token, str):
            return None
        now = self.clock()
        for old in [t for t, (at, _, _) in self._seen.items() if now - at > TOKEN_SECONDS]:
            del self._seen[old]
        digest = self._request_digest(params)
        seen = self._seen.get(token)
        if seen is None:
            return token, digest, None
        if seen[1] != digest:
            return token, digest, _error(400, "IdempotentParameterMismatchException",
                                         "The request uses the same client token as a previous, but non-identical "
                                         "request.")
        return token, digest, seen[2]

    def remember(self, token: str, digest: str, answered: _Answer) -> None:
        if answered[0] == 200:
            self._seen[token] = (self.clock(), digest, answered)


class Faults:
    """Called under the emulator's lock for each DynamoDB and SQS call of the runner's processes."""

    def __init__(self, rates: dict[str, float] | None = None, seed: int = 0):
        self.rates, self.random, self.counts = dict(rates or {}), random.Random(seed), FaultCounts()
        self.planned: list[tuple[str, str]] = []

    def plan(self, operation: str, fault: str) -> None:
        """The next `operation` call (e.g. "PutItem") meets `fault` ("throttle", "error",
        "lost_answer"), whatever the draws: a test's one fault at the one place it means. A planned
        throttle of a `TransactWriteItems` is its cancellation (`ThrottlingError`)."""
        self.planned.append((operation, fault))

    def _planned(self, operation: str) -> str | None:
        for index, (planned, fault) in enumerate(self.planned):
            if planned == operation:
                del self.planned[index]
                return fault
        return None

    @classmethod
    def from_environment(cls) -> Faults | None:
        text = os.environ.get("GATEWAY_LOCAL_FAULTS", "").strip()
        if not text:
            return None
        rates = parse(text)
        return cls(rates, int(os.environ.get("GATEWAY_LOCAL_FAULTS_SEED", "0"))) if any(rates.values()) else None

    def call(self, service: str, operation: str, body: bytes, apply: Callable[[], _Answer]) -> _Answer:
        if service == "AmazonSQS":
            if operation in ("SendMessage", "SendMessageBatch") and self._draw("sqs.duplicate"):
                answered = apply()
                if answered[0] == 200:
                    self.counts.duplicates += 1
                    apply()  # the second copy; the client sees the first send's answer
                return answered
            return apply()
        if operation not in _DYNAMODB_CALLS:
            return apply()
        planned = self._planned(operation)
        draw = self.random.random() if planned is None else {"throttle": 0.0, "error": 1.0, "lost_answer": 2.0}[planned]
        throttle = self.rates.get("dynamodb.throttle", 0.0) if planned is None else 0.5
        error = throttle + (self.rates.get("dynamodb.error", 0.0) if planned is None else 1.0)
        lost = error + ((self.rates.get("dynamodb.lost_answer", 0.0) if planned is None else 1.0)
                        if operation in _WRITES else 0.0)
        if draw < throttle:
            self.counts.throttled += 1
            if operation == "TransactWriteItems" and (planned == "throttle" or self.random.random() < 0.5):
                return _cancelled_for_throughput(body, self.random)
            return _throttled()
        if draw < error:
            self.counts.errors += 1
            return _internal()
        answered = apply()
        if draw < lost and answered[0] == 200:
            self.counts.lost_answers += 1
            return _internal()
        return answered

    def _draw(self, kind: str) -> bool:
        return self.random.random() < self.rates.get(kind, 0.0)


_THROUGHPUT = ("Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling "
               "your table or index so please try again shortly.")


def _cancelled_for_throughput(body: bytes, draws: random.Random) -> _Answer:
    # One reason per item of the transaction, in order: one item met the throttle, the others say
    # "None" (DynamoDB's word for an item that did not fail).
    try:
        count = max(len(json.loads(body).get("TransactItems", [])), 1)
    except (ValueError, AttributeError):
        count = 1
    reasons: list[dict[str, str]] = [{"Code": "None"} for _ in range(count)]
    reasons[draws.randrange(count)] = {"Code": "ThrottlingError", "Message": _THROUGHPUT}
    return _error(400, "TransactionCanceledException",
                  "Transaction cancelled, please refer cancellation reasons for specific reasons [ThrottlingError]",
                  CancellationReasons=reasons)
