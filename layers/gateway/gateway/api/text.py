"""Text generation in four dialects, streamed or not, billed to the token.

One request, in order:

1. the key (any SDK's place), then the body against the dialect's rules (`schemas/text/`):
   a broken rule is a 4xx in the dialect's envelope and nothing is charged;
2. the key may use the model, the model has a price, a channel serves it;
3. the worst case, the prompt estimate plus the output limit of every choice asked for (`n`,
   `candidateCount`), is reserved;
4. the channels are tried in order, converting the request when the channel speaks another
   dialect (`formats`). A connection error, a timeout, a 429 or a 5xx moves on to the next
   channel, but only before anything has been sent to the client: a stream is committed once
   its first upstream event has arrived, or once an upstream that accepted it has been silent
   for the keep-alive interval (`GATEWAY_STREAM_KEEPALIVE_SECONDS`);
5. the answer is relayed (each stream event as soon as it is complete, and a `: keep-alive`
   comment, a bare newline for a content-generation client, whenever the upstream is silent for
   the keep-alive interval); the reservation is
   settled to the upstream's usage, or, for a stream cut short by the upstream or the client,
   to what was relayed, BEFORE the end of the answer goes out (a buffered body, a stream's
   closing events), so a client that has its whole answer can read its bill. A failure before
   anything was relayed refunds everything.

The HTTP side (`functions/text/app.py`) hands each answer a `send` callable; `Answer.send_to`
writes the body through it and settles exactly once, even when the client goes away or a
shutdown cancels the relay (the settlement runs in a thread of its own that the process waits for).
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx

from gateway import auth, observability
from gateway.admission import billing
from gateway.api.answers import JSON_TYPE, Inbound, PatientAnswer, Send, patiently
from gateway.errors import InvalidRequest
from gateway.formats import CHAT, CONTENT, MESSAGES, RESPONSES, StreamConverter, convert_request, convert_response
from gateway.formats.neutral import CONVERSE
from gateway.formats.usage import (
    Usage,
    usage_from_chat,
    usage_from_content,
    usage_from_converse,
    usage_from_messages,
    usage_from_responses,
)
from gateway.observability import logger
from gateway.prices import Price, token_cost
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.routing.failover import first_success_async
from gateway.routing.outbound import client as http_client
from gateway.settings import get_settings
from gateway.sse import encode
from gateway.store.aws import here_unless_it_waits
from gateway.tokens import estimate_value_tokens
from gateway.upstreams.base import EventStream, Timeouts, UpstreamError
from gateway.upstreams.clients import client_for

# The output a request may generate when it sets no limit of its own, for the reservation only:
# the settlement is always the real usage.
DEFAULT_OUTPUT_TOKENS = 4096
TEXT_PROTOCOLS = ("chat", "messages", "content", "azure", "bedrock")
# The dialect each text protocol speaks (azure: chat's bodies on Azure's addresses, `upstreams/azure`;
# bedrock: Converse, `formats/converse`).
_SPOKEN = {"chat": CHAT, "azure": CHAT, "messages": MESSAGES, "content": CONTENT, "bedrock": CONVERSE}
# Embeddings: a chat or azure channel's own route, a bedrock channel's InvokeModel (`BedrockClient.embeddings`).
EMBEDDING_PROTOCOLS = ("chat", "azure", "bedrock")
# The channel protocol that speaks each client dialect natively (tried first at equal priority).
_NATIVE = {CHAT: "chat", RESPONSES: "chat", MESSAGES: "messages", CONTENT: "content"}
_USAGE_READERS = {CHAT: usage_from_chat, RESPONSES: usage_from_responses, MESSAGES: usage_from_messages,
                  CONTENT: usage_from_content, CONVERSE: usage_from_converse}
GENERATE, COMPACT, EMBED = "generate", "compact", "embeddings"
# The content dialect's other actions, served by content channels only: counting is free (a
# zero-unit ledger entry), an embedding is billed on the gateway's estimate of its input, since
# the upstream's answer reports no usage.
COUNT_TOKENS, EMBED_CONTENT, BATCH_EMBED = "countTokens", "embedContent", "batchEmbedContents"
_CONTENT_METHODS = {COUNT_TOKENS: "count_tokens", EMBED_CONTENT: "embed_content", BATCH_EMBED: "batch_embed_contents"}
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
               "x-accel-buffering": "no"}


@dataclass(frozen=True)
class TextCall:
    """A request that passed its dialect's rules."""

    operation: str  # GENERATE, COMPACT or EMBED
    dialect: str  # the client's dialect
    route: str  # for the ledger
    model: str
    body: dict[str, Any]  # the validated body; unknown fields kept
    stream: bool
    include_usage: bool  # a chat client that asked for usage in its stream
    input_tokens: int  # the prompt estimate
    output_tokens: int  # the most it may generate, per choice
    choices: int = 1  # how many outputs it asks for (chat `n`, content `candidateCount`)

    @property
    def worst_output_tokens(self) -> int:
        return self.output_tokens * self.choices

    @property
    def protocols(self) -> tuple[str, ...]:
        if self.operation in _CONTENT_METHODS:
            return ("content",)
        if self.operation == EMBED:
            return EMBEDDING_PROTOCOLS
        return TEXT_PROTOCOLS if self.operation == GENERATE else ("chat",)

    @property
    def stop_sequences(self) -> list[str] | None:
        """A messages client's stop sequences (the gateway applies them where a channel cannot)."""
        return self.body.get("stop_sequences") if self.dialect == MESSAGES else None

    def upstream_dialect(self, channel: Channel) -> str:
        # A chat (or azure) channel serves the responses dialect itself; anything else is converted.
        spoken = _SPOKEN[channel.protocol]
        return RESPONSES if self.dialect == RESPONSES and spoken == CHAT else spoken


