"""The one shape every task family's upstream adapter has (`tasks/families/<name>/adapter.py`).

An adapter is pure: it builds an `httpx.Request` and parses an `httpx.Response`; the caller
sends it with whatever client (and transport) it holds. So an adapter is four functions and a
status table, and `send` below (with `submit` / `poll` over it) is the only code that sends one. Every
failure is a `gateway.upstreams.errors.UpstreamError`, never a client-facing error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from gateway.upstreams.errors import ErrorTable, UpstreamError

#: Submits and polls of a task are quick upstream calls (the work happens later, upstream).
UPSTREAM_TIMEOUT = httpx.Timeout(10.0, connect=3.0)

#: The gateway's own task states, for its bookkeeping (upstreams.md).
UNIFIED = ("submitted", "queued", "in_progress", "succeeded", "failed", "cancelled")
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})



@dataclass
class InlineResult:
    """A result the upstream sent as bytes instead of a link; the engine must store it."""

    mime_type: str
    data: bytes


@dataclass
class TaskSnapshot:
    """What one upstream poll says."""

    status: str  # one of UNIFIED
    upstream_status: str  # the upstream's own word
    progress: int | None  # 0..100
    result_urls: list[str]
    error: str | None
    duration: str | None  # seconds as a string, when known
    raw: dict  # the upstream JSON, for debugging (never returned to clients; inline bytes elided)
    inline_results: list[InlineResult] = field(default_factory=list)
    #: What the family's answers show beyond the fields above (stored in the task's `details`,
    #: merged over what earlier polls said): an upstream's result objects, buttons, times.
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass
class Accepted:
    """What an upstream says when it takes a task."""

    upstream_task_id: str
    #: Where to poll it when the upstream names a URL of its own (checked by the family).
    poll_url: str | None = None
    #: Family fields the answers show from the start (stored in the task's `details`).
    details: dict[str, Any] = field(default_factory=dict)


class Sender(Protocol):
    """What sends a built request: the shared `outbound.sync_client`, or any `httpx.Client`."""

    def send(self, request: httpx.Request) -> httpx.Response: ...


class TaskAdapter(Protocol):
    def build_submit(self, base_url: str, api_key: str, upstream_model: str, request: dict) -> httpx.Request: ...

    def parse_submit(self, response: httpx.Response) -> str: ...

    def build_poll(self, base_url: str, api_key: str, upstream_task_id: str) -> httpx.Request: ...

    def parse_poll(self, response: httpx.Response) -> TaskSnapshot: ...


def join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path


def read_json(response: httpx.Response, error_text: Callable[[Any], str | None], *,
              retry_unreadable: bool, errors: ErrorTable | None = None) -> dict:
    """The JSON object of a 2xx answer, or UpstreamError carrying the upstream's own message.

    `retry_unreadable`: whether a 2xx that is not a JSON object may be asked again. A submit
    must not be (the task may exist upstream, and a second one would be paid twice); a poll may.
    `errors`: the family's error table (`families/<name>/errors.py`): whose fault a refusal is,
    by the provider's own code, not only its status.
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    if not response.is_success:
        message = (error_text(body) if body is not None else None) or response.text[:300] or response.reason_phrase
        if errors is not None:
            raise errors.error(response.status_code, message, body)
        raise UpstreamError(response.status_code, message)
    if not isinstance(body, dict):
        raise UpstreamError(502, f"upstream answered {response.status_code} without a JSON object",
                               retryable=retry_unreadable)
    return body


def object_at(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The JSON object under `key`, or an empty one when it is missing or not an object."""
    value = body.get(key)
    return value if isinstance(value, dict) else {}


def timed(request: httpx.Request, timeout: httpx.Timeout = UPSTREAM_TIMEOUT) -> httpx.Request:
    """`request` with its timeout (a request built by hand carries none, so a client would wait forever)."""
    request.extensions["timeout"] = timeout.as_dict()
    return request


def send(client: Sender, request: httpx.Request, *, repeatable: bool) -> httpx.Response:
    """Sends one upstream request with its timeout; transport trouble is an UpstreamError. A request
    that never connected may always be tried again; one that may have reached the upstream only
    when it is `repeatable` (a poll), never a submit: the task may exist upstream, and a second is
    paid twice."""
    try:
        return client.send(timed(request))
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise UpstreamError(502, f"upstream unreachable: {exc}", retryable=True) from exc
    except httpx.TimeoutException as exc:
        raise UpstreamError(504, f"upstream timed out: {exc}", retryable=repeatable) from exc
    except httpx.HTTPError as exc:
        raise UpstreamError(502, f"upstream transport error: {exc}", retryable=repeatable) from exc


def submit(client: Sender, adapter: TaskAdapter, base_url: str, api_key: str,
           upstream_model: str, request: dict) -> str:
    """Build, send and parse a submit; the upstream task id, or UpstreamError."""
    return adapter.parse_submit(send(client, adapter.build_submit(base_url, api_key, upstream_model, request),
                                     repeatable=False))


def poll(client: Sender, adapter: TaskAdapter, base_url: str, api_key: str,
         upstream_task_id: str) -> TaskSnapshot:
    """Build, send and parse a poll; a poll is safe to repeat, so transport trouble is retryable."""
    return adapter.parse_poll(send(client, adapter.build_poll(base_url, api_key, upstream_task_id), repeatable=True))


def unified(statuses: Mapping[str, str], word: str) -> str:
    """An unknown word is read as still running: the sweeper ends a task that never finishes,
    while calling it failed would refund work the upstream may still deliver."""
    return statuses.get(word, "in_progress")
