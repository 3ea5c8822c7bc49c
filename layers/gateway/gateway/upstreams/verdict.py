"""What the gateway answers when upstream attempts fail: one rule for every family.

Works on the `UpstreamError` of any client (text or images) and on the task adapters'
`UpstreamRejected`: each carries `status`, `message`, `retryable`, `retry_after` and `timed_out`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from gateway.channels import report_failure
from gateway.errors import (GatewayError, InvalidRequest, NotFound, PayloadTooLarge, RateLimited, UpstreamFailed,
                            UpstreamTimeout)
from gateway.observability import logger

# What an upstream says about the channel's own account, not about the client's request.
CHANNEL_ACCOUNT_STATUSES = (401, 402, 403, 407)


def relayed_error(exc: Any) -> GatewayError:
    """The upstream's final word on the request (a non-retryable failure), in our own error kinds,
    carrying the upstream's own error object for a dialect that relays it."""
    error = _relayed_kind(exc)
    error.upstream = getattr(exc, "body", None)
    return error


def _relayed_kind(exc: Any) -> GatewayError:
    status = exc.status
    if exc.timed_out:  # sent but unanswered: asking again could start the work twice
        return UpstreamTimeout(exc.message)
    if status is None or status < 400:  # cut off mid-request, or an answer of the wrong shape
        return UpstreamFailed(exc.message)
    if status in CHANNEL_ACCOUNT_STATUSES:
        # Relaying a 401 would tell the client its own key is wrong.
        return UpstreamFailed(f"{exc.message} (the upstream refused the gateway's own credentials; "
                              "this is not a problem with your key)")
    if status == 404:
        return NotFound(exc.message, code="upstream_not_found")
    if status == 413:
        return PayloadTooLarge(exc.message)
    if status >= 500:
        return UpstreamFailed(exc.message)
    return InvalidRequest(exc.message, status=status, code="upstream_rejected")


def record_failure(channel: Any, exc: Any, failures: list[Any]) -> None:
    """One failed attempt on `channel`: a verdict on the request is raised at once; a failure
    worth retrying sets the channel aside for a while and joins `failures`."""
    if not exc.retryable:
        raise relayed_error(exc) from None
    report_failure(channel)
    logger.warning("upstream attempt failed", extra={"channel": channel.name, "status": exc.status,
                                                     "error": exc.message})
    failures.append(exc)


def exhausted_error(failures: Sequence[Any], no_attempt: str = "no upstream could be tried") -> GatewayError:
    """The answer once every channel was tried and each failed in a way worth retrying."""
    if not failures:
        return UpstreamTimeout(no_attempt)
    summary = f"{len(failures)} upstream attempt{'s' if len(failures) > 1 else ''} failed; last: {failures[-1].message}"
    if all(f.status == 429 for f in failures):
        waits = [f.retry_after for f in failures if f.retry_after is not None]
        headers = {"Retry-After": str(max(1, math.ceil(min(waits))))} if waits else None
        return RateLimited(f"the upstreams are rate limited: {summary}", headers=headers)
    if failures[-1].timed_out:
        return UpstreamTimeout(summary)
    return UpstreamFailed(summary)
