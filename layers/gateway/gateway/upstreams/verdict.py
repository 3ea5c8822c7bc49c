"""What the client is answered when upstream attempts fail: one rule for every family.

Works on the `UpstreamError` (`upstreams/errors.py`) that every client and task adapter raises:
it carries `status`, `message`, `retryable`, `retry_after`, `timed_out` and whose `fault` it is,
read from the provider's own error table beside each adapter (a revoked Gemini key is a 400 that
is the channel's, not the client's). `relayed_error` is the upstream's final word on a request in
the gateway's own error kinds; `exhausted_error` the answer once every channel was tried. What a
failure does to the channel, and the failover walk over a request's channels, are routing's
(`routing/failover.py`), which calls these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gateway.errors import (
    GatewayError,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    UpstreamFailed,
    UpstreamTimeout,
)
from gateway.upstreams.errors import UpstreamError, is_account

_ACCOUNT_NOTE = "the upstream refused the gateway's own credentials; this is not a problem with your key"


def _shown(exc: Any) -> str:
    """What the client may read of a failure: never the upstream's words about the channel's key."""
    return exc.shown if isinstance(exc, UpstreamError) else (
        f"{exc.message} ({_ACCOUNT_NOTE})" if is_account(exc) else exc.message)


def relayed_error(exc: Any) -> GatewayError:
    """The upstream's final word on the request (a non-retryable failure), in our own error kinds,
    carrying the upstream's own error object for a dialect that relays it."""
    error = _relayed_kind(exc)
    # The upstream's own object about the channel's key is never shown to the client.
    error.upstream = None if is_account(exc) else getattr(exc, "body", None)
    return error


def _relayed_kind(exc: Any) -> GatewayError:
    status = exc.status
    if exc.timed_out:  # sent but unanswered: asking again could start the work twice
        return UpstreamTimeout(exc.message)
    if status is None or status < 400:  # cut off mid-request, or an answer of the wrong shape
        return UpstreamFailed(exc.message)
    if is_account(exc):
        # Relaying a 401 (or Gemini's 400 API_KEY_INVALID) would tell the client its own key is wrong.
        return UpstreamFailed(_shown(exc))
    if status == 404:
        return NotFound(exc.message, code="upstream_not_found")
    if status == 413:
        return PayloadTooLarge(exc.message)
    if status >= 500:
        return UpstreamFailed(exc.message)
    return InvalidRequest(exc.message, status=status, code="upstream_rejected")


def exhausted_error(failures: Sequence[Any], no_attempt: str = "no upstream could be tried") -> GatewayError:
    """The answer once every channel was tried and each failed in a way worth retrying."""
    if not failures:
        return UpstreamTimeout(no_attempt)
    summary = f"{len(failures)} upstream attempt{'s' if len(failures) > 1 else ''} failed; last: {_shown(failures[-1])}"
    if all(f.status == 429 and not is_account(f) for f in failures):  # Kling's 429 1101 is a bill, not a rate
        waits = [f.retry_after for f in failures if f.retry_after is not None]
        headers = {"Retry-After": str(max(1, math.ceil(min(waits))))} if waits else None
        return RateLimited(f"the upstreams are rate limited: {summary}", headers=headers)
    if failures[-1].timed_out:
        return UpstreamTimeout(summary)
    if all(is_account(f) for f in failures):
        return UpstreamFailed(summary if isinstance(failures[-1], UpstreamError) else f"{summary} ({_ACCOUNT_NOTE})")
    return UpstreamFailed(summary)


def final_error(exc: UpstreamError) -> GatewayError:
    """The error the gateway answers for `exc` once no other channel can be tried."""
    return exhausted_error([exc]) if exc.retryable else relayed_error(exc)