# ---------------------------------------------------------------------------------------------
# Parsing: each route's body into a TextCall, with the spec's rules.

def parse_call(operation: str, dialect: str, inbound: Inbound) -> TextCall:
    # pydantic only once a body is parsed
    from gateway.schemas.text import chat, content, embeddings, messages, responses
    from gateway.validation import parse_json, parse_model

    data = parse_json(inbound.body)
    if operation == EMBED:
        inputs = parse_model(embeddings.EmbeddingsRequest, data)
        return TextCall(EMBED, CHAT, inbound.path, inputs.model, inputs.model_dump(exclude_unset=True),
                        stream=False, include_usage=False, input_tokens=inputs.estimate_input_tokens(),
                        output_tokens=0)
    request: content.ContentRequest | chat.ChatRequest | messages.MessagesRequest | responses.ResponsesRequest
    if dialect == CONTENT:
        model, action = content.parse_model_action(inbound.proxy or "")  # 404 for an unknown action
        route = f"/v1beta/models/{{model}}:{action}"
        if action in _CONTENT_METHODS:
            body = parse_model(content.CONTENT_ACTIONS[action], data).model_dump(exclude_unset=True)
            tokens = estimate_value_tokens(body) if action != COUNT_TOKENS else 0
            return TextCall(action, CONTENT, route, model, body, stream=False, include_usage=False,
                            input_tokens=tokens, output_tokens=0)
        stream = action == "streamGenerateContent"
        if stream and inbound.query.get("alt") != "sse":
            raise InvalidRequest("alt: must be sse (this gateway streams content generation as Server-Sent Events)",
                                 param="alt")
        request = parse_model(content.ContentRequest, data)
    else:
        dialects: dict[str, type[chat.ChatRequest | messages.MessagesRequest | responses.ResponsesRequest]] = {
            CHAT: chat.ChatRequest, MESSAGES: messages.MessagesRequest, RESPONSES: responses.ResponsesRequest}
        request = parse_model(dialects[dialect], data)
        model, stream, route = request.model, bool(request.stream), inbound.path
        if operation == COMPACT and stream:
            raise InvalidRequest("stream: a compaction is not streamed", param="stream")
    body = request.model_dump(exclude_unset=True)
    options = body.get("stream_options") or {}
    return TextCall(operation, dialect, route, model, body, stream=stream,
                    include_usage=dialect == CHAT and options.get("include_usage") is True,
                    input_tokens=request.estimate_input_tokens(),
                    output_tokens=request.output_limit() or DEFAULT_OUTPUT_TOKENS, choices=request.choices())


# ---------------------------------------------------------------------------------------------
# Answers: what goes back to the client, and the settlement that follows it.

