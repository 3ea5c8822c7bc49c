"""The one failure every upstream client and task adapter raises, and the rules that make it.

An adapter or client never raises a client-facing `GatewayError`: it raises `UpstreamError`
saying what happened (the status, a message without the upstream key, whether another channel
may be tried), and `gateway.upstreams.verdict` alone decides what the client is answered.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx

from gateway.errors import GatewayError


def retryable_status(status: int) -> bool:
    """Whether an upstream status may be asked again, of another channel: a timeout (408), a
    conflict (409), a rate limit (429) or the upstream's own fault (5xx)."""
    return status in (408, 409, 429) or status >= 500


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    if value := headers.get("retry-after-ms"):
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


class UpstreamError(Exception):
    """The upstream did not give a usable answer.

    `status`: the upstream's HTTP status, None when no answer came. `retryable`: another channel
    may be tried (by default, from the status by `retryable_status`). `timed_out`: sent but not
    answered in time (by default, a 504), so the verdict is a 504 rather than a 502. `body`: the
    upstream's error object, redacted, for a dialect that relays it. The message never holds
    the upstream key.
    """

    def __init__(self, status: int | None, message: str, retryable: bool | None = None,
                 retry_after: float | None = None, body: dict[str, Any] | None = None, *,
                 timed_out: bool | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.retryable = (status is None or retryable_status(status)) if retryable is None else retryable
        self.retry_after = retry_after
        self.body = body
        self.timed_out = (status == 504) if timed_out is None else timed_out

    def __repr__(self) -> str:
        return f"UpstreamError(status={self.status!r}, message={self.message!r}, retryable={self.retryable!r})"

    def to_gateway_error(self) -> GatewayError:
        """The error the gateway answers once no other channel can be tried."""
        from gateway.upstreams.verdict import exhausted_error, relayed_error

        return exhausted_error([self]) if self.retryable else relayed_error(self)
