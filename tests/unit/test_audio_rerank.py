"""The pieces of the audio, rerank and moderation routes that need no gateway: an upload's format
and duration (a lying header never overbills), the form's array fields and rules, what a
transcription is billed from, each rerank protocol's request and answer (against the simulators),
the new price kinds and a jina channel's variants."""

from __future__ import annotations

import asyncio
import io
import os
import struct
import wave
from decimal import Decimal

import httpx
import pytest

from gateway import audiotypes
from gateway.api.audio import transcription_bill
from gateway.api.models import kind_of
from gateway.api.requestlog import content_of, tokens_of
from gateway.errors import InvalidRequest
from gateway.multipart import parse_multipart
from gateway.prices import Price, moderation_cost, rerank_cost, speech_cost, usd_to_units
from gateway.routing.catalog import Catalog
from gateway.routing.channel import ChannelsConfigError
from gateway.schemas.audio import transcription_form
from gateway.schemas.rerank import RerankRequest
from gateway.upstreams.rerank import CohereClient, JinaClient
from gateway.validation import parse_model
from gateway_local.simulators._rerank import tokens as simulated_tokens
from gateway_local.simulators.audio import speech_audio, speech_seconds
from gateway_local.simulators.cohere import app as cohere_app
from gateway_local.simulators.jina import app as jina_app


