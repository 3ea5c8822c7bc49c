"""Logs and metrics for every function (Powertools).

**Logs.** One JSON logger per function, under the function's `POWERTOOLS_SERVICE_NAME` (the
template gives each its own), with the request id as correlation id and the caller's key
fingerprint once known. Nothing carries over from one invocation or request to the next: a
handler wrapped in `lambda_handler` starts from a clean state, and the text app's requests each
start one (`begin`).

**Metrics.** CloudWatch embedded metric format (Powertools' EMF provider), namespace
`POWERTOOLS_METRICS_NAMESPACE`, dimensions `route` and `model`:

| metric | unit | when |
|---|---|---|
| `Requests` | Count | every API request, when its answer is known |
| `Errors` | Count | an answer in error; extra dimension `error_class` (the error's kind: invalid_request, ...) |
| `UnitsBilled` | Count | a settlement (`billing`), in quota units |
| `UpstreamLatency` | Milliseconds | an upstream's answer (non-streamed) or its response headers (streamed) |
| `TimeToFirstByte` | Milliseconds | from the request to the first byte of its answer (text function) |
| `ChannelState` | None | a channel's health (dimension `channel` only): 0 healthy, 1 cooling, 2 disabled |

`ChannelState` is written on each change of a channel's state and, for every channel, on each
run of the sweeper (`routing/health.py`). Metrics of one request or invocation are buffered and
written (`flush`) when it ends: after each Lambda invocation, and after each request of the text
app (which serves several at a time).
"""

from __future__ import annotations

import contextvars
import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

if TYPE_CHECKING:
    from gateway.errors import GatewayError

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "gateway"
logger = Logger(service=SERVICE)
NONE = "-"  # a dimension with no value (a request that never named a model)
_MAX_POINTS = 1000


