"""Rerank, speech and transcriptions against the emulator with the real billing, the simulated
upstreams behind an `httpx.ASGITransport`: failover across channels and protocols before the
first byte, each rerank variant settled to what it reports, a refused call refunded in full."""

from __future__ import annotations

import io
import json
import uuid
import wave
from decimal import Decimal
from typing import Any

import anyio
import httpx
import pytest

from gateway.api import audio, moderations, rerank
from gateway.api.answers import Inbound
from gateway.errors import UpstreamFailed
from gateway.prices import SHIPPED, rerank_cost, speech_cost, transcription_cost, usd_to_units
from gateway.routing.catalog import Catalog
from gateway_local.server import simulators_app
from gateway_local.simulators._rerank import tokens as simulated_tokens
from tests.integration.money_support import open_reservations
from tests.integration.test_text import channel, events_of, ledger, quota

DOCS = ["The capital of Germany is Berlin.", "Paris is the capital of France.", "Bananas are yellow."]


@pytest.fixture
def routes(monkeypatch):
    def use(channels: list[dict[str, Any]], prices: dict[str, Any] | None = None) -> None:
        built = Catalog.from_document({"channels": channels, "prices": prices or {}})
        for module in (rerank, moderations, audio):
            monkeypatch.setattr(module, "get_catalog", lambda: built)
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "0")
    return use


def inbound(path: str, key: str, body: bytes, content_type: str = "application/json") -> Inbound:
    return Inbound(path=path, headers={"authorization": f"Bearer {key}", "content-type": content_type}, query={},
                   body=body, request_id=uuid.uuid4().hex)


def run(serve, request: Inbound) -> tuple[dict[str, str], list[bytes]]:
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()),
                                     base_url="http://sim") as http:
            answer = await serve(request, http=http)
            chunks: list[bytes] = []

            async def send(chunk: bytes) -> None:
                chunks.append(chunk)

            await answer.send_to(send)
            return answer.headers, chunks

    return anyio.run(scenario)


def rerank_request(key: str) -> Inbound:
    return inbound("/v1/rerank", key, json.dumps({"model": "m-rerank", "query": "capital of France",
                                                  "documents": DOCS, "top_n": 5}).encode())


def test_rerank_fails_over_from_a_failing_cohere_channel_to_a_tei_one_and_bills_a_search_unit(demo, routes):
    routes([channel("cohere", fault="503", priority=1), {**channel("jina"), "variant": "tei"}])
    request = rerank_request(demo["key"])
    _, chunks = run(rerank.rerank, request)
    answer = json.loads(b"".join(chunks))
    assert [r["index"] for r in answer["results"]][0] == 1 and len(answer["results"]) == 3
    entry = ledger(request.request_id)
    assert entry["detail"]["channel"] == "jina-ok-0"
    assert int(entry["units"]) == rerank_cost(SHIPPED["m-rerank"], search_units=1)


@pytest.mark.parametrize("variant", ["jina", "voyage", "tei"])
def test_a_rerank_sold_per_token_is_settled_to_the_tokens_the_upstream_reports(demo, routes, variant):
    routes([{**channel("jina"), "variant": variant}], prices={"m-rerank": {"rerank_per_million": "1"}})
    request = rerank_request(demo["key"])
    run(rerank.rerank, request)
    entry = ledger(request.request_id)
    reported = simulated_tokens("capital of France", DOCS)
    assert entry["detail"]["usage_source"] == "upstream" and int(entry["detail"]["tokens"]) == reported
    assert int(entry["units"]) == usd_to_units(Decimal(reported) / 1_000_000)


def test_speech_fails_over_before_its_first_byte_and_costs_its_characters(demo, routes):
    routes([channel("chat", fault="500", priority=1), channel("chat")])
    text = "Hello there, this is a test of speech."
    request = inbound("/v1/audio/speech", demo["key"], json.dumps(
        {"model": "m-tts", "voice": "alloy", "input": text, "response_format": "wav"}).encode())
    headers, chunks = run(audio.speech, request)
    assert headers["content-type"] == "audio/wav"  # (ASGITransport hands the body over whole: e2e sees chunks)
    with wave.open(io.BytesIO(b"".join(chunks))) as reader:
        assert reader.getnframes() > 0
    entry = ledger(request.request_id)
    assert entry["detail"]["channel"] == "chat-ok-0" and entry["detail"]["outcome"] == "completed"
    assert int(entry["units"]) == speech_cost(SHIPPED["m-tts"], characters=len(text))