class Answer:
    """A committed answer: `status` and `headers` are final; `send_to` writes the body and bills."""

    status = 200
    headers: dict[str, str]

    def __init__(self, call: TextCall, price: Price, reservation: billing.Reservation, channel: Channel):
        self.call, self.price, self.reservation, self.channel = call, price, reservation, channel
        self._closed = False
        _unsettled.add(self)

    async def send_to(self, send: Send) -> None:
        raise NotImplementedError

    def limit_headers(self) -> dict[str, str]:
        return _limit_headers(self.call, self.reservation)

    async def unsent(self) -> None:
        """Settles an answer whose client left before it was sent (a `PatientAnswer`'s)."""
        raise NotImplementedError

    async def _close(self, usage: Usage, outcome: str) -> None:
        """Settles once, whatever happens to the client or the process.

        The settlement starts before the first await, on a settlement thread (`_SETTLEMENTS`,
        whose threads are not daemons): a cancellation (the client left, uvicorn cancels every
        request on SIGTERM) can stop this coroutine from waiting for it, never the settlement
        itself, and the process does not exit before every settlement handed over is written."""
        if self._closed:
            return
        self._closed = True
        loop, done = asyncio.get_running_loop(), asyncio.Event()

        def settle() -> None:
            try:
                self._settle(usage, outcome)
            finally:
                _unsettled.discard(self)
                try:
                    loop.call_soon_threadsafe(done.set)  # wakes the relay the moment the bill is written
                except RuntimeError:
                    pass  # the loop is gone (a shutdown): nobody waits any more

        _SETTLEMENTS.submit(settle)
        with anyio.CancelScope(shield=True):
            await done.wait()

    def _settle(self, usage: Usage, outcome: str) -> None:
        units = token_cost(self.price, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                           cached_input_tokens=usage.cached_input_tokens,
                           cache_write_tokens=usage.cache_creation_input_tokens,
                           cache_write_1h_tokens=usage.cache_creation_1h_input_tokens)
        detail = {"channel": self.channel.name, "outcome": outcome, "stream": self.call.stream,
                  "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                  "cached_input_tokens": usage.cached_input_tokens,
                  **({"cache_write_tokens": usage.cache_creation_input_tokens,
                      "cache_write_1h_tokens": usage.cache_creation_1h_input_tokens}
                     if usage.cache_creation_input_tokens else {})}
        self._write_bill(units, detail, "text served")

    def _write_bill(self, units: int, detail: dict, served: str) -> None:
        """Settles the hold at `units` and logs `served`; a failed settlement is logged, not raised:
        the answer has gone out and the hold covers its estimate, so the reservation stays open
        for an operator rather than the request failing after the fact."""
        try:
            billing.settle(self.reservation, units, detail=detail)
        except Exception:
            logger.exception("settlement failed", extra={"reservation_id": self.reservation.reservation_id,
                                                         "units": units})
            return
        logger.info(served, extra={"model": self.call.model, "units": units, **detail})


def _limit_headers(call: TextCall, reservation: billing.Reservation) -> dict[str, str]:
    """A limited principal's rate-limit headers: anthropic's names on /v1/messages, openai's elsewhere."""
    from gateway.admission import limits

    state = reservation.ratelimit
    if not state:
        return {}
    return limits.anthropic_headers(state) if call.dialect == MESSAGES else limits.openai_headers(state)


# Answers committed to a client and not yet billed (weak: an answer dropped unsent leaves it).
_unsettled: weakref.WeakSet[Answer] = weakref.WeakSet()
# Where settlements run: threads kept between requests (a new thread per request costs more
# than the relay), made as needed up to the limit. An executor's threads are joined at exit
# after the work already handed to them, so a stop never loses a settlement.
_SETTLEMENTS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="settle")


async def settle_pending(timeout: float) -> int:
    """Waits, at most `timeout` seconds, until every committed answer is billed; how many were
    left. A shutdown calls it after cancelling the relays (uvicorn on SIGTERM cancels every
    request, then exits by the signal): their settlements, started as the relays unwind, finish first."""
    deadline = anyio.current_time() + timeout
    while len(_unsettled) and anyio.current_time() < deadline:
        await anyio.sleep(0.01)
    return len(_unsettled)


