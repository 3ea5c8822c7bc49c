"""Results the gateway keeps for a task family whose upstream's own result links cannot be handed
to a client: delta's `video.uri` answers only with the channel's key (new-api's
`controller/video_proxy.go` fetches it with `x-goog-api-key` for the same reason), epsilon's
content is behind the channel's key, beta's sample expires in ten minutes.

When such a task succeeds, the poller copies each result into the results bucket
(`store/results`, kept `KEPT_SECONDS`), before the task is written succeeded; a copy that fails
for now is retried by the next poll, a result the upstream no longer serves fails the task
(refunded: nobody could ever download it). The client gets a link of the gateway's own, signed
(`tasks/links`) and valid as long as the copy is kept; the route behind it answers a redirect to
a presigned S3 link of a few minutes (`ResultsStore.presigned`), so the bytes never pass through
a Lambda answer (6 MB) and no link ever carries a channel key.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from gateway.errors import GatewayError, NotFound
from gateway.store.results import KEPT_SECONDS, KeptResult, ResultsStore
from gateway.tasks import links
from gateway.tasks.adapter import Sender, send
from gateway.upstreams.errors import UpstreamError

if TYPE_CHECKING:
    from gateway.routing.channel import Channel
    from gateway.store.tasks import Task

#: Redirects followed when fetching a result (a download endpoint may answer with one).
MAX_REDIRECTS = 5
# What an upstream answers for a result it no longer serves (or never will, to this request).
_GONE = (401, 403, 404, 410)


class Gone(GatewayError):
    status, kind, code = 410, "not_found", "result_gone"


def key(family: str, task_id: str, index: int | str) -> str:
    return ResultsStore.key(family, task_id, index)  # type: ignore[arg-type]


def fetch(http: Sender, url: str, channel: Channel | None = None,
          key_headers: Mapping[str, str] | None = None) -> httpx.Response | None:
    """The upstream's bytes at `url`, or None once it no longer serves them. The channel's key
    (`key_headers`) goes with the request only to a URL the channel vouches for
    (`Channel.allows_poll_url`: its base URL's origin, whatever the scheme; https on its host; a
    listed one), on every redirect hop too; anywhere else the URL must carry its own signature,
    and must pass the callbacks' address check (no private, loopback or metadata address:
    `callbacks.check_url`). An `UpstreamError` (retryable) for transport trouble or an upstream
    failure; not retryable for an unsafe address."""
    from gateway.tasks.callbacks import UnsafeCallback, check_url

    for _ in range(MAX_REDIRECTS + 1):
        vouched = channel is not None and channel.allows_poll_url(url)
        if not vouched:  # an address nobody vouched for must not make the gateway read its own network
            try:
                check_url(url)
            except UnsafeCallback as exc:
                raise UpstreamError(502, f"the upstream named a result address the gateway does not read: {exc}",
                                    retryable=False) from None
        headers = dict(key_headers or {}) if vouched and key_headers is not None else {}
        answer = send(http, httpx.Request("GET", url, headers=headers), repeatable=True)
        location = answer.headers.get("location")
        if answer.is_redirect and location:
            url = str(httpx.URL(url).join(location))
            continue
        if answer.status_code in _GONE:
            return None
        if not answer.is_success:
            raise UpstreamError(502, f"the upstream answered {answer.status_code} for the result", retryable=True)
        return answer
    raise UpstreamError(502, f"the upstream redirected the result more than {MAX_REDIRECTS} times", retryable=True)


def media_type_of(answer: httpx.Response, default: str) -> str:
    media_type = answer.headers.get("content-type", "").split(";")[0].strip()
    return media_type if "/" in media_type and media_type != "application/octet-stream" else default


def put(family: str, task_id: str, index: int | str, result: KeptResult) -> None:
    store = ResultsStore()
    store.put(key(family, task_id, index), result)


def link(base_url: str, path: str, task: Task, *, now: float | None = None) -> str:
    """The gateway's signed link to a kept result at `path`: valid until the copy is removed
    (`KEPT_SECONDS` after the task ended), however late the query that hands it out."""
    now = time.time() if now is None else now
    # The copy was written just before the task was (seconds at most): a minute's margin keeps
    # the link from outliving it.
    ends = int(task.completed_at or now) + KEPT_SECONDS - 60
    return links.sign(base_url, path, seconds=max(ends - int(now), 1), now=now)


def presigned(family: str, task_id: str, index: int | str, what: str) -> str:
    """A few minutes' S3 link to a kept result; `Gone` once the bucket has removed it."""
    store = ResultsStore()
    stored = key(family, task_id, index)
    if not store.exists(stored):
        raise Gone(f"the {what} of task '{task_id}' is gone: the gateway keeps results one day")
    return store.presigned(stored)


def verified_task(path: str, task_id: str, expires: str | None, signature: str | None, family: str) -> Task:
    """The succeeded task a signed link names (403 for a bad or expired link, 404 for no such result)."""
    from gateway.tasks import engine

    links.verify(path, expires, signature)
    task = engine.tasks().get(task_id)
    if task is None or task.family != family or task.status != "succeeded" or not task.result_urls:
        raise NotFound(f"no result for task '{task_id}'", code="result_not_found")
    return task
