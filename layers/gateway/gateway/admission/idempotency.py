"""Idempotent submits: a client's `Idempotency-Key` makes a retried submit answer what the first did.

A submit that timed out on the client's side (API Gateway's 29 s, a dropped connection) may have
created and billed its task; the client cannot know. With the same `Idempotency-Key` and the same
body, a retry within `WINDOW_SECONDS` gets the first answer (status and body) and is billed once;
the same key with another body, or while the first is still running, is a 409 in the route's
envelope. A submit that failed with a `GatewayError` charged nothing and forgets its key, so the
retry runs again.

The record lives in the accounts table under the API key that sent it (`pk` =
`IDEMPOTENCY#<key hash>`): one tenant's key never answers another's, and a key's records expire
with DynamoDB's TTL (`expires_ttl`) one window after they were written. The claim is one
conditional put, so two concurrent retries never both run. It carries a fresh `claim_id`: when
DynamoDB applied the put but its answer was lost, botocore's retry meets the claim itself
(`ConditionalCheckFailed`), and the stored `claim_id` says the claim is this request's own.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from gateway.auth import Principal
from gateway.errors import Conflict, GatewayError, InvalidRequest, shown
from gateway.observability import logger
from gateway.settings import get_settings
from gateway.store.aws import client

HEADER = "idempotency-key"
WINDOW_SECONDS = 24 * 3600
MAX_KEY_LENGTH = 255
#: An answer larger than this is not kept (a DynamoDB item holds 400 KB): an image answer with
#: base64 images. Its key still guards against a second charge: a retry is a 409 saying so.
MAX_KEPT_BYTES = 350_000
# A first run that never recorded its answer (its function was killed) frees its key after this.
_PENDING_SECONDS = 900


def key_from(headers: dict[str, str] | None) -> str | None:
    """The request's `Idempotency-Key` (any case), checked; None when the client sent none."""
    for name, value in (headers or {}).items():
        if name.lower() == HEADER and value is not None:
            if not value or len(value) > MAX_KEY_LENGTH or not value.isprintable() or not value.isascii():
                raise InvalidRequest(f"Idempotency-Key header: must be 1 to {MAX_KEY_LENGTH} printable ASCII "
                                     f"characters, got {shown(value)!r}", param="Idempotency-Key",
                                     code="invalid_idempotency_key")
            return value
    return None


def comparable_body(body: bytes, headers: Mapping[str, Any] | None) -> bytes:
    """The body a retry must match: a multipart form without its boundary, since a client's
    retry draws a new one (the parts are what must match)."""
    boundary = _multipart_boundary(headers)
    return body.replace(boundary.encode(), b"") if boundary else body


def _multipart_boundary(headers: Mapping[str, Any] | None) -> str:
    for name, value in (headers or {}).items():
        if name.lower() == "content-type" and "boundary=" in str(value):
            return str(value).partition("boundary=")[2].partition(";")[0].strip().strip('"')
    return ""


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _item_key(principal: Principal, route: str, key: str) -> dict[str, Any]:
    return {"pk": {"S": f"IDEMPOTENCY#{principal.key_hash}"}, "sk": {"S": f"{route}#{_digest(key)}"}}


def run_once(principal: Principal, route: str, key: str | None, body: str | bytes | None,
             run: Callable[[], tuple[int, Any]], *, now: float | None = None) -> tuple[int, Any, bool]:
    """`run()`'s (status, JSON body), or the one recorded for this key and body within the window
    (then the third value, replayed, is True)."""
    if key is None:
        return (*run(), False)
    now = time.time() if now is None else now
    table = get_settings().accounts_table
    item_key = _item_key(principal, route, key)
    body_hash = _digest(body or b"")
    dynamodb = client("dynamodb")
    claim_id = uuid.uuid4().hex
    try:
        dynamodb.put_item(
            TableName=table,
            Item={**item_key, "body_hash": {"S": body_hash}, "state": {"S": "pending"}, "claim_id": {"S": claim_id},
                  "claimed_at": {"N": str(int(now))}, "expires_ttl": {"N": str(int(now) + WINDOW_SECONDS)}},
            # A record past its window is free again, whether or not TTL has deleted it yet; a
            # pending one whose run died long ago too.
            ConditionExpression="attribute_not_exists(pk) OR expires_ttl < :now "
                                "OR (#state = :pending AND claimed_at < :stale)",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":now": {"N": str(int(now))}, ":pending": {"S": "pending"},
                                       ":stale": {"N": str(int(now) - _PENDING_SECONDS)}})
    except dynamodb.exceptions.ConditionalCheckFailedException:
        replayed = _recorded(dynamodb, table, item_key, body_hash, claim_id)
        if replayed is not None:
            return (*replayed, True)
    try:
        status, answer = run()
    except GatewayError:
        try:  # nothing was charged: a retry runs again (this claim only, never a later one's)
            dynamodb.delete_item(TableName=table, Key=item_key, ConditionExpression="claim_id = :mine",
                                 ExpressionAttributeValues={":mine": {"S": claim_id}})
        except Exception:  # gone already (a retried delete), or kept until stale: a retry answers 409
            logger.warning("idempotency claim not freed", extra={"route": route})
        raise
    except BaseException:
        # Unknown whether it was charged: the key stays claimed until it is stale, so a retry
        # answers 409 instead of possibly paying twice.
        raise
    recorded = json.dumps(answer, separators=(",", ":"))
    kept = len(recorded.encode()) <= MAX_KEPT_BYTES
    try:
        dynamodb.update_item(
            TableName=table, Key=item_key,
            UpdateExpression="SET #state = :done, answer_status = :status, answer = :answer",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":done": {"S": "done"}, ":status": {"N": str(status)},
                                       ":answer": {"S": recorded if kept else ""}})
    except Exception:
        # The request was served and billed: the client gets its answer; a retry then finds the
        # key pending (409) until it is stale, never a second charge.
        logger.exception("idempotency record not completed", extra={"route": route})
    return status, answer, False


def _recorded(dynamodb: Any, table: str, item_key: dict[str, Any], body_hash: str,
              claim_id: str) -> tuple[int, Any] | None:
    """The answer recorded under the key, or None when the claim found is this request's own."""
    item = dynamodb.get_item(TableName=table, Key=item_key, ConsistentRead=True).get("Item") or {}
    if item.get("claim_id", {}).get("S") == claim_id:
        return None  # the put was applied and its answer lost: botocore's retry met this claim
    if item.get("body_hash", {}).get("S") != body_hash:
        raise Conflict("Idempotency-Key was already used with another request body within 24 hours; "
                       "use a new key for a new request", param="Idempotency-Key", code="idempotency_key_reused")
    if item.get("state", {}).get("S") != "done":
        raise Conflict("a request with this Idempotency-Key is still being processed; retry later",
                       param="Idempotency-Key", code="idempotency_key_in_progress", headers={"Retry-After": "1"})
    if not item.get("answer", {}).get("S"):
        raise Conflict("a request with this Idempotency-Key was already served and billed; its answer was too "
                       f"large to keep (over {MAX_KEPT_BYTES} bytes), so it cannot be sent again",
                       param="Idempotency-Key", code="idempotency_answer_not_kept")
    return int(item["answer_status"]["N"]), json.loads(item["answer"]["S"])
