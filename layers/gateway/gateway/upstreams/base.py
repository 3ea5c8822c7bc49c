"""What every text upstream client shares: timeouts, the error classification and SSE streams.

A protocol is a subclass that names its auth headers, how its streams end and how it reports an
error inside a stream. The httpx client comes from outside (one per execution environment, and
the seam tests use for a mock or an ASGI transport).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import httpx

from gateway import observability
from gateway.sse import SSEEvent, SSEParser
from gateway.upstreams.errors import ErrorTable, UpstreamError, parse_retry_after, retryable_status


@dataclass(frozen=True)
class Timeouts:
    """Seconds. `first_byte`: request sent to the first byte of the answer (a stream's first body
    byte; a non-streamed answer's status line, so an upstream still silent then is given up on,
    as documented, rather than waited for until `total`). `idle`: the longest gap between two
    chunks of a body once it has begun. `total`: the whole exchange."""

    connect: float = 10.0
    first_byte: float = 60.0
    idle: float = 60.0
    total: float = 900.0  # the streaming function's own 15-minute ceiling


def error_message(body: Any) -> str | None:
    """The message inside any of the three text envelopes (chat, messages, content)."""
    if isinstance(body, list) and body:  # the content stream without alt=sse wraps errors in an array
        body = body[0]
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    if isinstance(error, dict):
        message = error.get("message")
        return message if isinstance(message, str) else None
    return error if isinstance(error, str) else None


class UpstreamClient:
    """Base of one client per wire protocol: build the request, send it, parse or stream the
    answer, classify failures."""

    protocol: ClassVar[str] = ""
    stream_params: ClassVar[dict[str, str]] = {}
    #: The cheapest call the protocol allows (a model list): the health probe (`routing/probes.py`).
    probe_path: ClassVar[str] = "/v1/models"
    #: The provider's errors as it means them (whose fault each answer is), beside its client.
    errors: ClassVar[ErrorTable | None] = None

    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient, timeouts: Timeouts | None = None):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._client = client
        self.timeouts = timeouts or Timeouts()
        self.last_headers: httpx.Headers = httpx.Headers()

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.base_url!r})"

    # --- what a protocol defines -------------------------------------------------------------

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def is_terminal(self, event: SSEEvent) -> bool:
        """Whether `event` is the one that ends a complete stream."""
        raise NotImplementedError

    def stream_error(self, event: SSEEvent) -> UpstreamError | None:
        """The failure an event reports inside a stream that began with a 200, if it is one."""
        return None

    # --- requests ------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        # Operators often copy a base URL that already ends in the version (".../v1"); the paths
        # here carry it too, so it is not doubled.
        version = "/" + path.lstrip("/").split("/", 1)[0]
        base = self.base_url.removesuffix(version) if path.startswith(version + "/") else self.base_url
        return base + path

    def _request(self, method: str, path: str, payload: dict[str, Any] | None, *, stream: bool) -> httpx.Request:
        headers = {**self.auth_headers(), "accept": "text/event-stream" if stream else "application/json"}
        timeout = httpx.Timeout(connect=self.timeouts.connect, read=None, write=self.timeouts.idle,
                                pool=self.timeouts.connect)
        # A path may carry its own query (Azure's api-version): empty params would wipe it.
        return self._client.build_request(method, self.url(path), json=payload, headers=headers,
                                          params=self.stream_params if stream and self.stream_params else None,
                                          timeout=timeout)

    def probe_target(self) -> str:
        """The path of the health probe (a protocol with variants may answer per variant)."""
        return self.probe_path

    async def probe(self) -> None:
        """The health probe: the model list, read and thrown away (never billed to anyone)."""
        await self.call(self.probe_target(), method="GET")

    async def call(self, path: str, payload: dict[str, Any] | None = None, *, method: str = "POST") -> dict[str, Any]:
        """A non-streamed exchange: the decoded JSON answer, or an `UpstreamError`."""
        content = await self.send(self._request(method, path, payload, stream=False))
        try:
            body = json.loads(content)
        except (ValueError, RecursionError):
            raise UpstreamError(None, "upstream answered with a body that is not JSON", retryable=True) from None
        if not isinstance(body, (dict, list)):
            raise UpstreamError(None, "upstream answered with JSON that is not an object", retryable=True)
        return cast(dict[str, Any], body)  # an array is let through as it came; the dialect's reader judges it

    async def call_form(self, path: str, fields: dict[str, Any], files: dict[str, Any]) -> bytes:
        """A multipart/form-data exchange (an audio upload): the answer's bytes as they came (JSON or
        text: its type in `last_headers`), or an `UpstreamError`."""
        timeout = httpx.Timeout(connect=self.timeouts.connect, read=None, write=self.timeouts.idle,
                                pool=self.timeouts.connect)
        request = self._client.build_request("POST", self.url(path), data=fields, files=files,
                                             headers=self.auth_headers(), timeout=timeout)
        return await self.send(request)

    def byte_stream(self, path: str, payload: dict[str, Any], accept: str) -> ByteStream:
        """A streamed answer relayed as bytes (speech audio, or its events); `async with` as `stream`."""
        request = self._request("POST", path, payload, stream=True)
        request.headers["accept"] = accept
        return ByteStream(self, request)

    async def exchange(self, path: str, payload: dict[str, Any] | None = None, *,
                       method: str = "POST") -> tuple[dict[str, Any], httpx.Headers]:
        """`call`, with the answer's headers (where an upstream reports usage in one)."""
        body = await self.call(path, payload, method=method)
        return body, self.last_headers

    async def send(self, request: httpx.Request) -> bytes:
        """Sends `request`: the answer's body, or an `UpstreamError` for a refusal or a timeout."""
        started = time.perf_counter()
        timeouts = self.timeouts
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeouts.total
        first_byte_by = min(loop.time() + timeouts.first_byte, deadline)
        try:
            async with asyncio.timeout_at(first_byte_by):
                response = await self._client.send(request, stream=True)
        except TimeoutError:
            raise UpstreamError(None, f"upstream gave no answer within {min(timeouts.first_byte, timeouts.total):g}s",
                                retryable=True, timed_out=True) from None
        except httpx.HTTPError as exc:
            raise self.transport_error(exc) from None
        observability.upstream_latency(time.perf_counter() - started)
        self.last_headers = response.headers  # a client serves one attempt: where usage rides in a header (TEI)
        try:
            content = await self._read_body(response, deadline)
        finally:
            await response.aclose()
        if response.status_code >= 400:
            raise self.status_error(response.status_code, response.headers, content)
        return content

    async def _read_body(self, response: httpx.Response, deadline: float) -> bytes:
        """A whole answer body, each chunk within `idle` of the last and all before `deadline`."""
        loop = asyncio.get_running_loop()
        chunks: list[bytes] = []
        stream = response.aiter_bytes()
        while True:
            limit = min(loop.time() + self.timeouts.idle, deadline)
            try:
                async with asyncio.timeout_at(limit):
                    chunk = await anext(stream)
            except StopAsyncIteration:
                return b"".join(chunks)
            except TimeoutError:
                why = f"exceeded {self.timeouts.total:g}s in total" if limit >= deadline else \
                    f"was idle for more than {self.timeouts.idle:g}s"
                raise UpstreamError(None, f"upstream answer {why}", retryable=True, timed_out=True) from None
            except httpx.HTTPError as exc:
                raise self.transport_error(exc) from None
            chunks.append(chunk)

    def stream(self, path: str, payload: dict[str, Any]) -> EventStream:
        """A streamed exchange; use `async with client.stream(...) as events: async for ...`."""
        return EventStream(self, self._request("POST", path, payload, stream=True))

    def stream_form(self, path: str, fields: dict[str, Any], files: dict[str, Any], *,
                    terminal: Callable[[SSEEvent], bool] | None = None) -> EventStream:
        """A multipart/form-data exchange answered as a stream (a streamed transcription)."""
        request = self._client.build_request("POST", self.url(path), data=fields, files=files, timeout=httpx.Timeout(
            connect=self.timeouts.connect, read=None, write=self.timeouts.idle, pool=self.timeouts.connect),
            headers={**self.auth_headers(), "accept": "text/event-stream"})
        return EventStream(self, request, terminal=terminal)

    # --- failures ------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _redact_json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self._redact_json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redact_json(v) for v in value]
        return value

    def transport_error(self, exc: httpx.HTTPError) -> UpstreamError:
        if isinstance(exc, httpx.TimeoutException):
            return UpstreamError(None, f"upstream timed out ({type(exc).__name__})", retryable=True, timed_out=True)
        if isinstance(exc, httpx.ConnectError):
            return UpstreamError(None, "could not connect to the upstream", retryable=True)
        # Read errors, a dropped connection, a broken protocol: the request may simply be retried.
        return UpstreamError(None, f"upstream connection failed ({type(exc).__name__})", retryable=True)

    def status_error(self, status: int, headers: httpx.Headers, content: bytes) -> UpstreamError:
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        detail = error_message(body) or content[:200].decode("utf-8", "replace").strip() or "no detail"
        if isinstance(body, list):
            body = body[0] if body and isinstance(body[0], dict) else None
        body = self._redact_json(body) if isinstance(body, dict) else None
        message = self.redact(f"upstream answered {status}: {detail}")
        if self.errors is not None:
            return self.errors.error(status, message, body, retry_after=parse_retry_after(headers), relayed=body)
        return UpstreamError(status, message, retryable=retryable_status(status),
                             retry_after=parse_retry_after(headers), body=body)