class BufferedAnswer(Answer):
    def __init__(self, body: dict[str, Any], usage: Usage, **kwargs: Any):
        super().__init__(**kwargs)
        self.payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        self.usage = usage
        self.headers = {"content-type": JSON_TYPE, "content-length": str(len(self.payload))}

    async def send_to(self, send: Send) -> None:
        # Billed first: the upstream did the work, and a client that has the body can read the bill.
        await self._close(self.usage, "completed")
        await send(self.payload)

    async def unsent(self) -> None:
        """Billed though the client left before it: the upstream's usage, what it charged."""
        await self._close(self.usage, "client_gone")


#: What a route answers: an answer in hand, or one still awaited and kept alive.
Served = Answer | PatientAnswer


class StreamedAnswer(Answer):
    headers = SSE_HEADERS

    def __init__(self, upcoming: _Upcoming, first: Any, converter: StreamConverter, **kwargs: Any):
        super().__init__(**kwargs)
        self.upcoming, self.first, self.converter = upcoming, first, converter

    async def send_to(self, send: Send) -> None:
        converter = self.converter
        outcome = "client_gone"
        # From the upstream's terminal event on, the client's events wait for the settlement, so
        # that the stream's closing event ([DONE], message_stop, response.completed, the last
        # content chunk) never reaches a client before its bill is written.
        held: list[bytes] = []

        async def relay(event: Any) -> None:
            chunks = _converted(converter, event)
            if converter.ending or held:
                held.extend(chunks)
                return
            for chunk in chunks:
                await send(chunk)

        try:
            failure, event, interval = None, self.first, get_settings().stream_keepalive_seconds
            keep_alive = CONTENT_KEEP_ALIVE if self.call.dialect == CONTENT else KEEP_ALIVE
            try:
                while event is not _END:
                    if event is _SILENT:
                        await send(keep_alive)
                    else:
                        await relay(event)
                    event = await self.upcoming.next(interval)
            except UpstreamError as exc:
                failure = exc.message
                logger.warning("upstream stream failed", extra={"channel": self.channel.name, "error": exc.message})
            held.extend(encode(data, name) for name, data in converter.finish(failure))
            outcome = "completed" if converter.completed else "cut"
            await self._close(self._usage(), outcome)
            for chunk in held:
                await send(chunk)
        finally:
            if not self._closed:  # the client left, or the relay was cancelled: bill what it got
                await self._close(self._usage(), outcome)
            await self.upcoming.aclose()

    def _usage(self) -> Usage:
        """The upstream's usage for a whole stream; for a cut one, what the upstream generated up
        to the cut, on the best evidence the stream holds (`StreamConverter.output_tokens`: the
        upstream's own mid-stream counts, else the stream's structure or its text), never the
        hold's generous estimate. The upstream is not read on after the client leaves: closing
        the connection stops the generation, and the client pays for nothing it never got."""
        converter, reported = self.converter, self.converter.usage
        if converter.completed and reported is not None and (reported.input_tokens or reported.output_tokens):
            return reported
        input_tokens = reported.input_tokens if reported is not None and reported.input_tokens else \
            self.call.input_tokens
        output_tokens = max(reported.output_tokens if reported is not None else 0, converter.output_tokens)
        if reported is None:
            return Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        cached = min(reported.cached_input_tokens, input_tokens)
        written = min(reported.cache_creation_input_tokens, input_tokens - cached)
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cached_input_tokens=cached,
                     cache_creation_input_tokens=written,
                     cache_creation_1h_input_tokens=min(reported.cache_creation_1h_input_tokens, written))


def _converted(converter: StreamConverter, event: Any) -> list[bytes]:
    """One upstream event as the client's encoded events."""
    try:
        data = event.json()
    except ValueError:
        return []  # not JSON: nothing any dialect's client could read
    return [encode(out, name) for name, out in converter.feed(event.event, data)]


# ---------------------------------------------------------------------------------------------
# Serving.

@dataclass
class _Prepared:
    call: TextCall
    principal: auth.Principal
    price: Price
    channels: list[Channel]
    reservation: billing.Reservation


