"""Gemini's batch mode as the batch family reads it: its states, its inline responses matched
back to the client's custom ids (by the key sent, else by place), an error's Status code as its
HTTP status, and a Vertex channel left out (its batches run on the gateway)."""

from __future__ import annotations

from typing import Any

from gateway.routing.channel import Channel
from gateway.tasks.engine import NewTask
from gateway.tasks.families.batch import FAMILY, gemini
from gateway.tasks.families.batch.lines import Line

CHAT = "/v1/chat/completions"


def answer(text: str) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}}


def ended(*responses: dict[str, Any], state: str = "BATCH_STATE_SUCCEEDED") -> dict[str, Any]:
    return {"name": "batches/b1", "done": True,
            "metadata": {"state": state, "output": {"inlinedResponses": {"inlinedResponses": list(responses)}}}}


LINES = [Line(number=1, custom_id="first", url=CHAT, body={}), Line(number=3, custom_id="second", url=CHAT, body={})]


def test_each_state_is_shown_as_openai_shows_a_batch():
    shown = {state: gemini.progress({"metadata": {"state": state}}, False) for state in (
        "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED",
        "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED")}
    assert [value[1] for value in shown.values()] == [None, None, "completed", "failed", "cancelled", "expired"]
    assert shown["BATCH_STATE_PENDING"][0] == "validating" and shown["BATCH_STATE_RUNNING"][0] == "in_progress"


def test_responses_are_matched_by_key_then_by_place_and_errors_keep_their_status():
    found = gemini.collect(None, None, ended(  # type: ignore[arg-type]  # no upstream call: the output is inline
        {"response": answer("two"), "metadata": {"key": "l3"}},
        {"error": {"code": 8, "message": "quota"}, "metadata": {"key": "l1"}},
        {"response": answer("stray"), "metadata": {"key": "l9"}}), LINES, CHAT, "m-small")
    by_id = {line["custom_id"]: line for line in found}
    assert sorted(by_id) == ["first", "second"]  # a key the input never had is dropped
    assert by_id["second"]["response"]["status_code"] == 200
    body = by_id["second"]["response"]["body"]
    assert body["choices"][0]["message"]["content"] == "two" and body["model"] == "m-small"
    assert body["usage"]["prompt_tokens"] == 3 and body["usage"]["completion_tokens"] == 2
    assert by_id["first"]["response"]["status_code"] == 429  # RESOURCE_EXHAUSTED (google/rpc/code.proto)
    # Responses without metadata are in the input's order
    unkeyed = gemini.collect(None, None,  # type: ignore[arg-type]
                             ended({"response": answer("a")}, {"response": answer("b")}), LINES, CHAT, "m-small")
    assert [(line["custom_id"], line["response"]["body"]["choices"][0]["message"]["content"])
            for line in unkeyed] == [("first", "a"), ("second", "b")]
    # The input file deleted meanwhile: the keys stand for the ids
    assert [line["custom_id"] for line in gemini.collect(None, None, ended(  # type: ignore[arg-type]
        {"response": answer("a"), "metadata": {"key": "l1"}}), [], CHAT, "m-small")] == ["l1"]


def test_a_vertex_content_channel_never_runs_gemini_batch_mode():
    from gateway.upstreams.vertex import VertexSite

    api = Channel(name="api", protocol="content", base_url="http://g", api_key="k", models=frozenset({"*"}))
    vertex = Channel(name="vertex", protocol="content", base_url="", api_key="{}", models=frozenset({"*"}),
                     vertex=VertexSite(project="p", region="us-central1"))
    chat = Channel(name="chat", protocol="chat", base_url="http://c", api_key="k", models=frozenset({"*"}))
    request = NewTask(family="batch", model="m-small", upstream_request={"endpoint": CHAT}, route="/v1/batches")
    assert [c.name for c in FAMILY.usable_channels([vertex, api, chat], request)] == ["chat", "api"]
    # Alone, it runs a batch the way the gateway runs one itself (`local`), at the full price
    alone = NewTask(family="batch", model="m-small", upstream_request={"endpoint": CHAT}, route="/v1/batches")
    assert FAMILY.usable_channels([vertex], alone) == [vertex] and alone.quantities["self_run"] is True