def form(model: str, data: bytes, **fields: str) -> tuple[bytes, str]:
    parts = [f'--b\r\nContent-Disposition: form-data; name="{n}"\r\n\r\n{v}\r\n'.encode()
             for n, v in {"model": model, **fields}.items()]
    parts.append(b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
                 b"Content-Type: audio/wav\r\n\r\n" + data + b"\r\n")
    return b"".join(parts) + b"--b--\r\n", "multipart/form-data; boundary=b"


def wav_of(seconds: float) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(b"\x00\x00" * int(seconds * 8000))
    return out.getvalue()


def test_a_transcription_whose_every_channel_fails_is_a_502_and_refunded(demo, routes):
    routes([channel("chat", fault="503")])
    before = quota()
    body, content_type = form("m-transcribe", wav_of(1.0))
    request = inbound("/v1/audio/transcriptions", demo["key"], body, content_type)
    with pytest.raises(UpstreamFailed):
        run(audio.transcriptions, request)
    assert quota() == before and ledger(request.request_id)["outcome"] == "refunded"
    assert open_reservations(1) == []


def test_a_transcription_is_held_for_its_longest_and_settled_to_the_upstreams_seconds(demo, routes):
    routes([channel("chat")])
    body, content_type = form("m-transcribe", wav_of(3.2), response_format="verbose_json")
    request = inbound("/v1/audio/transcriptions", demo["key"], body, content_type)
    _, chunks = run(audio.transcriptions, request)
    assert abs(json.loads(b"".join(chunks))["duration"] - 3.2) < 0.1
    entry = ledger(request.request_id)
    assert entry["detail"]["usage_source"] == "upstream" and float(entry["detail"]["seconds"]) == 4.0
    assert int(entry["units"]) == usd_to_units(SHIPPED["m-transcribe"].per_audio_second * 4)


TOKEN_TRANSCRIBE = {"m-transcribe": {"audio_input_per_million": "6", "input_per_million": "2.5",
                                    "output_per_million": "10"}}


def test_a_streamed_transcription_relays_its_deltas_and_is_settled_to_its_done_events_usage(demo, routes):
    routes([channel("chat")], prices=TOKEN_TRANSCRIBE)
    body, content_type = form("m-transcribe", wav_of(2.5), stream="true", prompt="A talk about sound.")
    request = inbound("/v1/audio/transcriptions", demo["key"], body, content_type)
    headers, chunks = run(audio.transcriptions, request)
    events = [data for _, data in events_of(b"".join(chunks))]
    assert headers["content-type"].startswith("text/event-stream")
    assert [e["type"] for e in events[:-1]] == ["transcript.text.delta"] * (len(events) - 1) and len(events) > 2
    done = events[-1]
    assert done["type"] == "transcript.text.done" and "".join(e["delta"] for e in events[:-1]) == done["text"]
    entry = ledger(request.request_id)
    details = done["usage"]["input_token_details"]
    assert entry["detail"]["usage_source"] == "upstream" and entry["detail"]["outcome"] == "completed"
    price = Catalog.from_document({"prices": TOKEN_TRANSCRIBE}).prices.get("m-transcribe")
    assert int(entry["units"]) == transcription_cost(price, audio_tokens=details["audio_tokens"],
                                                     text_tokens=details["text_tokens"],
                                                     output_tokens=done["usage"]["output_tokens"]) > 0
    assert open_reservations(1) == []


def test_a_streamed_transcription_cut_short_ends_in_an_error_and_costs_the_audio_heard(demo, routes):
    routes([channel("chat")])
    body, content_type = form("m-transcribe", wav_of(1.25), stream="true", prompt="#fault=cut")
    request = inbound("/v1/audio/transcriptions", demo["key"], body, content_type)
    _, chunks = run(audio.transcriptions, request)
    events = [data for _, data in events_of(b"".join(chunks))]
    assert "transcript.text.delta" == events[0]["type"] and "error" in events[-1]
    assert all(e.get("type") != "transcript.text.done" for e in events)
    entry = ledger(request.request_id)
    assert (entry["detail"]["outcome"], entry["detail"]["usage_source"]) == ("cut", "file")
    assert int(entry["units"]) == usd_to_units(SHIPPED["m-transcribe"].per_audio_second * Decimal("1.25"))


