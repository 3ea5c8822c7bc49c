"""The audio routes, OpenAI's shapes through chat channels: speech (`POST /v1/audio/speech`),
transcriptions and translations (`POST /v1/audio/transcriptions`, `/translations`).

**Speech** is relayed as the upstream sends it, chunk by chunk (raw audio, or the
`speech.audio.delta` events of `stream_format: sse`), never gathered whole; the first chunk
decides (until it has come another channel may be tried). Held before: the input's characters
(a model sold per million characters: `tts-1`, `m-tts`), else its text tokens and the most audio
tokens it can make (`worst_audio_tokens`). Settled after: the characters in full once anything
was relayed (the upstream charges a request it accepted); a token-sold model to the usage of the
`speech.audio.done` event, else to the audio's duration (tinytag over the bytes relayed) at
`AUDIO_TOKENS_PER_SECOND`, never above the hold. The last chunk waits for the bill, so a client
with its whole answer can read it.

**Transcriptions and translations** read the file first (`gateway.audiotypes`): what is not audio
is a 400 naming `file` before any hold or upstream call, a body over the request limit a 413
naming it (`gateway.multipart`). Held: the longest the file can be (`Audio.max_seconds`).
Settled to the upstream's usage (`usage.type` tokens or duration), else the answer's `duration`
(verbose_json), else the duration read from the file; never above the hold. WebM has no duration
reader: it is taken only with a response format whose answer reports its length (json and
verbose_json for a transcription, verbose_json for a translation), else a 400 before any call.

A transcription with `stream: true` is relayed event by event (`TranscriptAnswer`: the
`transcript.text.delta` events as they come, committed at the first), and settled to the usage
of its `transcript.text.done`, which waits for the bill; a stream cut before it is settled to the
audio heard (the file's duration). A model that does not stream (whisper-1: "Streaming is not
supported for the whisper-1 model and will be ignored") answers whole, relayed as the buffered
route does. Translations have no `stream` (`CreateTranslationRequest`): a 400 naming it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import anyio
import httpx

from gateway import audiotypes, auth, observability
from gateway.admission import billing
from gateway.api.answers import Inbound, Send
from gateway.api.metered import Metered, MeteredAnswer, capped, serve_prepared
from gateway.api.text import _END, _SILENT, KEEP_ALIVE, SSE_HEADERS, Answer, Served, TextCall, _Upcoming
from gateway.errors import InvalidRequest
from gateway.formats import CHAT
from gateway.formats.usage import Usage
from gateway.observability import logger
from gateway.prices import speech_cost, transcription_cost
from gateway.routing.channel import Channel
from gateway.routing.channels import get_catalog
from gateway.routing.failover import first_success_async
from gateway.routing.outbound import client as http_client
from gateway.settings import get_settings
from gateway.sse import SSEEvent, SSEParser, encode
from gateway.store.aws import here_unless_it_waits
from gateway.tokens import estimate_tokens
from gateway.upstreams.base import ByteStream, UpstreamError
from gateway.upstreams.chat import TRANSCRIPT_DONE, ChatClient
from gateway.upstreams.clients import client_for

SPEECH_ROUTE = "/v1/audio/speech"
PROTOCOLS = ("chat",)
#: Audio tokens a second of speech or of heard audio takes, where an upstream reports none: new-api's
#: estimate (`relay/channel/openai/audio.go`: 1000 a minute). Unverified against OpenAI's own count.
AUDIO_TOKENS_PER_SECOND = Decimal(1000) / 60
#: The most speech one character makes at speed 1 (about 15 characters a second spoken, twice over).
WORST_SECONDS_PER_CHARACTER = Decimal("0.15")
#: The most a copy of relayed audio is kept to measure its duration (a token-sold model's bill).
MAX_MEASURED_BYTES = 32 * 1024 * 1024
PCM_BYTES_PER_SECOND = 24_000 * 2  # OpenAI's pcm: 24 kHz, 16-bit, mono, no header


# ---------------------------------------------------------------------------------------------
# Speech

def worst_audio_tokens(characters: int, speed: float | None) -> int:
    seconds = WORST_SECONDS_PER_CHARACTER * characters / Decimal(str(speed or 1))
    return math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)


def _prepare_speech(inbound: Inbound) -> Metered:
    from gateway.schemas.audio import SpeechRequest
    from gateway.validation import parse_json, parse_model

    principal = auth.authenticate(inbound.headers, inbound.query)
    request = parse_model(SpeechRequest, parse_json(inbound.body))
    principal.require_model(request.model)
    price, channels = get_catalog().serving(request.model, PROTOCOLS, group=principal.group)
    observability.set_model(request.model)
    tokens = estimate_tokens(request.input) + estimate_tokens(request.instructions or "")
    hold = speech_cost(price, characters=len(request.input), input_tokens=tokens,
                       audio_tokens=worst_audio_tokens(len(request.input), request.speed))
    call = TextCall("speech", CHAT, SPEECH_ROUTE, request.model, request.model_dump(exclude_unset=True),
                    stream=True, include_usage=False, input_tokens=tokens, output_tokens=0)
    reservation = billing.reserve_request(principal, hold, model=request.model, route=SPEECH_ROUTE,
                                          request_id=inbound.request_id, tokens=tokens)
    return Metered(call, principal, price, channels, reservation, request)


class SpeechAnswer(Answer):
    """The upstream's audio (or events) relayed chunk by chunk; billed before the last one goes."""

    def __init__(self, metered: Metered, upcoming: _Upcoming, first: bytes, content_type: str, channel: Channel):
        super().__init__(metered.call, metered.price, metered.reservation, channel)
        self.metered, self.upcoming, self.first = metered, upcoming, first
        self.sse = metered.request.stream_format == "sse"
        self.headers = SSE_HEADERS if self.sse else {"content-type": content_type, "cache-control": "no-cache",
                                                     "x-accel-buffering": "no"}
        self.relayed = 0
        self.parser = SSEParser() if self.sse else None
        self.reported: dict[str, Any] | None = None  # the usage of `speech.audio.done`
        self.copy: bytearray | None = bytearray() if (not self.sse and metered.price.per_million_characters
                                                      is None) else None

    def _watch(self, chunk: bytes) -> None:
        self.relayed += len(chunk)
        if self.parser is not None:
            for event in self.parser.feed(chunk):
                try:
                    data = event.json()
                except ValueError:
                    continue
                if isinstance(data, dict) and data.get("type") == "speech.audio.done":
                    usage = data.get("usage")
                    self.reported = usage if isinstance(usage, dict) else {}
        elif self.copy is not None and len(self.copy) + len(chunk) <= MAX_MEASURED_BYTES:
            self.copy += chunk

    async def send_to(self, send: Send) -> None:
        outcome, pending = "client_gone", self.first
        interval = get_settings().stream_keepalive_seconds
        try:
            failure = None
            try:
                while True:
                    upcoming = await self.upcoming.next(interval)
                    if upcoming is _SILENT:
                        if self.sse:
                            await send(KEEP_ALIVE)
                        continue
                    if upcoming is _END:
                        break
                    self._watch(pending)
                    await send(pending)
                    pending = upcoming
            except UpstreamError as exc:
                failure = exc.message
                logger.warning("upstream speech failed", extra={"channel": self.channel.name, "error": exc.message})
            self._watch(pending)
            done = failure is None and self.upcoming.events.completed and (not self.sse or self.reported is not None)
            outcome = "completed" if done else "cut"
            await self._close(Usage(0, 0), outcome)
            await send(pending)
        finally:
            if not self._closed:
                await self._close(Usage(0, 0), outcome)
            await self.upcoming.aclose()

    async def unsent(self) -> None:
        await self._close(Usage(0, 0), "client_gone")

    def _bill(self) -> tuple[int, dict[str, Any]]:
        request, price = self.metered.request, self.price
        if price.per_million_characters is not None:
            characters = len(request.input)
            return speech_cost(price, characters=characters), {"characters": characters}
        if self.reported is not None and isinstance(self.reported.get("output_tokens"), int):
            input_tokens = self.reported.get("input_tokens")
            input_tokens = input_tokens if isinstance(input_tokens, int) else self.call.input_tokens
            audio = self.reported["output_tokens"]
            return (speech_cost(price, input_tokens=input_tokens, audio_tokens=audio),
                    {"input_tokens": input_tokens, "audio_tokens": audio, "usage_source": "upstream"})
        seconds = self._seconds()
        audio = math.ceil(Decimal(str(seconds)) * AUDIO_TOKENS_PER_SECOND) if seconds is not None else None
        if audio is None:  # nothing to measure: the hold, which covers the most it can be
            return self.reservation.base_hold, {"usage_source": "hold"}
        return (speech_cost(price, input_tokens=self.call.input_tokens, audio_tokens=audio),
                {"input_tokens": self.call.input_tokens, "audio_tokens": audio, "seconds": seconds,
                 "usage_source": "duration"})

    def _seconds(self) -> float | None:
        if self.copy is None or not self.copy:
            return None
        if self.metered.request.response_format == "pcm":
            return len(self.copy) / PCM_BYTES_PER_SECOND
        try:
            return audiotypes.read(bytes(self.copy)).seconds
        except InvalidRequest:
            return None

    def _settle(self, usage: Usage, outcome: str) -> None:
        units, detail = self._bill() if self.relayed else (0, {})
        units = capped(units, self.reservation)
        detail = {"channel": self.channel.name, "outcome": outcome, "stream_format": self.metered.request.stream_format,
                  "bytes": self.relayed, **detail}
        self._write_bill(units, detail, "speech served")


