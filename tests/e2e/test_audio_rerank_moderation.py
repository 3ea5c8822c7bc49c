"""Speech, transcriptions, translations, rerank and moderations through the local gateway's
defaults (`make run`: m-tts, m-transcribe, m-rerank, m-moderation at the simulators), the way a
user calls them: the openai SDK, and httpx for the Cohere- and Jina-shaped rerank.

Each billed call moves the key's usage by exactly its price; a bad file costs nothing."""

from __future__ import annotations

import base64
import io
import json
import math
import wave
from decimal import Decimal

import openai
import pytest

from gateway.prices import SHIPPED, UNITS_PER_USD, usd_to_units
from gateway.schemas.audio import SPEECH_TYPES
from tests.e2e.conftest import DEMO_ACCESS_TOKEN, usage_cents

pytestmark = pytest.mark.e2e

CENTS_PER_UNIT = 100 / UNITS_PER_USD


@pytest.fixture
def spent(http, demo_key):
    start = usage_cents(http, demo_key)
    return lambda: round(usage_cents(http, demo_key) - start, 6)


def cents(units: int) -> float:
    return round(units * CENTS_PER_UNIT, 6)


def wav_of(seconds: float, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(b"\x01\x00" * int(seconds * rate))
    return out.getvalue()


def newest_log_entry(http) -> dict:
    answer = http.get("/api/log/self", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"},
                      params={"page_size": 1})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["items"][0]


# --- speech --------------------------------------------------------------------------------------

def test_speech_streams_a_wav_as_it_comes_and_costs_its_characters(openai_client, spent):
    text = "The quick brown fox jumps over the lazy dog."
    with openai_client.audio.speech.with_streaming_response.create(
            model="m-tts", voice="alloy", input=text, response_format="wav") as answer:
        assert answer.headers["content-type"] == "audio/wav"
        chunks = [chunk for chunk in answer.iter_bytes() if chunk]
    audio = b"".join(chunks)
    assert len(chunks) > 1 and audio[:4] == b"RIFF" and audio[8:12] == b"WAVE"
    with wave.open(io.BytesIO(audio)) as reader:  # a valid RIFF file, every frame there
        assert reader.getframerate() == 24_000 and reader.getnframes() > 0
        assert reader.getnframes() * 2 + 44 == len(audio)
    characters = usd_to_units(SHIPPED["m-tts"].per_million_characters * len(text) / Decimal(1_000_000))
    assert spent() == cents(characters)


def test_speech_as_events_ends_with_its_usage(openai_client, spent):
    with openai_client.audio.speech.with_streaming_response.create(
            model="m-tts", voice="alloy", input="Hello there", response_format="mp3", stream_format="sse") as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert [e["type"] for e in events][-1] == "speech.audio.done" and events[-1]["usage"]["output_tokens"] > 0
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert decoded(audio) == ("mp3", "mp3float", pytest.approx(len("Hello there") * 0.06, abs=0.1))
    assert spent() > 0


def decoded(audio: bytes) -> tuple[str, str, float]:
    """The container, the decoder and the seconds FFmpeg reads (PyAV)."""
    import av

    with av.open(io.BytesIO(audio)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return container.format.name, stream.codec_context.name, samples / stream.rate


# What each asked format is, read back by FFmpeg: its container, its codec.
FORMATS = {"mp3": ("mp3", "mp3float"), "opus": ("ogg", "opus"), "aac": ("aac", "aac"), "flac": ("flac", "flac"),
           "wav": ("wav", "pcm_s16le")}


def test_speech_answers_real_audio_in_every_format_asked(openai_client):
    text = "Every format is real audio."
    seconds = len(text) * 0.06
    for fmt, (container, codec) in FORMATS.items():
        with openai_client.audio.speech.with_streaming_response.create(
                model="m-tts", voice="alloy", input=text, response_format=fmt) as answer:
            assert answer.headers["content-type"] == SPEECH_TYPES[fmt]
            audio = answer.read()
        assert decoded(audio) == (container, codec, pytest.approx(seconds, abs=0.1)), fmt
    pcm = openai_client.audio.speech.create(model="m-tts", voice="alloy", input=text, response_format="pcm").read()
    assert len(pcm) == int(seconds * 24_000) * 2  # headerless 24 kHz 16-bit mono


def test_a_bad_speech_field_is_a_400_naming_it_and_costs_nothing(openai_client, spent):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.audio.speech.create(model="m-tts", voice="alloy", input="hi", speed=9)
    assert caught.value.body["param"] == "speed"
    assert spent() == 0


# --- transcriptions and translations ---------------------------------------------------------------

def test_a_wav_is_transcribed_with_its_duration_and_billed(openai_client, http, spent):
    result = openai_client.audio.transcriptions.create(
        file=("talk.wav", wav_of(2.37), "audio/wav"), model="m-transcribe", response_format="verbose_json",
        timestamp_granularities=["word", "segment"])
    assert abs(result.duration - 2.37) < 0.1 and result.words and result.segments
    # The simulator reports OpenAI's usage: the seconds rounded up.
    seconds = usd_to_units(SHIPPED["m-transcribe"].per_audio_second * math.ceil(2.37))
    assert spent() == cents(seconds)
    entry = newest_log_entry(http)
    assert (entry["model_name"], entry["quota"]) == ("m-transcribe", seconds)


def test_a_wav_is_transcribed_as_a_stream_of_events_and_billed(openai_client, http, spent):
    stream = openai_client.audio.transcriptions.create(file=("talk.wav", wav_of(2.37), "audio/wav"),
                                                       model="m-transcribe", stream=True)
    events = list(stream)
    deltas, done = events[:-1], events[-1]
    assert len(deltas) > 1 and all(e.type == "transcript.text.delta" for e in deltas)
    assert done.type == "transcript.text.done" and "".join(e.delta for e in deltas) == done.text
    assert "2.37 seconds" in done.text and done.usage.input_token_details.audio_tokens > 0
    # m-transcribe is sold per second: the done event's tokens say nothing of seconds, so the file's.
    seconds = usd_to_units(SHIPPED["m-transcribe"].per_audio_second * Decimal("2.37"))
    assert spent() == cents(seconds)
    entry = newest_log_entry(http)
    assert (entry["model_name"], entry["quota"], entry["is_stream"]) == ("m-transcribe", seconds, True)
    assert entry["content"] == "/v1/audio/transcriptions, 2.37 s of audio (read from the file), streamed"


def test_a_wav_is_translated_as_text_and_billed_by_its_duration(openai_client, spent):
    text = openai_client.audio.translations.create(file=("talk.wav", wav_of(1.5), "audio/wav"),
                                                   model="m-transcribe", response_format="srt")
    assert "00:00:01,500" in text
    # A text answer reports no usage: the duration read from the file.
    assert spent() == cents(usd_to_units(SHIPPED["m-transcribe"].per_audio_second * Decimal("1.5")))


def test_garbage_in_a_wav_is_a_400_naming_the_file_and_costs_nothing(openai_client, spent):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.audio.transcriptions.create(file=("talk.wav", b"not audio at all " * 40, "audio/wav"),
                                                  model="m-transcribe")
    assert caught.value.body["param"] == "file"
    with pytest.raises(openai.BadRequestError):
        openai_client.audio.translations.create(file=("talk.wav", b"RIFF\x10\x00\x00\x00WAVEjunk" * 20, "audio/wav"),
                                                model="m-transcribe")
    assert spent() == 0


# --- rerank --------------------------------------------------------------------------------------

DOCUMENTS = ["Paris is the capital of France.", "The capital of Germany is Berlin.",
             "Bananas are rich in potassium."]


def test_rerank_puts_the_matching_document_first_caps_top_n_and_bills_a_search_unit(http, demo_key, spent):
    answer = http.post("/v1/rerank", headers={"Authorization": f"Bearer {demo_key}"}, json={
        "model": "m-rerank", "query": "capital of France", "documents": [DOCUMENTS[1], {"text": DOCUMENTS[0]},
                                                                         DOCUMENTS[2]],
        "top_n": 10, "return_documents": True})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert len(results) == 3 and results[0]["index"] == 1 and results[0]["document"] == {"text": DOCUMENTS[0]}
    assert [r["relevance_score"] for r in results] == sorted((r["relevance_score"] for r in results), reverse=True)
    assert spent() == cents(usd_to_units(SHIPPED["m-rerank"].per_search_unit))


def test_rerank_of_a_text_model_is_refused_and_costs_nothing(http, demo_key, spent):
    answer = http.post("/v1/rerank", headers={"Authorization": f"Bearer {demo_key}"},
                       json={"model": "m-small", "query": "q", "documents": ["a"]})
    assert answer.status_code in (400, 404) and answer.json()["error"]["param"] == "model"
    answer = http.post("/v1/rerank", headers={"Authorization": f"Bearer {demo_key}"},
                       json={"model": "m-rerank", "query": "q", "documents": []})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "documents"
    assert spent() == 0


# --- moderations ---------------------------------------------------------------------------------

def test_moderation_flags_a_threat_passes_a_calm_sentence_free_and_logged(openai_client, http, spent):
    result = openai_client.moderations.create(model="m-moderation",
                                              input=["I will kill you", "What a calm morning"])
    assert result.model == "m-moderation" and len(result.results) == 2
    assert result.results[0].flagged and result.results[0].categories.violence
    assert not result.results[1].flagged
    assert spent() == 0
    entry = newest_log_entry(http)
    assert (entry["model_name"], entry["quota"]) == ("m-moderation", 0)
    assert entry["content"] == "/v1/moderations, 2 input(s), 1 flagged"


# --- everywhere a model lives ----------------------------------------------------------------------

def test_the_new_models_are_listed_and_priced(openai_client, http):
    listed = {m.id for m in openai_client.models.list()}
    assert {"m-tts", "m-transcribe", "m-rerank", "m-moderation"} <= listed
    rows = http.get("/api/pricing", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"}).json()["data"]
    kinds = {r["model_name"]: r for r in rows}
    assert kinds["m-tts"]["kind"] == "speech" and kinds["m-tts"]["per_million_characters"] == 15.0
    assert kinds["m-transcribe"]["kind"] == "transcription" and kinds["m-rerank"]["kind"] == "rerank"
    assert kinds["m-moderation"] == {**kinds["m-moderation"], "kind": "moderation", "per_moderation": 0.0}
