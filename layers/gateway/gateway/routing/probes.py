"""The sweeper's probes: one cheap call per cooled-down channel whose period has ended.

A text channel is asked for its model list (`UpstreamClient.probe`); a task channel for a task
that does not exist (its family adapter's poll of `PROBE_TASK_ID`): an upstream that answers
(even 404) with the channel's credentials accepted works. A probe is never billed to anyone. What
counts as a failure is what counts against a channel on a request (`verdict.counts_against_channel`):
a retryable status, a timeout, no answer, refused credentials. The outcome goes to the channel's
health (`HealthBook.probed`): back to healthy, or cooled down again for longer.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gateway.observability import logger
from gateway.routing import health
from gateway.routing.channels import Catalog, Channel, get_catalog
from gateway.routing.outbound import run, sync_client
from gateway.upstreams.base import Timeouts
from gateway.upstreams.errors import UpstreamError

PROBE_TASK_ID = "gateway-health-probe"
#: A probe is one short call; the sweeper runs several at once.
PROBE_TIMEOUTS = Timeouts(connect=3.0, first_byte=10.0, idle=10.0, total=10.0)
_PARALLEL = 8


def probe(channel: Channel, sender: Any = sync_client) -> health.Failure | None:
    """What one probe of `channel` met that counts against it, or None when it works."""
    from gateway.upstreams.clients import TEXT_CLIENTS, client_for
    from gateway.upstreams.verdict import counts_against_channel

    try:
        if channel.protocol in TEXT_CLIENTS:
            run(lambda http: client_for(channel, http, PROBE_TIMEOUTS).probe())
        else:
            from gateway.tasks.adapter import poll
            from gateway.tasks.families import family_of

            poll(sender, family_of(channel.protocol).adapter_for(channel), channel.base_url, channel.api_key,
                 PROBE_TASK_ID)
    except UpstreamError as exc:
        return health.Failure.of(exc) if counts_against_channel(exc) else None
    except Exception as exc:  # noqa: BLE001 - an answer the adapter cannot read is still an answer
        logger.debug("probe answer not understood", extra={"channel": channel.name, "error": repr(exc)})
    return None


def sweep(*, catalog: Catalog | None = None, book: health.HealthBook | None = None,
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
            outcomes = list(pool.map(lambda channel: probe(channel, sender), due))
        for channel, failure in zip(due, outcomes, strict=True):
            try:
                if book.probed(channel.name, failure).state == health.HEALTHY:
                    counts["recovered"] += 1
            except Exception:
                logger.exception("recording a probe failed", extra={"channel": channel.name})
    health.report_gauges([c.name for c in catalog.channels], book)
    return counts