async def _speech_attempt(metered: Metered, channel: Channel, http: httpx.AsyncClient) -> SpeechAnswer:
    from gateway.schemas.audio import SPEECH_TYPES

    client = cast(ChatClient, client_for(channel, http))
    stream: ByteStream = client.speech({**metered.call.body, "model": channel.upstream_model(metered.call.model)})
    upcoming = _Upcoming(stream)
    try:
        first = _END
        while first is _SILENT or first is _END:  # the first chunk decides; an empty answer is a failure
            first = await upcoming.next(get_settings().stream_keepalive_seconds)
            if first is _END:
                raise UpstreamError(None, "upstream speech ended without any audio", retryable=True)
    except BaseException:
        await upcoming.aclose()
        raise
    given = stream.headers.get("content-type", "") if stream.headers is not None else ""
    fmt = metered.request.response_format
    content_type = given if given.startswith("audio/") else SPEECH_TYPES[fmt]
    return SpeechAnswer(metered, upcoming, cast(bytes, first), content_type, channel)


async def speech(inbound: Inbound, *, http: httpx.AsyncClient | None = None) -> SpeechAnswer:
    metered = await here_unless_it_waits(_prepare_speech, inbound)
    client = http or http_client()
    try:
        answer, _ = await first_success_async(metered.channels, lambda c: _speech_attempt(metered, c, client),
                                              offload=anyio.to_thread.run_sync)
        return answer
    except BaseException as exc:
        reason = getattr(exc, "message", type(exc).__name__)[:200]
        failed = isinstance(exc, Exception)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: billing.refund(metered.reservation, reason=reason, error=failed))
        raise