def wav_of(seconds: float, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(b"\x00\x00" * int(seconds * rate))
    return out.getvalue()


# --- audiotypes -----------------------------------------------------------------------------------

def test_a_wav_reads_its_exact_duration_and_an_mp3_ogg_and_flac_theirs():
    audio = audiotypes.read(wav_of(2.37))
    assert audio.format == "wav" and audio.seconds == pytest.approx(2.37) and audio.max_seconds == pytest.approx(2.37)
    text = "x" * 40  # the simulator's speech: FFmpeg's encoders (PyAV)
    for fmt, sniffed in (("mp3", "mp3"), ("opus", "ogg"), ("flac", "flac")):
        read = audiotypes.read(speech_audio(text, fmt))
        assert read.format == sniffed and abs(read.seconds - speech_seconds(text)) < 0.1, fmt
        assert read.max_seconds >= read.seconds


def test_a_wav_header_claiming_hours_is_held_and_billed_for_the_bytes_it_has():
    honest = wav_of(1.0)
    lying = honest[:40] + struct.pack("<I", 0xFFFFFFF0) + honest[44:]
    audio = audiotypes.read(lying)
    assert audio.seconds == pytest.approx(1.0, abs=0.01) and audio.max_seconds == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("data", [
    b"not audio at all " * 50,  # text
    b"RIFF" + struct.pack("<I", 1000) + b"WAVE" + bytes(range(256)) * 3,  # a RIFF header and junk
    wav_of(1.0)[:30],  # a truncated header
    b"\xff\xfb" + os.urandom(20_000),  # an MPEG frame sync and random bytes: 0.03 s in 20 KB
])
def test_what_is_not_audio_is_a_400_naming_the_file(data):
    with pytest.raises(InvalidRequest) as caught:
        audiotypes.read(data)
    assert caught.value.param == "file" and caught.value.status == 400


def test_webm_is_taken_by_its_magic_bytes_with_no_duration():
    audio = audiotypes.read(b"\x1a\x45\xdf\xa3" + bytes(7500))
    assert audio.format == "webm" and audio.seconds is None and audio.max_seconds == pytest.approx(7504 / 750)


# --- the form --------------------------------------------------------------------------------------

def form_of(fields: list[tuple[str, str]], file: bytes | None = None) -> bytes:
    parts = [f'--b\r\nContent-Disposition: form-data; name="{n}"\r\n\r\n{v}\r\n'.encode() for n, v in fields]
    if file is not None:
        parts.append(b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
                     b"Content-Type: audio/wav\r\n\r\n" + file + b"\r\n")
    return b"".join(parts) + b"--b--\r\n"


def test_an_array_field_may_repeat_and_a_plain_one_may_not():
    body = form_of([("model", "m"), ("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
                    ("timestamp_granularities[]", "segment")], wav_of(0.5))
    fields, file, passed = transcription_form(parse_multipart(body, "multipart/form-data; boundary=b"),
                                              "transcription")
    assert fields.timestamp_granularities == ["word", "segment"] and file.filename == "a.wav"
    assert passed["timestamp_granularities[]"] == ["word", "segment"]
    with pytest.raises(InvalidRequest, match="model: is sent more than once"):
        parse_multipart(form_of([("model", "m"), ("model", "n")]), "multipart/form-data; boundary=b")


@pytest.mark.parametrize(("operation", "fields", "named"), [
    ("transcription", [("model", "m"), ("timestamp_granularities[]", "word")], "timestamp_granularities"),
    ("transcription", [("model", "m"), ("response_format", "xml")], "response_format"),
    ("transcription", [("model", "m"), ("temperature", "2")], "temperature"),
    ("translation", [("model", "m"), ("language", "fr")], "language"),
    ("translation", [("model", "m"), ("response_format", "diarized_json")], "response_format"),
])
def test_a_form_breaking_a_rule_is_a_400_naming_the_field(operation, fields, named):
    with pytest.raises(InvalidRequest) as caught:
        transcription_form(parse_multipart(form_of(fields, wav_of(0.2)), "multipart/form-data; boundary=b"),
                           operation)
    assert named in caught.value.message


# --- what a transcription is billed from -------------------------------------------------------------

PER_SECOND = Price(per_audio_second=Decimal("0.0001"))
PER_TOKEN = Price(audio_input_per_million=Decimal("6"), input_per_million=Decimal("2.5"),
                  output_per_million=Decimal("10"))
WAV = audiotypes.Audio("wav", 2.37, 2.37)


def test_a_transcription_is_billed_by_usage_then_duration_then_the_file():
    assert transcription_bill(PER_SECOND, {"usage": {"type": "duration", "seconds": 3}}, WAV, 0) == (
        usd_to_units(Decimal("0.0003")), {"usage_source": "upstream", "seconds": 3.0})
    assert transcription_bill(PER_SECOND, {"duration": 2.5}, WAV, 0)[1] == {"usage_source": "duration",
                                                                            "seconds": 2.5}
    assert transcription_bill(PER_SECOND, None, WAV, 0)[1] == {"usage_source": "file", "seconds": 2.37}
    webm = audiotypes.Audio("webm", None, 40.0)
    assert transcription_bill(PER_SECOND, {"text": "x"}, webm, 0)[1] == {"usage_source": "size", "seconds": 40.0}
    usage = {"type": "tokens", "input_tokens": 14, "output_tokens": 101, "total_tokens": 115,
             "input_token_details": {"text_tokens": 10, "audio_tokens": 4}}
    units, detail = transcription_bill(PER_TOKEN, {"usage": usage}, WAV, 0)
    assert units == usd_to_units((Decimal(4) * 6 + Decimal(10) * Decimal("2.5") + Decimal(101) * 10) / 1_000_000)
    assert detail["audio_tokens"] == 4 and detail["output_tokens"] == 101


# --- prices and kinds ------------------------------------------------------------------------------

@pytest.mark.parametrize(("route", "detail", "says", "tokens"), [
    ("/v1/audio/speech", {"characters": 44, "stream_format": "audio"}, "44 characters", (0, 0)),
    ("/v1/audio/speech", {"input_tokens": 5, "audio_tokens": 46}, "5 tokens in, 46 out", (5, 46)),
    ("/v1/audio/transcriptions", {"seconds": 2.37, "usage_source": "file", "stream": True},
     "2.37 s of audio (read from the file), streamed", (0, 0)),
    ("/v1/audio/transcriptions", {"audio_tokens": 40, "text_tokens": 3, "output_tokens": 9}, "43 tokens in, 9 out",
     (43, 9)),
    ("/v1/rerank", {"search_units": 1, "tokens": 25, "documents": 3}, "3 documents, 1 search unit(s), 25 tokens",
     (0, 0)),
    ("/v1/moderations", {"inputs": 2, "flagged": 1}, "2 input(s), 1 flagged", (0, 0)),
])
def test_the_request_log_says_each_audio_rerank_and_moderation_request_in_its_units(route, detail, says, tokens):
    entry = {"route": route, "outcome": "settled", "detail": detail}
    assert content_of(entry) == f"{route}, {says}" and tokens_of(detail, route) == tokens


def test_the_new_prices_have_their_own_kinds_and_units():
    assert kind_of(Price(per_search_unit=Decimal("0.002"))) == "rerank"
    assert kind_of(Price(rerank_per_million=Decimal("0.05"))) == "rerank"
    assert kind_of(Price(per_moderation=Decimal(0))) == "moderation"
    assert kind_of(Price(per_million_characters=Decimal(15))) == "speech"
    assert kind_of(Price(audio_input_per_million=Decimal(6))) == "transcription"
    assert rerank_cost(Price(per_search_unit=Decimal("0.002")), search_units=3, tokens=999) == 3000
    assert rerank_cost(Price(rerank_per_million=Decimal("1")), tokens=1_000_000) == 500_000
    assert moderation_cost(Price(per_moderation=Decimal(0)), 5) == 0
    assert speech_cost(Price(per_million_characters=Decimal(15)), characters=4096) == 30_720
    with pytest.raises(InvalidRequest, match="not priced for reranking"):
        rerank_cost(Price(input_per_million=Decimal(1)), tokens=5)


def test_a_jina_channel_may_name_its_variant_and_no_other_protocol_those():
    base = {"name": "r", "protocol": "jina", "base_url": "https://r.example", "api_key": "k", "models": ["*"]}
    assert Catalog.from_document({"channels": [{**base, "variant": "tei"}]}).channels[0].variant == "tei"
    with pytest.raises(ChannelsConfigError, match="variant"):
        Catalog.from_document({"channels": [{**base, "variant": "extended"}]})
    with pytest.raises(ChannelsConfigError, match="variant"):
        Catalog.from_document({"channels": [{**base, "protocol": "cohere", "variant": "tei"}]})


# --- rerank: the request and each protocol against its simulator --------------------------------------

def test_top_n_is_capped_at_the_documents_and_a_bad_document_named():
    request = parse_model(RerankRequest, {"model": "m", "query": "q", "documents": ["a", {"text": "b"}], "top_n": 9})
    assert request.results_wanted() == 2 and request.texts() == ["a", "b"] and request.search_units() == 1
    with pytest.raises(InvalidRequest, match=r"documents: .*\[1\]"):
        parse_model(RerankRequest, {"model": "m", "query": "q", "documents": ["a", 3]})


DOCS = ["blue sky", "red apples are sweet", "green grass", "apples"]
TOKENS = simulated_tokens("red apples", DOCS)  # Voyage's count: query x documents + documents


def ranked(client_type, app, **options):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
            client = client_type("http://sim", "sk-upstream", http, **options)
            return await client.rerank("m-rerank", "red apples", DOCS, 2, {})
    return asyncio.run(go())


@pytest.mark.parametrize(("client_type", "app", "options", "units", "tokens"), [
    (CohereClient, cohere_app, {}, 1, None),
    (JinaClient, jina_app, {}, None, TOKENS),
    (JinaClient, jina_app, {"variant": "voyage"}, None, TOKENS),
    (JinaClient, jina_app, {"variant": "tei"}, None, TOKENS),  # TEI: every text scored, tokens in a header
])
def test_each_rerank_protocol_is_read_into_one_shape(client_type, app, options, units, tokens):
    answer = ranked(client_type, app, **options)
    assert answer.scores[0][0] == 1 and answer.search_units == units and answer.tokens == tokens
    assert len(answer.scores) == (4 if options.get("variant") == "tei" else 2)