class EventStream:
    """The events of one streamed upstream answer.

    Opening it (`async with`, or `await open()`) sends the request and raises `UpstreamError`
    for a refused one, before any event exists, so a caller can still try another channel.
    While iterating, `first_byte`, `idle` and `total` are enforced around every read. The stream
    raises `UpstreamError` when the upstream reports an error inside it, or ends before its
    terminal event (`completed` stays False): the protocol's (`is_terminal`), or the route's own
    (`terminal`, where the route's events end otherwise: a transcription's `transcript.text.done`).
    The chat dialect's `[DONE]` is consumed here, not yielded. Leaving the `async with` block (or
    cancelling the consumer) closes the upstream response at once.
    """

    def __init__(self, owner: UpstreamClient, request: httpx.Request,
                 terminal: Callable[[SSEEvent], bool] | None = None):
        self._owner = owner
        self._request = request
        self._terminal = terminal or owner.is_terminal
        self._response: httpx.Response | None = None
        self._closed = False
        self.completed = False
        self.status: int | None = None
        self.headers: httpx.Headers | None = None

    async def __aenter__(self) -> EventStream:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def open(self) -> None:
        if self._response is not None:
            return
        timeouts = self._owner.timeouts
        loop = asyncio.get_running_loop()
        start = loop.time()
        self._deadline = start + timeouts.total
        self._first_byte_by = start + min(timeouts.first_byte, timeouts.total)
        try:
            async with asyncio.timeout_at(self._first_byte_by):
                response = await self._owner._client.send(self._request, stream=True)
        except TimeoutError:
            raise UpstreamError(None, f"upstream sent nothing within {timeouts.first_byte:g}s",
                                retryable=True, timed_out=True) from None
        except httpx.HTTPError as exc:
            raise self._owner.transport_error(exc) from None
        self._response, self.status, self.headers = response, response.status_code, response.headers
        observability.upstream_latency(loop.time() - start)  # to the response headers
        if response.status_code >= 400:
            try:
                async with asyncio.timeout(timeouts.idle):
                    content = await response.aread()
            except (TimeoutError, httpx.HTTPError):
                content = b""
            finally:
                await self.aclose()
            raise self._owner.status_error(response.status_code, response.headers, content)

    async def aclose(self) -> None:
        if self._response is not None and not self._closed:
            self._closed = True
            await self._response.aclose()

    @property
    def is_event_stream(self) -> bool:
        """Whether the opened answer is SSE (an upstream may answer a stream request whole, as
        OpenAI does a whisper-1 transcription asked to stream)."""
        content_type = self.headers.get("content-type", "") if self.headers is not None else ""
        return content_type.split(";")[0].strip().lower() == "text/event-stream"

    async def read_whole(self) -> bytes:
        """The rest of an opened answer that is not a stream, within the same timeouts; then closed."""
        await self.open()
        try:
            async with aclosing(self._chunks()) as chunks:
                return b"".join([chunk async for chunk in chunks])
        finally:
            await self.aclose()

    def __aiter__(self) -> AsyncGenerator[SSEEvent]:
        return self._events()

    async def _events(self) -> AsyncGenerator[SSEEvent]:
        await self.open()
        parser = SSEParser()
        try:
            async with aclosing(self._chunks()) as chunks:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        if error := self._owner.stream_error(event):
                            raise error
                        if self._terminal(event):
                            self.completed = True
                        if not event.is_done:
                            yield event
            if not self.completed:
                raise UpstreamError(None, "upstream stream ended before its final event", retryable=True)
        finally:
            await self.aclose()

    async def _chunks(self) -> AsyncGenerator[bytes]:
        assert self._response is not None
        loop = asyncio.get_running_loop()
        timeouts = self._owner.timeouts
        chunks = self._response.aiter_bytes()
        waiting_for_first = True
        while True:
            limit = self._first_byte_by if waiting_for_first else min(loop.time() + timeouts.idle, self._deadline)
            try:
                async with asyncio.timeout_at(limit):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if limit >= self._deadline:
                    message = f"upstream stream exceeded {timeouts.total:g}s in total"
                elif waiting_for_first:
                    message = f"upstream sent nothing within {timeouts.first_byte:g}s"
                else:
                    message = f"upstream stream idle for more than {timeouts.idle:g}s"
                raise UpstreamError(None, message, retryable=True, timed_out=True) from None
            except httpx.HTTPError as exc:
                raise self._owner.transport_error(exc) from None
            if chunk:
                waiting_for_first = False
                yield chunk


class ByteStream(EventStream):
    """An upstream's answer as the chunks of bytes it sends (speech audio), with the same opening,
    timeouts and closing as `EventStream`; `completed` once the upstream ended it itself."""

    def __aiter__(self) -> AsyncGenerator[bytes]:  # type: ignore[override]
        return self._bytes()

    async def _bytes(self) -> AsyncGenerator[bytes]:
        await self.open()
        try:
            async with aclosing(self._chunks()) as chunks:
                async for chunk in chunks:
                    yield chunk
            self.completed = True
        finally:
            await self.aclose()
