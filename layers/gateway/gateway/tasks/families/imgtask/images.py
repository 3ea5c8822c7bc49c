"""The imgtask family's images as its upstream serves them: read through the image link the
upstream names (each redirect checked first), and kept in the results bucket as the poller first
sees a task finished (`ImgtaskFamily.poll_upstream`), so its `imageUrl` outlives the upstream's link.
"""

from __future__ import annotations

from typing import Any

import httpx

from gateway.imagetypes import IMAGE_MEDIA_TYPES, detect_image_type
from gateway.store.results import KeptResult, ResultsStore
from gateway.store.tasks import Task
from gateway.tasks import kept
from gateway.tasks.adapter import Sender, TaskSnapshot, timed
from gateway.tasks.callbacks import CallbackFailed, UnsafeCallback, check_url
from gateway.tasks.families.imgtask.adapter import ImgtaskAdapter
from gateway.upstreams.errors import UpstreamError

_ADAPTER = ImgtaskAdapter()
MAX_REDIRECTS = 3


def read_image_at(http: Sender, channel: Any, url: str) -> httpx.Response:
    """GETs the upstream's image link, following a few redirects, each checked first: an
    upstream's link must not make the gateway read its own network."""
    for _ in range(MAX_REDIRECTS + 1):
        check_url(url)
        answer = http.send(timed(_ADAPTER.build_image(channel.base_url, channel.api_key, url)))
        if not answer.is_redirect:
            return answer
        url = str(answer.next_request.url) if answer.next_request else ""
    raise UpstreamError(502, f"the image link redirected more than {MAX_REDIRECTS} times")


def keep_image(http: Sender, channel: Any, task: Task, snapshot: TaskSnapshot) -> TaskSnapshot | UpstreamError:
    """Copies a task's image into the results bucket as the poller first sees it finished, so its
    `imageUrl` serves it (any size, by a presigned redirect) after the upstream's own link dies.
    A read that fails for now is retried by the next poll; an image the upstream does not serve,
    or at an address the gateway does not read, is not kept (the route says why when asked)."""
    if not ResultsStore().enabled or not snapshot.result_urls:
        return snapshot
    try:
        answer = read_image_at(http, channel, snapshot.result_urls[0])
    except UnsafeCallback:
        return snapshot
    except (UpstreamError, CallbackFailed, httpx.HTTPError) as exc:
        return UpstreamError(502, f"the image could not be read from the upstream: {type(exc).__name__}",
                             retryable=True)
    kind = detect_image_type(answer.content[:64]) if answer.is_success else None
    if kind is None:
        return snapshot
    kept.put(task.family, task.task_id, 0, KeptResult(answer.content, IMAGE_MEDIA_TYPES[kind]))
    return snapshot
