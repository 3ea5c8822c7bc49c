"""The channel probes as the gateway runs them: routing's probes (`routing/probes.py`) with a
task channel asked by its own family's adapter.

A task channel is probed by a poll of a task that does not exist (`PROBE_TASK_ID`): never billed,
never a task. Routing knows no task family, so it is handed this poll; the sweeper
(`functions/task_sweeper`) and an operator's channel test (`api/channels.test_channel`) call here.
"""

from __future__ import annotations

from typing import Any

from gateway.routing import health, probes
from gateway.routing.catalog import Catalog
from gateway.routing.channel import Channel
from gateway.routing.outbound import sync_client
from gateway.tasks.adapter import poll
from gateway.tasks.families import family_of

PROBE_TASK_ID = "gateway-health-probe"


def poll_unknown_task(channel: Channel, sender: Any) -> None:
    """A task channel's probe: its family adapter's poll of `PROBE_TASK_ID` (an `UpstreamError`
    when the upstream did not answer it as a task it does not know)."""
    poll(sender, family_of(channel.protocol).adapter_for(channel), channel.base_url, channel.api_key,
         PROBE_TASK_ID)


def probe(channel: Channel, sender: Any = sync_client) -> health.Failure | None:
    """What one probe of `channel` met that counts against it, or None when it works."""
    return probes.probe(channel, sender, poll_task=poll_unknown_task)


def check(channel: Channel, sender: Any = sync_client) -> tuple[health.Failure | None, str, float]:
    """One probe of `channel`: (what counts against it or None, what the upstream said, seconds taken)."""
    return probes.check(channel, sender, poll_task=poll_unknown_task)


def sweep(*, catalog: Catalog | None = None, book: health.HealthBook | None = None,
          sender: Any = sync_client) -> dict[str, int]:
    """Probes every cooling channel whose period has ended; how many were probed and how many came back."""
    return probes.sweep(poll_task=poll_unknown_task, catalog=catalog, book=book, sender=sender)