def _prepare(operation: str, dialect: str, inbound: Inbound) -> _Prepared:
    """Everything before the first upstream byte that needs the store (run in a worker thread)."""
    principal = auth.authenticate(inbound.headers, inbound.query)
    call = parse_call(operation, dialect, inbound)
    principal.require_model(call.model)
    price, channels = get_catalog().serving(call.model, call.protocols, prefer=_NATIVE[call.dialect],
                                            group=principal.group)
    observability.set_model(call.model)  # a metric dimension only once the catalog knows the model
    hold = token_cost(price, input_tokens=call.input_tokens, output_tokens=call.worst_output_tokens)
    reservation = billing.reserve_request(principal, hold, model=call.model, route=call.route,
                                          request_id=inbound.request_id,
                                          tokens=call.input_tokens + call.worst_output_tokens)
    return _Prepared(call, principal, price, channels, reservation)


async def serve(operation: str, dialect: str, inbound: Inbound, *, http: httpx.AsyncClient | None = None,
                timeouts: Timeouts | None = None) -> Served:
    """The committed answer to one text request, or a `GatewayError` with nothing charged.

    What comes before the upstream call runs on the event loop when this instance has all it
    needs in memory (the key cached, a quota lease with room: the common request), else on a
    worker thread (`here_unless_it_waits`): a hop to a thread and back costs more than the work."""
    prepared = await here_unless_it_waits(_prepare, operation, dialect, inbound)
    answering = _answer_or_refund(prepared, http or http_client(), timeouts)
    patience = get_settings().buffered_keepalive_seconds
    if prepared.call.stream or patience <= 0:
        return await answering
    # A buffered answer sends nothing until the upstream has answered in full: past `patience`
    # the answer is committed and kept alive (`PatientAnswer`), so that API Gateway's idle
    # timeout (5 minutes on the regional streaming integration) never cuts a slow one. A client
    # that leaves before that stops the attempt, refunded.
    return await patiently(answering, route=prepared.call.route, request_id=inbound.request_id, interval=patience,
                           limit_headers=partial(_limit_headers, prepared.call, prepared.reservation))


async def _answer_or_refund(prepared: _Prepared, http: httpx.AsyncClient, timeouts: Timeouts | None) -> Answer:
    """The committed answer, or everything refunded and the failure raised."""
    try:
        return await _first_answer(prepared, http, timeouts)
    except BaseException as exc:
        reason = getattr(exc, "message", type(exc).__name__)[:200]
        failed = isinstance(exc, Exception)  # a cancellation (the client went away first) is no failure
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: billing.refund(
                prepared.reservation, reason=reason, error=failed, detail={"stream": prepared.call.stream}))
        raise


async def _first_answer(prepared: _Prepared, http: httpx.AsyncClient, timeouts: Timeouts | None) -> Answer:
    def attempt(channel: Channel) -> Awaitable[Answer]:
        client = client_for(channel, http, timeouts)
        return _attempt(prepared, channel, client)

    answer, _ = await first_success_async(prepared.channels, attempt, offload=anyio.to_thread.run_sync)
    return answer


async def _attempt(prepared: _Prepared, channel: Channel, client: Any) -> Answer:
    call = prepared.call
    upstream = call.upstream_dialect(channel)
    target_model = channel.upstream_model(call.model)
    common = {"call": call, "price": prepared.price, "reservation": prepared.reservation, "channel": channel}
    if call.operation == EMBED:
        answer = await client.embeddings({**call.body, "model": target_model})
        return BufferedAnswer(_renamed(answer, call.model), usage_from_chat(answer.get("usage")), **common)
    if call.operation == COMPACT:
        answer = await client.compact_responses({**call.body, "model": target_model})
        return BufferedAnswer(_renamed(answer, call.model), usage_from_responses(answer.get("usage")), **common)
    if call.operation in _CONTENT_METHODS:
        body = call.body
        if call.operation == BATCH_EMBED:  # each request names its model too
            body = {**body, "requests": [{**r, "model": f"models/{target_model}"} for r in body["requests"]]}
        answer = await getattr(client, _CONTENT_METHODS[call.operation])(target_model, body)
        return BufferedAnswer(_renamed(answer, call.model), Usage(call.input_tokens, 0), **common)
    payload = convert_request(call.body, source=call.dialect, target=upstream, model=target_model,
                              stream=call.stream)
    if not call.stream:
        answer = _object(await _call(client, upstream, target_model, payload))
        usage = _USAGE_READERS[upstream](answer.get("usageMetadata" if upstream == CONTENT else "usage"))
        body = convert_response(answer, source=upstream, target=call.dialect, model=call.model, now=int(time.time()),
                                stop=call.stop_sequences)
        return BufferedAnswer(body, usage, **common)
    events = _open(client, upstream, target_model, payload)
    upcoming = _Upcoming(events)
    try:
        # The first event decides: until it has come, another channel may still be tried. An
        # upstream that accepted the request and stays silent (a model thinking) past the
        # keep-alive interval is committed to instead, so the client hears `: keep-alive` meanwhile.
        first = await upcoming.next(get_settings().stream_keepalive_seconds)
    except BaseException:
        await upcoming.aclose()
        raise
    if first is _END:
        await upcoming.aclose()
        raise UpstreamError(None, "upstream stream ended without any event", retryable=True)
    converter = StreamConverter(upstream, call.dialect, model=call.model, include_usage=call.include_usage,
                                now=int(time.time()), stop=call.stop_sequences)
    return StreamedAnswer(upcoming, first, converter, **common)


