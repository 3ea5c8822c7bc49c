"""The probes of channels: one cheap call per cooled-down channel whose period has ended.

A text channel is asked for its model list (`UpstreamClient.probe`); a task channel for a task
that does not exist, by its family's adapter: a call only the tasks package can make, handed in
as `poll_task` (`tasks/probes.py` binds it: what the sweeper and an operator's channel test call).
An upstream that answers (even 404) with the channel's credentials accepted works. A probe is
never billed to anyone. What counts as a failure is what counts against a channel on a request
(`failover.counts_against_channel`): a retryable status, a timeout, no answer, refused
credentials. The outcome goes to the channel's health (`HealthBook.probed`): back to healthy, or
cooled down again for longer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gateway.observability import logger
from gateway.routing import health
from gateway.routing.catalog import Catalog
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.routing.failover import counts_against_channel
from gateway.routing.outbound import run, sync_client
from gateway.upstreams.base import Timeouts
from gateway.upstreams.errors import UpstreamError

#: A task channel's probe: its family adapter's poll of a task that does not exist, with `sender`
#: (raises the `UpstreamError` the poll met).
TaskPoll = Callable[[Channel, Any], object]
#: A probe is one short call; the sweeper runs several at once.
PROBE_TIMEOUTS = Timeouts(connect=3.0, first_byte=10.0, idle=10.0, total=10.0)
_PARALLEL = 8


def _exchange(channel: Channel, sender: Any, poll_task: TaskPoll) -> str:
    """The probe's one call; what the upstream answered, in a few words (an `UpstreamError` when
    it failed)."""
    from gateway.upstreams.clients import TEXT_CLIENTS, client_for

    if channel.protocol in TEXT_CLIENTS:
        async def listed(http: Any) -> Any:
            upstream = client_for(channel, http, PROBE_TIMEOUTS)
            return await upstream.call(upstream.probe_target(), method="GET")

        return _models_said(run(listed))
    try:
        poll_task(channel, sender)
    except UpstreamError as exc:
        if counts_against_channel(exc):
            raise
        return f"asked for a task that does not exist, the upstream answered {exc.status or 'no'}: " \
               f"{str(exc.message)[:200]}"
    return "asked for a task that does not exist, the upstream answered it"


def _models_said(answer: Any) -> str:
    """A model list (openai and anthropic: `data[].id`; content generation: `models[].name`), in a line."""
    listed = []
    if isinstance(answer, dict):
        for entry in answer.get("data") or answer.get("models") or []:
            if isinstance(entry, dict):
                listed.append(str(entry.get("id") or entry.get("name") or "").removeprefix("models/"))
    if not listed:
        return "the model list answered, listing no model"
    shown = ", ".join(listed[:5]) + (", ..." if len(listed) > 5 else "")
    return f"the model list answered: {len(listed)} model{'s' if len(listed) != 1 else ''} ({shown})"


def probe(channel: Channel, sender: Any = sync_client, *, poll_task: TaskPoll) -> health.Failure | None:
    """What one probe of `channel` met that counts against it, or None when it works."""
    return check(channel, sender, poll_task=poll_task)[0]


def _said(status: int | None, message: str) -> str:
    """What the upstream answered, its status said once (an error's own message often starts with
    the same words: "upstream answered 429")."""
    head = f"the upstream answered {status or 'nothing'}"
    detail = re.sub(rf"^(the )?upstream answered {status or 'nothing'}\W*", "", message.strip(), flags=re.I)
    return f"{head}: {detail[:300]}" if detail else head


def check(channel: Channel, sender: Any = sync_client, *,
          poll_task: TaskPoll) -> tuple[health.Failure | None, str, float]:
    """One probe of `channel`: (what counts against it or None, what the upstream said, seconds
    taken). An operator's test (`GET /api/channel/test/{id}`) is this call."""
    started = time.perf_counter()
    try:
        said = _exchange(channel, sender, poll_task)
    except UpstreamError as exc:
        failure = health.Failure.of(exc) if counts_against_channel(exc) else None
        said = _said(exc.status, str(exc.message))
        return failure, said, time.perf_counter() - started
    except Exception as exc:  # noqa: BLE001 - an answer the adapter cannot read is still an answer
        logger.debug("probe answer not understood", extra={"channel": channel.name, "error": repr(exc)})
        said = f"the upstream answered something the gateway could not read ({type(exc).__name__})"
    return None, said, time.perf_counter() - started


def sweep(*, poll_task: TaskPoll, catalog: Catalog | None = None, book: health.HealthBook | None = None,
          sender: Any = sync_client) -> dict[str, int]:
    """Probes every cooling channel whose period has ended (at once, a few at a time), records
    each outcome, and writes every channel's gauge. How many were probed and how many came back."""
    catalog = catalog or get_catalog()
    book = book or health.book()
    known = book.refresh()
    now = book.clock()
    due = [c for c in catalog.channels if (known.get(c.name) or health.ChannelHealth(c.name)).probe_due(now)]
    counts = {"probed": len(due), "recovered": 0}
    if due:
        with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(due)), thread_name_prefix="probe") as pool:
            outcomes = list(pool.map(lambda channel: probe(channel, sender, poll_task=poll_task), due))
        for channel, failure in zip(due, outcomes, strict=True):
            try:
                if book.probed(channel.name, failure).state == health.HEALTHY:
                    counts["recovered"] += 1
            except Exception:
                logger.exception("recording a probe failed", extra={"channel": channel.name})
    health.report_gauges([c.name for c in catalog.channels], book)
    return counts
