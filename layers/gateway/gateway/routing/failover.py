"""What a failed or served upstream attempt does to its channel, and the one failover walk.

The upstreams say what happened (`upstreams/errors.py`: an `UpstreamError` and whose fault it is)
and what the client is answered (`upstreams/verdict.py`); this module decides what follows for
the channel. Every failed attempt goes through `record_failure`, which tells the channel's health
(`routing/health.py`) what counts against it (`counts_against_channel`: a retryable failure, a
timeout, refused credentials or account) and whether the walk moves on to another channel.
`first_success` (and `first_success_async`) is the one failover walk over a request's channels
that text, token counts, images and task submits share.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.observability import logger
from gateway.routing import health
from gateway.upstreams.errors import UpstreamError, is_account
from gateway.upstreams.verdict import exhausted_error, relayed_error

if TYPE_CHECKING:
    from gateway.routing.channel import Channel

T = TypeVar("T")


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


def report_failure(channel: Channel, exc: object) -> None:
    """A failed attempt that counts against `channel` (a retryable error, a timeout, refused credentials)."""
    health.book().failed(channel.name, health.Failure.of(exc))


def report_success(channel: Channel) -> None:
    """A served request: brings back a channel that was cooling (writes nothing otherwise)."""
    health.book().succeeded(channel.name)


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
        if health.book().needs_success_write(channel.name):
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