# ---------------------------------------------------------------------------------------------
# Transcriptions and translations

@dataclass(frozen=True)
class _Upload:
    form: Any  # TranscriptionForm
    file: Any  # UploadedFile
    passed: dict[str, Any]  # the fields to send on
    audio: audiotypes.Audio


_LENGTH_FORMATS = {"transcription": ("json", "verbose_json"), "translation": ("verbose_json",)}


def _prepare_text(operation: str, inbound: Inbound) -> Metered:
    from gateway.multipart import check_request_size, parse_multipart
    from gateway.schemas.audio import transcription_form

    principal = auth.authenticate(inbound.headers, inbound.query)
    check_request_size(len(inbound.body))
    content_type = next((v for k, v in inbound.headers.items() if k.lower() == "content-type"), "")
    form, file, passed = transcription_form(parse_multipart(inbound.body, content_type), operation)
    audio = audiotypes.read(file.data)  # not audio: a 400 before any hold or upstream call
    if audio.seconds is None and form.response_format not in _LENGTH_FORMATS[operation]:
        raise InvalidRequest(f"file: a {audio.format} file's length cannot be read here, so a {operation} of one "
                             f"needs a response_format that reports it ({' or '.join(_LENGTH_FORMATS[operation])})",
                             param="file")
    principal.require_model(form.model)
    price, channels = get_catalog().serving(form.model, PROTOCOLS, group=principal.group)
    observability.set_model(form.model)
    route = f"/v1/audio/{operation}s"
    prompt = estimate_tokens(form.prompt or "")
    longest = Decimal(str(audio.max_seconds))
    hold = transcription_cost(price, seconds=longest.to_integral_value(rounding="ROUND_CEILING"),
                              audio_tokens=math.ceil(longest * AUDIO_TOKENS_PER_SECOND), text_tokens=prompt,
                              output_tokens=math.ceil(longest * AUDIO_TOKENS_PER_SECOND))
    call = TextCall(operation, CHAT, route, form.model, {}, stream=form.stream, include_usage=False,
                    input_tokens=prompt, output_tokens=0)
    reservation = billing.reserve_request(principal, hold, model=form.model, route=route,
                                          request_id=inbound.request_id, tokens=prompt)
    return Metered(call, principal, price, channels, reservation, _Upload(form, file, passed, audio))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def transcription_bill(price: Any, answer: Any, audio: audiotypes.Audio, prompt_tokens: int) -> tuple[int, dict]:
    """Units and ledger detail from the upstream's usage, else its `duration`, else the file's."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if isinstance(usage, dict) and usage.get("type") == "tokens" and price.per_audio_second is None:
        details = usage.get("input_token_details") or {}
        audio_tokens = _number(details.get("audio_tokens"))
        text_tokens = _number(details.get("text_tokens"))
        input_tokens = _number(usage.get("input_tokens")) or 0
        output_tokens = _number(usage.get("output_tokens")) or 0
        if audio_tokens is None:  # no split: the input is the audio's
            audio_tokens, text_tokens = input_tokens, 0
        units = transcription_cost(price, audio_tokens=int(audio_tokens), text_tokens=int(text_tokens or 0),
                                   output_tokens=int(output_tokens))
        return units, {"usage_source": "upstream", "audio_tokens": int(audio_tokens),
                       "text_tokens": int(text_tokens or 0), "output_tokens": int(output_tokens)}
    seconds, source = None, "upstream"
    if isinstance(usage, dict) and usage.get("type") == "duration":
        seconds = _number(usage.get("seconds"))
    if seconds is None and isinstance(answer, dict):
        seconds, source = _number(answer.get("duration")), "duration"
    if seconds is None and audio.seconds is not None:
        seconds, source = audio.seconds, "file"
    if seconds is None:  # WebM and an answer that reports nothing: the longest the file can be
        seconds, source = audio.max_seconds, "size"
    exact = Decimal(str(seconds))
    units = transcription_cost(price, seconds=exact, audio_tokens=math.ceil(exact * AUDIO_TOKENS_PER_SECOND),
                               text_tokens=prompt_tokens)
    return units, {"usage_source": source, "seconds": float(exact)}


def _upstream_form(metered: Metered, channel: Channel) -> tuple[dict[str, Any], tuple[str, bytes, str]]:
    upload: _Upload = metered.request
    fields = {**upload.passed, "model": channel.upstream_model(metered.call.model)}
    return fields, (upload.file.filename or f"audio.{upload.audio.format}", upload.file.data, upload.file.content_type)


async def _text_attempt(metered: Metered, channel: Channel, http: httpx.AsyncClient) -> MeteredAnswer:
    client = cast(ChatClient, client_for(channel, http))
    fields, file = _upstream_form(metered, channel)
    content = await client.audio_text(metered.call.operation, fields, file)
    return _text_answer(metered, channel, content, client.last_headers.get("content-type", ""))


def _text_answer(metered: Metered, channel: Channel, content: bytes, given: str) -> MeteredAnswer:
    """A whole transcription or translation (JSON or text, as asked), billed to what it reports."""
    upload: _Upload = metered.request
    if upload.form.response_format in ("json", "verbose_json", "diarized_json"):
        try:
            answer = json.loads(content)
        except ValueError:
            raise UpstreamError(None, "upstream transcription answer is not JSON", retryable=True) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
            raise UpstreamError(None, "upstream transcription answer has no text", retryable=True)
        units, detail = transcription_bill(metered.price, answer, upload.audio, metered.call.input_tokens)
        return MeteredAnswer(answer, capped(units, metered.reservation), {**detail, "format": upload.audio.format},
                             call=metered.call, price=metered.price, reservation=metered.reservation,
                             channel=channel)
    units, detail = transcription_bill(metered.price, None, upload.audio, metered.call.input_tokens)
    content_type = given if given.startswith("text/") else "text/plain; charset=utf-8"
    return MeteredAnswer(content, capped(units, metered.reservation), {**detail, "format": upload.audio.format},
                         content_type=content_type, call=metered.call, price=metered.price,
                         reservation=metered.reservation, channel=channel)


class TranscriptAnswer(Answer):
    """A streamed transcription: each event relayed as it comes; from `transcript.text.done` on
    (the upstream's usage in it) the events wait for the bill, so a client that has the whole
    transcript can read what it cost."""

    headers = SSE_HEADERS

    def __init__(self, metered: Metered, upcoming: _Upcoming, first: Any, channel: Channel):
        super().__init__(metered.call, metered.price, metered.reservation, channel)
        self.metered, self.upcoming, self.first = metered, upcoming, first
        self.done: dict[str, Any] | None = None  # the `transcript.text.done` event

    def _relayed(self, event: SSEEvent) -> bytes | None:
        try:
            data = event.json()
        except ValueError:
            return None  # not JSON: nothing the SDK could read
        if not isinstance(data, dict):
            return None
        if data.get("type") == TRANSCRIPT_DONE or event.event == TRANSCRIPT_DONE:
            self.done = data
        return encode(data, event.event)

    async def send_to(self, send: Send) -> None:
        outcome = "client_gone"
        held: list[bytes] = []
        try:
            failure, event, interval = None, self.first, get_settings().stream_keepalive_seconds
            try:
                while event is not _END:
                    if event is _SILENT:
                        if not held:
                            await send(KEEP_ALIVE)
                    elif (chunk := self._relayed(event)) is not None:
                        if self.done is not None:
                            held.append(chunk)
                        else:
                            await send(chunk)
                    event = await self.upcoming.next(interval)
            except UpstreamError as exc:
                failure = exc.message
                logger.warning("upstream transcription stream failed",
                               extra={"channel": self.channel.name, "error": exc.message})
            outcome = "completed" if failure is None and self.done is not None else "cut"
            if outcome == "cut":  # the openai SDK raises on an event carrying `error`
                held.append(encode({"error": {"message": failure or "the upstream stream ended before its final event",
                                              "type": "upstream_error", "param": None, "code": "upstream_error"}}))
            await self._close(Usage(0, 0), outcome)
            for chunk in held:
                await send(chunk)
        finally:
            if not self._closed:  # the client left, or the relay was cancelled
                await self._close(Usage(0, 0), outcome)
            await self.upcoming.aclose()

    async def unsent(self) -> None:
        await self._close(Usage(0, 0), "client_gone")

    def _settle(self, usage: Usage, outcome: str) -> None:
        # The done event's usage; without it (a cut stream) the audio heard: the file's duration.
        upload: _Upload = self.metered.request
        units, detail = transcription_bill(self.price, self.done, upload.audio, self.call.input_tokens)
        units = capped(units, self.reservation)
        detail = {"channel": self.channel.name, "outcome": outcome, "stream": True, "format": upload.audio.format,
                  **detail}
        self._write_bill(units, detail, "request served")


async def _streamed_attempt(metered: Metered, channel: Channel, http: httpx.AsyncClient) -> Answer:
    client = cast(ChatClient, client_for(channel, http))
    fields, file = _upstream_form(metered, channel)
    events = client.stream_transcription(fields, file)
    try:
        await events.open()
        if not events.is_event_stream:  # a model that does not stream answered whole
            given = events.headers.get("content-type", "") if events.headers is not None else ""
            return _text_answer(metered, channel, await events.read_whole(), given)
    except BaseException:
        await events.aclose()
        raise
    upcoming = _Upcoming(events)
    try:
        # The first event decides (until it has come another channel may be tried); an upstream
        # still silent after the keep-alive interval is committed to, the client kept alive.
        first = await upcoming.next(get_settings().stream_keepalive_seconds)
        if first is _END:
            raise UpstreamError(None, "upstream transcription stream ended without any event", retryable=True)
    except BaseException:
        await upcoming.aclose()
        raise
    return TranscriptAnswer(metered, upcoming, first, channel)


async def transcriptions(inbound: Inbound, *, http: httpx.AsyncClient | None = None) -> Served:
    metered = await here_unless_it_waits(_prepare_text, "transcription", inbound)
    streamed = metered.request.form.stream
    return await serve_prepared(metered, _streamed_attempt if streamed else _text_attempt, inbound, http=http,
                                streamed=streamed)


async def translations(inbound: Inbound, *, http: httpx.AsyncClient | None = None) -> Served:
    metered = await here_unless_it_waits(_prepare_text, "translation", inbound)
    return await serve_prepared(metered, _text_attempt, inbound, http=http)
