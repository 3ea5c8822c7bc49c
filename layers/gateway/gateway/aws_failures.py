"""What an AWS call's failure says, from botocore's exceptions alone: whether it passes with time
(`passing_failure`: asked again later, it may go through; a request answers 503 with Retry-After,
`observability.unexpected`), and a cancelled transaction's reasons (`cancellation_reasons`,
`cancelled_to_ask_again`, which `store.aws.transact` asks again)."""

from __future__ import annotations

# Error codes of an AWS call that time cures: those botocore's standard retry mode retries as
# throttling or transient (botocore/retries/standard.py, ThrottledRetryableChecker and
# TransientRetryableChecker). A cancelled transaction's reasons: `ASK_AGAIN`.
_THROTTLED_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException", "TransactionInProgressException",
    "RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown",
    "PriorRequestNotComplete", "EC2ThrottledException", "RequestTimeout", "RequestTimeoutException",
})


def passing_failure(exc: BaseException) -> bool:
    """Whether `exc` is an AWS call that still failed, once botocore's retries ran out, for a reason
    that passes with time: throttled, the service's own 5xx, the connection lost or timed out, or a
    transaction cancelled for throughput or a concurrent one. Asking again later is the answer to
    those, not a report of a fault of ours."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, (ConnectionError, HTTPClientError)):
        return True
    if not isinstance(exc, ClientError):
        return False
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    code = exc.response.get("Error", {}).get("Code", "")
    if status >= 500 or status == 429 or code in _THROTTLED_CODES:
        return True
    return cancelled_to_ask_again(exc)


# The reasons DynamoDB cancels a transaction for that pass (TransactWriteItems' API reference): a
# conflict with another transaction on one of its items, and throughput. botocore retries neither.
ASK_AGAIN = frozenset({"TransactionConflict", "ThrottlingError"})


def cancelled_to_ask_again(exc: BaseException) -> bool:
    """Whether `exc` is a transaction DynamoDB cancelled only for a conflict or for throughput
    (`ASK_AGAIN`; an item with nothing wrong says `None`): it applied nothing, and asked again it
    may go through."""
    reasons = set(cancellation_reasons(exc)) - {"", "None"}
    return bool(reasons) and reasons <= ASK_AGAIN


def cancellation_reasons(exc: BaseException) -> list[str]:
    """The codes of a cancelled transaction's items, in their order (empty for any other error)."""
    return [str(r.get("Code") or "") for r in getattr(exc, "response", {}).get("CancellationReasons", [])]
