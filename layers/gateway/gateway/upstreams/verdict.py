"""What the gateway answers when upstream attempts fail: one rule for every family.

Works on the `UpstreamError` (`upstreams/errors.py`) that every client and task adapter raises:
it carries `status`, `message`, `retryable`, `retry_after` and `timed_out`. `first_success` (and
`first_success_async`) is the one failover walk over a request's channels that text, images and
task submits share. Every failed attempt goes through `record_failure`, which tells the channel's
health (`routing/health.py`) what counts against it: a retryable failure, a timeout, refused
credentials or account. Whose fault an answer is comes from the provider's own error table beside
each adapter (`UpstreamError.fault`, `upstreams/errors.py`): a revoked Gemini key is a 400 that is
the channel's, not the client's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from gateway.errors import (
    GatewayError,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    UpstreamFailed,
    UpstreamTimeout,
)
from gateway.observability import logger
from gateway.routing.channels import report_failure, report_success
from gateway.routing.health import book
from gateway.upstreams.errors import UpstreamError, is_account

T = TypeVar("T")
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


def counts_against_channel(exc: Any) -> bool:
    """Whether a failure says something about the channel (not about the client's request): one
    worth retrying elsewhere, a timeout, or the upstream refusing the channel's own credentials or account."""
    return bool(exc.retryable or exc.timed_out or is_account(exc))


def record_failure(channel: Any, exc: Any, failures: list[Any]) -> None:
    """One failed attempt on `channel`: what counts against the channel goes to its health; a
    failure another channel may do better (retryable, or refused credentials: nothing was done)
    joins `failures` and the walk moves on; any other is the verdict on the request, raised."""
    if counts_against_channel(exc):
        report_failure(channel, exc)
    if not (exc.retryable or is_account(exc)):
        raise relayed_error(exc) from None
    logger.warning("upstream attempt failed", extra={"channel": channel.name, "status": exc.status,
                                                     "fault": getattr(exc, "fault", None), "error": exc.message})
    failures.append(exc)


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


async def _inline(call: Callable[[], None]) -> None:
    call()


async def first_success_async(channels: Sequence[Any], attempt: Callable[[Any], Awaitable[T]], *,
                              can_try: Callable[[], bool] = lambda: True,
                              no_attempt: str = "no upstream could be tried",
                              offload: Callable[[Callable[[], None]], Awaitable[None]] = _inline) -> tuple[T, Any]:
    """Tries `attempt(channel)` on each channel in order until one answers; that answer and its
    channel. A failure worth retrying moves on (while `can_try()`); any other is the verdict.
    `offload` runs the health bookkeeping that may write to the store (an event loop passes
    `anyio.to_thread.run_sync`, so a write never blocks it); a success on a healthy channel has none."""
    failures: list[UpstreamError] = []
    for channel in channels:
        if not can_try():
            break
        try:
            answer = await attempt(channel)
        except UpstreamError as exc:
            await offload(functools.partial(record_failure, channel, exc, failures))
            continue
        if book().needs_success_write(channel.name):
            await offload(functools.partial(report_success, channel))
        return answer, channel
    raise exhausted_error(failures, no_attempt)


def first_success(channels: Sequence[Any], attempt: Callable[[Any], T], *,
                  can_try: Callable[[], bool] = lambda: True,
                  no_attempt: str = "no upstream could be tried") -> tuple[T, Any]:
    """`first_success_async` for a synchronous `attempt`."""
    async def now(channel: Any) -> T:
        return attempt(channel)

    # With attempts that never suspend, the walk runs to its end in one step: no event loop needed.
    walk = first_success_async(channels, now, can_try=can_try, no_attempt=no_attempt)
    try:
        walk.send(None)
    except StopIteration as done:
        return done.value
    walk.close()
    raise RuntimeError("a synchronous failover attempt suspended")
