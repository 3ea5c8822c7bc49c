"""Simulated speech, transcription, translation and moderation endpoints of the chat protocol
(dev-only), mounted inside the chat simulator (`routes`, paths relative to `/chat`).

- `POST /v1/audio/speech`: real audio for the input, about 60 ms a character of a quiet tone,
  24 kHz mono: `wav` (a RIFF/WAVE file, stdlib `wave`), `pcm` (the same 16-bit samples, no
  header, as OpenAI's), and `mp3` (MPEG-2 Layer III), `opus` (Ogg Opus), `aac` (ADTS) and
  `flac` encoded by FFmpeg through PyAV (a dev-only dependency). Sent in chunks, paced, so a
  client sees it arrive. `stream_format: sse` answers
  `speech.audio.delta` events (base64) then `speech.audio.done` with its usage (openapi.yaml
  `SpeechAudioDeltaEvent`, `SpeechAudioDoneEvent`), refused for tts-1 and tts-1-hd ("sse is not
  supported for tts-1 or tts-1-hd"). Rules as the spec's `CreateSpeechRequest`.
- `POST /v1/audio/transcriptions` and `/translations`: multipart; the file's real duration read
  with tinytag (WebM: its size at 32 kbit/s, since nothing pure-Python reads it); what is not
  audio a 400 with OpenAI's words ("Invalid file format. Supported formats: [...]"). Every
  response_format: json (`usage {type: duration, seconds}` rounded up, as the spec's example),
  verbose_json (task, language, duration, text, segments, words when asked), text, srt, vtt.
  `stream: true` on a transcription answers `transcript.text.delta` events, then
  `transcript.text.done` with token usage (openapi.yaml `TranscriptTextDeltaEvent`,
  `TranscriptTextDoneEvent`; SDK `types/audio/transcription_text_*_event.py`), json or text
  only (the streaming models answer json: `AudioResponseFormat`), except for whisper-1, which
  ignores it ("Streaming is not supported for the `whisper-1` model and will be ignored");
  `#fault=cut` in the prompt ends the stream half-way. Translations have no `stream`.
- `POST /v1/moderations`: OpenAI's `CreateModerationResponse` (openai-openapi `openapi.yaml`;
  SDK `types/moderation.py`: every one of the 13 categories in `categories`, `category_scores`
  and `category_applied_input_types`, one result per input). Plain threats of violence (a small
  lexicon: "kill", "shoot", "stab", "hurt you", ...) are flagged as `violence` and
  `harassment/threatening`; anything else passes.

Errors in the chat envelope; `Authorization: Bearer <anything non-empty>` wanted.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import re
import struct
import uuid
import wave
from collections.abc import AsyncIterator
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.errors import InvalidRequest
from gateway.multipart import parse_multipart
from gateway.schemas.audio import SPEECH_TYPES, SpeechRequest
from gateway.schemas.moderation import ModerationRequest, TextPart
from gateway.tokens import estimate_tokens
from gateway.validation import parse_model

from ._text import error_json, fault_of, fault_status, json_body, paced_stream, token_delay

CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
              "self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
              "violence/graphic")
# Which categories an image can count in (SDK `CategoryAppliedInputTypes`): the rest are text only.
_IMAGE_CATEGORIES = frozenset({"self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "violence",
                               "violence/graphic"})
_THREAT = re.compile(r"\b(kill|murder|shoot|stab|strangle|behead|hurt you|beat you|break your)\b", re.IGNORECASE)


def error(status: int, message: str, param: str | None = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return error_json(status, {"error": {"message": message, "type": kind, "param": param, "code": None}})


def _authorised(request: Request) -> bool:
    header = request.headers.get("authorization", "")
    return header.startswith("Bearer ") and bool(header[7:].strip())


def _result(text: str, kind: str) -> dict[str, Any]:
    threat = bool(_THREAT.search(text))
    flagged = {c: threat and c in ("violence", "harassment/threatening", "harassment") for c in CATEGORIES}
    scores = {c: (0.91 if flagged[c] else 0.0004) for c in CATEGORIES}
    applied = {c: ([kind] if kind == "text" or c in _IMAGE_CATEGORIES else []) for c in CATEGORIES}
    return {"flagged": threat, "categories": flagged, "category_scores": scores,
            "category_applied_input_types": applied}


async def moderations(request: Request) -> Response:
    if not _authorised(request):
        return error(401, "You didn't provide an API key.")
    body = await json_body(request)
    if body is None:
        return error(400, "We could not parse the JSON body of your request.")
    if status := fault_status(fault_of(request, str(body.get("input", "")) if isinstance(body, dict) else "")):
        return error(status, f"The simulated upstream failed with {status} as asked.")
    try:
        req = parse_model(ModerationRequest, body)
    except InvalidRequest as exc:
        return error(400, exc.message, exc.param)
    items = [req.input] if isinstance(req.input, str) else req.input
    results = [_result(item, "text") if isinstance(item, str) else
               _result(item.text, "text") if isinstance(item, TextPart) else _result("", "image") for item in items]
    return JSONResponse({"id": f"modr-{uuid.uuid4().hex}", "model": req.model, "results": results})


# --- speech ------------------------------------------------------------------------------------

SECONDS_PER_CHARACTER = 0.06
RATE = 24_000  # OpenAI's pcm (and this simulator's wav): 24 kHz, 16-bit, mono
CHUNK = 4096
#: Each encoded format's container and FFmpeg encoder (OpenAI's opus is Ogg Opus, its aac ADTS).
ENCODED = {"mp3": ("mp3", "libmp3lame"), "opus": ("ogg", "libopus"), "aac": ("adts", "aac"), "flac": ("flac", "flac")}


def samples(seconds: float) -> bytes:
    """A quiet 440 Hz tone."""
    count = int(seconds * RATE)
    return b"".join(struct.pack("<h", int(2000 * math.sin(2 * math.pi * 440 * i / RATE))) for i in range(count))


def speech_seconds(text: str) -> float:
    return max(len(text) * SECONDS_PER_CHARACTER, 0.2)


def encoded(pcm: bytes, fmt: str) -> bytes:
    """`pcm` (24 kHz 16-bit mono) in `fmt`'s container, by FFmpeg's encoder (PyAV)."""
    import av  # dev-only, and a quarter-second import: only when asked
    from av.audio.stream import AudioStream

    container, codec = ENCODED[fmt]
    out = io.BytesIO()
    with av.open(out, "w", format=container) as muxer:
        stream = cast(AudioStream, muxer.add_stream(codec, rate=RATE, layout="mono"))
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.planes[0].update(pcm)
        frame.rate = RATE
        for packet in [*stream.encode(frame), *stream.encode(None)]:  # the encoder cuts its own frames
            muxer.mux(packet)
    return out.getvalue()


def speech_audio(text: str, fmt: str) -> bytes:
    pcm = samples(speech_seconds(text))
    if fmt == "pcm":
        return pcm
    if fmt in ENCODED:
        return encoded(pcm, fmt)
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(RATE)
        writer.writeframes(pcm)
    return out.getvalue()


async def _paced(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
        await asyncio.sleep(token_delay())


async def speech(request: Request) -> Response:
    if not _authorised(request):
        return error(401, "You didn't provide an API key.")
    body = await json_body(request)
    if body is None:
        return error(400, "We could not parse the JSON body of your request.")
    if status := fault_status(fault_of(request, str(body.get("input", "")) if isinstance(body, dict) else "")):
        return error(status, f"The simulated upstream failed with {status} as asked.")
    try:
        req = parse_model(SpeechRequest, body)
    except InvalidRequest as exc:
        return error(400, exc.message, exc.param)
    if req.stream_format == "sse" and req.model in ("tts-1", "tts-1-hd"):
        return error(400, "stream_format sse is not supported for tts-1 or tts-1-hd", "stream_format")
    audio = speech_audio(req.input, req.response_format)
    pieces = [audio[i:i + CHUNK] for i in range(0, len(audio), CHUNK)]
    if req.stream_format == "sse":
        input_tokens = estimate_tokens(req.input)
        # 1000 audio tokens a minute of speech (new-api's figure, `relay/channel/openai/audio.go`)
        output_tokens = math.ceil(speech_seconds(req.input) * 1000 / 60)
        events = [f"data: {json.dumps({'type': 'speech.audio.delta', 'audio': base64.b64encode(p).decode()})}\n\n"
                  .encode() for p in pieces]
        done = {"type": "speech.audio.done", "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                                       "total_tokens": input_tokens + output_tokens}}
        events.append(f"data: {json.dumps(done)}\n\n".encode())
        return StreamingResponse(_paced(events), media_type="text/event-stream")
    return StreamingResponse(_paced(pieces), media_type=SPEECH_TYPES[req.response_format])


# --- transcriptions and translations ------------------------------------------------------------

SUPPORTED = "['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']"
WEBM_BYTES_PER_SECOND = 4000  # 32 kbit/s: a browser's MediaRecorder Opus


def _duration(data: bytes) -> float | None:
    from tinytag import TinyTag

    if data[:4] == b"\x1a\x45\xdf\xa3":
        return len(data) / WEBM_BYTES_PER_SECOND
    try:
        seconds = TinyTag.get(file_obj=io.BytesIO(data), tags=False).duration
    except Exception:
        return None
    return seconds if seconds and seconds > 0 and math.isfinite(seconds) else None


def _stamp(seconds: float, comma: bool) -> str:
    whole = int(seconds)
    millis = int(round((seconds - whole) * 1000))
    text = f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}.{millis:03d}"
    return text.replace(".", ",") if comma else text


async def _audio_text(request: Request, operation: str) -> Response:
    if not _authorised(request):
        return error(401, "You didn't provide an API key.")
    try:
        form = parse_multipart(await request.body(), request.headers.get("content-type", ""))
    except InvalidRequest as exc:
        return error(400, exc.message, exc.param)
    upload = form.files.get("file")
    if upload is None or "model" not in form.fields:
        return error(400, "file and model are required", "file" if upload is None else "model")
    fault = fault_of(request, form.fields.get("prompt", ""))
    if status := fault_status(fault):
        return error(status, f"The simulated upstream failed with {status} as asked.")
    seconds = _duration(upload.data)
    if seconds is None:
        return error(400, f"Invalid file format. Supported formats: {SUPPORTED}", "file")
    fmt = form.fields.get("response_format", "json")
    task = "transcribe" if operation == "transcriptions" else "translate"
    text = f"Simulated {task} of {seconds:.2f} seconds of audio."
    usage = {"type": "duration", "seconds": math.ceil(seconds)}
    if "stream" in form.fields:
        if task == "translate":  # CreateTranslationRequest: additionalProperties false, no stream
            return error(400, "Unrecognized request argument supplied: stream", "stream")
        if form.fields["stream"].lower() == "true" and form.fields["model"] != "whisper-1":
            if fmt not in ("json", "text"):
                return error(400, f"response_format '{fmt}' is not compatible with stream; use json or text",
                             "response_format")
            return _transcript_stream(text, seconds, form.fields.get("prompt", ""), fault)
    if fmt == "text":
        return PlainTextResponse(text + "\n")
    if fmt in ("srt", "vtt"):
        start, end = _stamp(0, fmt == "srt"), _stamp(seconds, fmt == "srt")
        cue = f"1\n{start} --> {end}\n{text}\n" if fmt == "srt" else f"WEBVTT\n\n{start} --> {end}\n{text}\n"
        return PlainTextResponse(cue)
    if fmt == "json":
        return JSONResponse({"text": text, **({"usage": usage} if task == "transcribe" else {})})
    segment = {"id": 0, "seek": 0, "start": 0.0, "end": seconds, "text": text, "tokens": [50364, 50365],
               "temperature": 0.0, "avg_logprob": -0.2, "compression_ratio": 1.1, "no_speech_prob": 0.01}
    answer: dict[str, Any] = {"task": task, "language": "english", "duration": seconds, "text": text,
                              "segments": [segment]}
    if "word" in form.values_named("timestamp_granularities[]"):
        words = text.split()
        step = seconds / len(words)
        answer["words"] = [{"word": w, "start": round(i * step, 3), "end": round((i + 1) * step, 3)}
                           for i, w in enumerate(words)]
    if task == "transcribe":
        answer["usage"] = usage
    return JSONResponse(answer)


#: Audio tokens a second heard (new-api's 1000 a minute, `relay/channel/openai/audio.go`; OpenAI's own
#: count is unverified).
AUDIO_TOKENS_PER_SECOND = 1000 / 60


def _transcript_stream(text: str, seconds: float, prompt: str, fault: str | None) -> Response:
    """The deltas, a word each, then the done event with the whole text and its token usage."""
    audio_tokens, text_tokens = math.ceil(seconds * AUDIO_TOKENS_PER_SECOND), estimate_tokens(prompt)
    output_tokens = estimate_tokens(text)
    words = text.split(" ")
    deltas = [{"type": "transcript.text.delta", "delta": word if not i else f" {word}"} for i, word in enumerate(words)]
    done = {"type": "transcript.text.done", "text": text, "usage": {
        "type": "tokens", "input_tokens": audio_tokens + text_tokens, "output_tokens": output_tokens,
        "total_tokens": audio_tokens + text_tokens + output_tokens,
        "input_token_details": {"audio_tokens": audio_tokens, "text_tokens": text_tokens}}}
    return paced_stream([f"data: {json.dumps(e)}\n\n".encode() for e in [*deltas, done]], fault)


async def transcriptions(request: Request) -> Response:
    return await _audio_text(request, "transcriptions")


async def translations(request: Request) -> Response:
    return await _audio_text(request, "translations")


routes = [
    Route("/v1/audio/speech", speech, methods=["POST"]),
    Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
    Route("/v1/audio/translations", translations, methods=["POST"]),
    Route("/v1/moderations", moderations, methods=["POST"]),
]