@dataclass
class _Context:
    route: str = NONE
    model: str = NONE
    started: float = field(default_factory=time.perf_counter)
    error_class: str | None = None  # the kind of error the request is answered with
    points: list[tuple[dict[str, str], str, str, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, dimensions: dict[str, str], name: str, unit: str, value: float) -> None:
        with self.lock:
            self.points.append((dimensions, name, unit, value))
            if len(self.points) > _MAX_POINTS:  # nobody flushes the loose buffer: keep it bounded
                del self.points[:_MAX_POINTS // 2]


# The current request's context: a mutable object, so that what a worker thread records (the
# layer runs its AWS calls in threads, under a copy of the context) reaches the same buffer.
_current: contextvars.ContextVar[_Context | None] = contextvars.ContextVar("gateway_metrics", default=None)
# Outside any request (a test calling the layer directly), points go here and are flushed by `flush`.
_loose = _Context()


def _context() -> _Context:
    return _current.get() or _loose


def begin(route: str, **log_keys: Any) -> None:
    """A new request or invocation: fresh log keys (no state from the last one), a fresh buffer."""
    logger.thread_safe_clear_keys()
    if log_keys:
        logger.thread_safe_append_keys(**log_keys)
    _current.set(_Context(route=route or NONE))


def set_model(model: str) -> None:
    _context().model = model or NONE


def log_keys(**keys: Any) -> None:
    """Keys for every later log line of this request only (the key fingerprint, the user id)."""
    logger.thread_safe_append_keys(**keys)


def _dimensions(route: str | None, model: str | None) -> dict[str, str]:
    context = _context()
    return {"route": route or context.route, "model": model or context.model}


def count_answer(status: int, error_class: str | None = None) -> None:
    """The request's answer: one `Requests`, and one `Errors` of its class when it failed."""
    dimensions = _dimensions(None, None)
    context = _context()
    context.add(dimensions, "Requests", "Count", 1)
    if status >= 400:
        error_class = error_class or ("client_error" if status < 500 else "server_error")
        context.add({**dimensions, "error_class": error_class}, "Errors", "Count", 1)


def units_billed(units: int, *, route: str | None = None, model: str | None = None) -> None:
    _context().add(_dimensions(route, model), "UnitsBilled", "Count", units)


def incident(name: str, value: int = 1) -> None:
    """An operational event the alarms watch (`TransactionConflicts`, `AccountBusy`,
    `StaleHoldsRefunded`): a metric with no route or model, read across services."""
    _context().add({}, name, "Count", value)


def upstream_latency(seconds: float) -> None:
    _context().add(_dimensions(None, None), "UpstreamLatency", "Milliseconds", round(seconds * 1000, 3))


def channel_state(channel: str, value: int) -> None:
    """One point of a channel's health gauge (0 healthy, 1 cooling, 2 disabled)."""
    _context().add({"channel": channel}, "ChannelState", "None", value)


def channel_account_refused(channel: str) -> None:
    """One point of `ChannelAccountRefused`: an upstream refused the channel's own credentials or
    account (a revoked key, an unpaid bill), the operator's alarm (`docs/channels.md#health`)."""
    _context().add({"channel": channel}, "ChannelAccountRefused", "Count", 1)


def first_byte() -> None:
    context = _context()
    context.add(_dimensions(None, None), "TimeToFirstByte", "Milliseconds",
                round((time.perf_counter() - context.started) * 1000, 3))


def error_class_of(error: BaseException) -> str:
    return str(getattr(error, "kind", None) or "internal")


def note_error(error: BaseException) -> None:
    """The class of the error a request is answered with (read by `count_answer` callers)."""
    _context().error_class = error_class_of(error)


def unexpected(exc: Exception) -> GatewayError:
    """What a request answers for an error no code raised on purpose: a 503 to retry after a
    second when an AWS call still failed, after botocore's retries, for a reason that passes
    (`aws_failures.passing_failure`: throttled, a 5xx, a lost connection); else a 500 to report."""
    from gateway.aws_failures import passing_failure
    from gateway.errors import GatewayError, Unavailable

    if passing_failure(exc):
        return Unavailable("the gateway's store is briefly unavailable; retry in a moment", code="store_unavailable",
                           headers={"Retry-After": "1"})
    return GatewayError("internal error; quote the request id when reporting it")


def answer_unexpected(error: Exception, **extra: Any) -> GatewayError:
    """The `GatewayError` that answers an error no code raised on purpose (`unexpected`), noted for
    the request's metrics and logged: a fault of ours with its traceback, an AWS call that still
    failed after botocore's retries as a warning. Called from an exception handler."""
    note_error(error)
    answered = unexpected(error)
    if answered.status == 500:
        logger.exception("unexpected error", extra=extra)
    else:
        logger.warning("AWS call failed after its retries", extra={**extra, "error": repr(error)})
    return answered


def noted_error_class() -> str | None:
    return _context().error_class


def flush() -> None:
    """Writes the buffered points as EMF, one document per dimension set, and empties the buffer."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

    context = _context()
    with context.lock:
        points, context.points = context.points, []
    if is_metrics_disabled():
        return  # Powertools would print nothing: building its documents is CPU for nothing
    groups: dict[tuple[tuple[str, str], ...], list[tuple[str, str, float]]] = {}
    for dimensions, name, unit, value in points:
        groups.setdefault(tuple(sorted(dimensions.items())), []).append((name, unit, value))
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "UnifiedAIGateway"
    for group, metrics in groups.items():
        provider = AmazonCloudWatchEMFProvider(namespace=namespace, service=SERVICE)
        for dimension, dimension_value in group:
            provider.add_dimension(dimension, dimension_value)
        for name, unit, value in metrics:
            provider.add_metric(name=name, unit=unit, value=value)
        provider.flush_metrics()


def lambda_handler(correlation_id_path: str | None = None) -> Callable[[Callable], Callable]:
    """Wraps a Lambda handler: Powertools' context injection with no state left from the last
    invocation, the request's answer counted (an API Gateway event), metrics flushed at the end."""

    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            api = isinstance(event, dict) and "httpMethod" in event
            begin(str(event.get("resource") or NONE) if api else NONE)
            try:
                answer = handler(event, context)
            except Exception:
                if api:
                    count_answer(500, "internal")
                raise
            else:
                if api and isinstance(answer, dict):
                    count_answer(int(answer.get("statusCode") or 200), noted_error_class())
                return answer
            finally:
                flush()

        return logger.inject_lambda_context(run, correlation_id_path=correlation_id_path, clear_state=True)

    return wrap


class ObservedASGI:
    """ASGI middleware of the text app: each request begins clean (log keys, metrics buffer),
    records its first byte and its answer, and flushes its metrics when it ends. The route
    dimension is the matched route's template (`/v1beta/models/{proxy:path}`), never a raw path."""

    def __init__(self, app: Any, skip: tuple[str, ...] = ("/healthz",)):
        self.app, self.skip = app, skip

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http" or scope.get("path") in self.skip:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        # The gateway's own request id (set by the app's outer middleware) is the one billed and
        # answered in x-request-id; API Gateway's is the fallback.
        rid = (scope.get("state") or {}).get("request_id") or _api_gateway_request_id(headers)
        begin(NONE, **({"correlation_id": rid} if rid else {}))
        status, started = [500], [False]

        async def observed_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            elif message["type"] == "http.response.body" and message.get("body") and not started[0]:
                started[0] = True
                first_byte()
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        except Exception as exc:
            note_error(exc)
            raise
        finally:
            _context().route = getattr(scope.get("route"), "path", None) or "unmatched"
            count_answer(status[0], noted_error_class())
            flush()


def _api_gateway_request_id(headers: dict[str, str]) -> str | None:
    # Under the Lambda Web Adapter, API Gateway's request context arrives as a header.
    import json

    try:
        return json.loads(headers.get("x-amzn-request-context") or "{}").get("requestId")
    except (ValueError, AttributeError):
        return None