def test_a_model_that_does_not_stream_answers_a_streamed_transcription_whole(demo, routes):
    routes([channel("chat")], prices={"whisper-1": {"per_audio_second": "0.0001"}})
    body, content_type = form("whisper-1", wav_of(2.0), stream="true")
    request = inbound("/v1/audio/transcriptions", demo["key"], body, content_type)
    headers, chunks = run(audio.transcriptions, request)
    assert headers["content-type"] == "application/json" and json.loads(b"".join(chunks))["usage"]["seconds"] == 2
    assert int(ledger(request.request_id)["units"]) == usd_to_units(Decimal("0.0002"))


def test_a_translation_is_never_streamed(demo, routes):
    from gateway.errors import InvalidRequest

    routes([channel("chat")])
    before = quota()
    body, content_type = form("m-transcribe", wav_of(1.0), stream="true")
    with pytest.raises(InvalidRequest) as caught:
        run(audio.translations, inbound("/v1/audio/translations", demo["key"], body, content_type))
    assert caught.value.param == "stream" and "translations are not streamed" in caught.value.message
    assert quota() == before and open_reservations(1) == []


TOKEN_TTS = {"m-tts": {"input_per_million": "0.60", "audio_output_per_million": "12"}}


def test_speech_sold_per_token_is_settled_to_its_done_events_usage(demo, routes):
    routes([channel("chat")], prices=TOKEN_TTS)
    request = inbound("/v1/audio/speech", demo["key"], json.dumps(
        {"model": "m-tts", "voice": "alloy", "input": "Hello there", "response_format": "wav",
         "stream_format": "sse"}).encode())
    headers, chunks = run(audio.speech, request)
    events = [json.loads(line[6:]) for line in b"".join(chunks).decode().splitlines() if line.startswith("data: ")]
    usage = events[-1]["usage"]
    assert headers["content-type"].startswith("text/event-stream") and events[-1]["type"] == "speech.audio.done"
    entry = ledger(request.request_id)
    assert entry["detail"]["usage_source"] == "upstream" and int(entry["detail"]["audio_tokens"]) == \
        usage["output_tokens"]
    price = Catalog.from_document({"prices": TOKEN_TTS}).prices.get("m-tts")
    assert int(entry["units"]) == speech_cost(price, input_tokens=usage["input_tokens"],
                                              audio_tokens=usage["output_tokens"])


def test_speech_sold_per_token_without_usage_is_settled_to_the_duration_relayed(demo, routes):
    routes([channel("chat")], prices=TOKEN_TTS)
    text = "Hello there, a longer sentence to speak."
    request = inbound("/v1/audio/speech", demo["key"], json.dumps(
        {"model": "m-tts", "voice": "alloy", "input": text, "response_format": "wav"}).encode())
    run(audio.speech, request)
    entry = ledger(request.request_id)
    assert entry["detail"]["usage_source"] == "duration"
    assert float(entry["detail"]["seconds"]) == pytest.approx(len(text) * 0.06, abs=0.01)
    price = Catalog.from_document({"prices": TOKEN_TTS}).prices.get("m-tts")
    assert int(entry["units"]) == speech_cost(price, input_tokens=int(entry["detail"]["input_tokens"]),
                                              audio_tokens=int(entry["detail"]["audio_tokens"])) > 0


def test_a_moderation_is_free_by_default_and_priced_per_input_when_the_operator_sets_one(demo, routes):
    body = json.dumps({"model": "m-moderation", "input": ["I will kill you", "a calm morning"]}).encode()
    routes([channel("chat")])
    free = inbound("/v1/moderations", demo["key"], body)
    _, chunks = run(moderations.moderations, free)
    assert [r["flagged"] for r in json.loads(b"".join(chunks))["results"]] == [True, False]
    assert ledger(free.request_id)["outcome"] == "settled" and int(ledger(free.request_id)["units"]) == 0
    routes([channel("chat")], prices={"m-moderation": {"per_moderation": "0.001"}})
    priced = inbound("/v1/moderations", demo["key"], body)
    run(moderations.moderations, priced)
    assert int(ledger(priced.request_id)["units"]) == usd_to_units(Decimal("0.002"))


def test_webm_that_no_answer_could_measure_is_refused_before_anything_is_held(demo, routes):
    from gateway.errors import InvalidRequest

    routes([channel("chat")])
    before = quota()
    body, content_type = form("m-transcribe", b"\x1a\x45\xdf\xa3" + bytes(4000), response_format="text")
    with pytest.raises(InvalidRequest) as caught:
        run(audio.transcriptions, inbound("/v1/audio/transcriptions", demo["key"], body, content_type))
    assert caught.value.param == "file" and "response_format" in caught.value.message
    assert quota() == before and open_reservations(1) == []