_END, _SILENT = object(), object()  # `_Upcoming.next`: the stream ended; nothing came in time
KEEP_ALIVE = b": keep-alive\n\n"  # an SSE comment: the openai and anthropic SDKs skip it
# The google-genai SDK reads any line that is not `data:` as JSON (an SSE comment breaks it), so a
# content-generation client gets a bare newline: an empty SSE line dispatches nothing, and between
# the elements of a JSON-array stream it is whitespace.
CONTENT_KEEP_ALIVE = b"\n"


class _Upcoming:
    """An upstream's events, each awaited in a task of its own, so that a wait may give up after
    a while (to send a keep-alive) without losing the event that is on its way."""

    def __init__(self, events: EventStream):
        self.events = events
        self._iterator = events.__aiter__()
        self._pending: asyncio.Future[Any] | None = None

    async def _next(self) -> Any:
        try:
            return await anext(self._iterator)
        except StopAsyncIteration:
            return _END

    async def next(self, timeout: float) -> Any:
        """The next event, `_END`, or `_SILENT` when none came within `timeout` seconds."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._next())
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return _SILENT
        pending, self._pending = self._pending, None
        return pending.result()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._pending is not None:
                self._pending.cancel()
                await asyncio.wait({self._pending})
                self._pending = None
            await self.events.aclose()  # stops reading the upstream at once


async def _call(client: Any, dialect: str, model: str, payload: dict[str, Any]) -> Any:
    if dialect == CHAT:
        return await client.chat_completions(payload)
    if dialect == RESPONSES:
        return await client.responses(payload)
    if dialect == MESSAGES:
        return await client.messages(payload)
    if dialect == CONVERSE:
        return await client.converse(model, payload)
    return await client.generate_content(model, payload)


def _open(client: Any, dialect: str, model: str, payload: dict[str, Any]) -> EventStream:
    if dialect == CHAT:
        return client.stream_chat_completions(payload)
    if dialect == RESPONSES:
        return client.stream_responses(payload)
    if dialect == MESSAGES:
        return client.stream_messages(payload)
    if dialect == CONVERSE:
        return client.stream_converse(model, payload)
    return client.stream_generate_content(model, payload)


def _object(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise UpstreamError(None, "upstream answered with JSON that is not an object", retryable=True)
    return answer


def _renamed(answer: Any, model: str) -> dict[str, Any]:
    """The upstream's answer under the public model name the client asked for."""
    answer = _object(answer)
    return {**answer, "model": model} if "model" in answer else answer


# ---------------------------------------------------------------------------------------------
# Entry points, one per route.

chat_completions = partial(serve, GENERATE, CHAT)
messages = partial(serve, GENERATE, MESSAGES)
responses = partial(serve, GENERATE, RESPONSES)
compact_responses = partial(serve, COMPACT, RESPONSES)


async def content(inbound: Inbound, **options: Any) -> Served:
    """/v1beta/models/{model}:{action}: generation, or one of the content dialect's other actions."""
    action = (inbound.proxy or "").rpartition(":")[2]
    return await serve(action if action in _CONTENT_METHODS else GENERATE, CONTENT, inbound, **options)


embeddings = partial(serve, EMBED, CHAT)
