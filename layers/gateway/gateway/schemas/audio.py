"""The request models of the audio routes, OpenAI's shapes (openai-openapi `openapi.yaml`
`CreateSpeechRequest`, `CreateTranscriptionRequest`, `CreateTranslationRequest`; the SDK's
`types/audio/speech_create_params.py`, `transcription_create_params.py`,
`translation_create_params.py`).

Speech is JSON; a transcription or translation is a multipart form (`gateway.multipart`), whose
text fields are read into `TranscriptionForm` here (numbers and booleans from their text, the
array fields `name[]` from their repeated parts)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from gateway.errors import InvalidRequest
from gateway.multipart import Form, UploadedFile
from gateway.schemas.shared import StrictBody
from gateway.schemas.text.shapes import ModelName, Num, Str

MAX_SPEECH_INPUT = 4096  # characters, `input` and `instructions` alike (maxLength in the spec)
SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
#: What each speech format is answered as (the spec says only application/octet-stream; these are
#: the types OpenAI-compatible servers send, docs/conformance.md).
SPEECH_TYPES = {"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac",
                "wav": "audio/wav", "pcm": "audio/pcm"}
TRANSCRIPT_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
TRANSLATION_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


class VoiceId(StrictBody):
    id: Annotated[Str, Field(min_length=1)]


class SpeechRequest(StrictBody):
    model: ModelName
    input: Annotated[Str, Field(min_length=1, max_length=MAX_SPEECH_INPUT)]
    voice: Annotated[Str, Field(min_length=1)] | VoiceId
    instructions: Annotated[Str, Field(max_length=MAX_SPEECH_INPUT)] | None = None
    response_format: Literal[SPEECH_FORMATS] = "mp3"  # type: ignore[valid-type]
    speed: Annotated[Num, Field(ge=0.25, le=4)] | None = None
    stream_format: Literal["sse", "audio"] = "audio"


# --- transcriptions and translations -----------------------------------------------------------

_FIELDS = {
    "transcription": {"file", "model", "language", "prompt", "response_format", "temperature",
                      "timestamp_granularities[]", "include[]", "stream", "chunking_strategy", "languages[]",
                      "keywords[]", "known_speaker_names[]", "known_speaker_references[]"},
    "translation": {"file", "model", "prompt", "response_format", "temperature"},
}


class TranscriptionForm(StrictBody):
    """A transcription's or translation's fields (the file apart), checked."""

    operation: Literal["transcription", "translation"]
    model: ModelName
    language: Annotated[Str, Field(min_length=2, max_length=16)] | None = None
    prompt: Str | None = None
    response_format: Str = "json"
    temperature: Annotated[Num, Field(ge=0, le=1)] | None = None
    timestamp_granularities: list[Literal["word", "segment"]] = []
    include: list[Literal["logprobs"]] = []
    stream: bool = False

    @model_validator(mode="after")
    def _rules(self) -> TranscriptionForm:
        formats = TRANSCRIPT_FORMATS if self.operation == "transcription" else TRANSLATION_FORMATS
        if self.response_format not in formats:
            raise ValueError(f"response_format: must be one of {', '.join(formats)}")
        if self.timestamp_granularities and self.response_format != "verbose_json":
            raise ValueError("timestamp_granularities[]: requires response_format verbose_json")
        # `stream` with any format: the upstream judges (whisper-1 ignores it and answers as asked).
        return self


def _number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidRequest(f"{name}: must be a number", param=name) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidRequest(f"{name}: must be a finite number", param=name)
    return value


def _boolean(name: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise InvalidRequest(f"{name}: must be true or false", param=name)
    return text.lower() == "true"


def transcription_form(form: Form, operation: str) -> tuple[TranscriptionForm, UploadedFile, dict[str, Any]]:
    """The checked fields, the file, and every field to send on (as received)."""
    from gateway.validation import parse_model

    allowed = _FIELDS[operation]
    if operation == "translation" and "stream" in form.fields:
        raise InvalidRequest("stream: translations are not streamed (OpenAI's CreateTranslationRequest has no "
                             "stream); leave it unset for the whole answer", param="stream")
    for name in [*form.fields, *form.files]:
        if name not in allowed:
            raise InvalidRequest(f"{name}: is not a field of this request (one of {', '.join(sorted(allowed))})",
                                 param=name)
    files = form.files_named("file")
    if not files:
        raise InvalidRequest("file: is required (the audio, as a file part)", param="file")
    if len(files) > 1:
        raise InvalidRequest("file: takes one file", param="file")
    data: dict[str, Any] = {"operation": operation}
    for name, text in form.fields.items():
        if name.endswith("[]"):
            data[name[:-2]] = form.values_named(name)
        elif name == "temperature":
            data[name] = _number(name, text)
        elif name == "stream":
            data[name] = _boolean(name, text)
        elif name not in ("chunking_strategy",):
            data[name] = text
    if "model" not in data:
        raise InvalidRequest("model: is required", param="model")
    fields = parse_model(TranscriptionForm, data)
    passed = {name: form.values_named(name) if name.endswith("[]") else text for name, text in form.fields.items()}
    return fields, files[0], passed
