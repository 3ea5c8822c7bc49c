"""Every top-level field each text dialect can carry, in every direction: carried to the field
the channel's dialect names it, dropped (it only tunes the service), or refused with a 400 naming
it, as docs/conversions.md says. A field a conversion stops sending fails its row."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.formats import convert_request

BASES: dict[str, dict[str, Any]] = {
    "chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "responses": {"model": "m", "input": "hi"},
    "messages": {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]},
    "content": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}
DROPPED, REFUSED = "dropped", "refused"
GC = "generationConfig"

# (client dialect, channel dialect, field path in the client's body, value, what the channel receives:
#  {path: value} of what changes in the upstream body, DROPPED or REFUSED)
TABLE: list[tuple[str, str, str, Any, Any]] = [
    # chat -> messages
    ("chat", "messages", "temperature", 0.5, {"temperature": 0.5}),
    ("chat", "messages", "top_p", 0.9, {"top_p": 0.9}),
    ("chat", "messages", "max_tokens", 77, {"max_tokens": 77}),
    ("chat", "messages", "max_completion_tokens", 78, {"max_tokens": 78}),
    ("chat", "messages", "stop", ["X"], {"stop_sequences": ["X"]}),
    ("chat", "messages", "user", "u1", {"metadata": {"user_id": "u1"}}),
    ("chat", "messages", "reasoning_effort", "low", {"thinking": {"type": "enabled", "budget_tokens": 2048},
                                                     "max_tokens": 6144}),
    ("chat", "messages", "seed", 3, DROPPED),
    ("chat", "messages", "presence_penalty", 0.25, DROPPED),
    ("chat", "messages", "frequency_penalty", 0.5, DROPPED),
    ("chat", "messages", "store", True, DROPPED),
    ("chat", "messages", "metadata", {"a": "b"}, DROPPED),
    ("chat", "messages", "service_tier", "auto", DROPPED),
    ("chat", "messages", "parallel_tool_calls", False, DROPPED),
    ("chat", "messages", "n", 2, REFUSED),
    ("chat", "messages", "logprobs", True, REFUSED),
    ("chat", "messages", "logit_bias", {"1": 2}, REFUSED),
    # chat -> content
    ("chat", "content", "temperature", 0.5, {f"{GC}.temperature": 0.5}),
    ("chat", "content", "top_p", 0.9, {f"{GC}.topP": 0.9}),
    ("chat", "content", "max_tokens", 77, {f"{GC}.maxOutputTokens": 77}),
    ("chat", "content", "max_completion_tokens", 78, {f"{GC}.maxOutputTokens": 78}),
    ("chat", "content", "stop", ["X"], {f"{GC}.stopSequences": ["X"]}),
    ("chat", "content", "seed", 3, {f"{GC}.seed": 3}),
    ("chat", "content", "presence_penalty", 0.25, {f"{GC}.presencePenalty": 0.25}),
    ("chat", "content", "frequency_penalty", 0.5, {f"{GC}.frequencyPenalty": 0.5}),
    ("chat", "content", "reasoning_effort", "low", {f"{GC}.thinkingConfig": {"thinkingLevel": "low"}}),
    ("chat", "content", "user", "u1", DROPPED),
    ("chat", "content", "store", True, DROPPED),
    ("chat", "content", "parallel_tool_calls", False, DROPPED),
    ("chat", "content", "n", 2, REFUSED),
    ("chat", "content", "logprobs", True, REFUSED),
    ("chat", "content", "logit_bias", {"1": 2}, REFUSED),
    # responses -> chat, messages, content
    ("responses", "chat", "temperature", 0.5, {"temperature": 0.5}),
    ("responses", "chat", "top_p", 0.9, {"top_p": 0.9}),
    ("responses", "chat", "max_output_tokens", 77, {"max_tokens": 77}),
    ("responses", "chat", "user", "u1", {"user": "u1"}),
    ("responses", "chat", "reasoning", {"effort": "low"}, {"reasoning_effort": "low"}),
    ("responses", "chat", "instructions", "be brief", {"messages": [{"role": "system", "content": "be brief"},
                                                                   {"role": "user", "content": "hi"}]}),
    ("responses", "chat", "store", True, DROPPED),
    ("responses", "chat", "truncation", "auto", DROPPED),
    ("responses", "chat", "background", True, REFUSED),
    ("responses", "chat", "previous_response_id", "r1", REFUSED),
    ("responses", "messages", "temperature", 0.5, {"temperature": 0.5}),
    ("responses", "messages", "top_p", 0.9, {"top_p": 0.9}),
    ("responses", "messages", "max_output_tokens", 77, {"max_tokens": 77}),
    ("responses", "messages", "user", "u1", {"metadata": {"user_id": "u1"}}),
    ("responses", "messages", "instructions", "be brief", {"system": "be brief"}),
    ("responses", "messages", "background", True, REFUSED),
    ("responses", "messages", "previous_response_id", "r1", REFUSED),
    ("responses", "content", "temperature", 0.5, {f"{GC}.temperature": 0.5}),
    ("responses", "content", "top_p", 0.9, {f"{GC}.topP": 0.9}),
    ("responses", "content", "max_output_tokens", 77, {f"{GC}.maxOutputTokens": 77}),
    ("responses", "content", "reasoning", {"effort": "low"}, {f"{GC}.thinkingConfig": {"thinkingLevel": "low"}}),
    ("responses", "content", "instructions", "be brief", {"systemInstruction": {"parts": [{"text": "be brief"}]}}),
    ("responses", "content", "user", "u1", DROPPED),
    ("responses", "content", "background", True, REFUSED),
    # messages -> chat, content
    ("messages", "chat", "temperature", 0.5, {"temperature": 0.5}),
    ("messages", "chat", "top_p", 0.9, {"top_p": 0.9}),
    ("messages", "chat", "metadata", {"user_id": "u1"}, {"user": "u1"}),
    ("messages", "chat", "system", "sys", {"messages": [{"role": "system", "content": "sys"},
                                                        {"role": "user", "content": "hi"}]}),
    ("messages", "chat", "thinking", {"type": "enabled", "budget_tokens": 1024},
     {"reasoning_effort": "low", "max_completion_tokens": 100, "max_tokens": None}),
    ("messages", "chat", "top_k", 5, DROPPED),
    ("messages", "chat", "stop_sequences", ["X"], DROPPED),  # applied by the gateway itself (formats/stops)
    ("messages", "chat", "service_tier", "auto", DROPPED),
    ("messages", "chat", "container", "c", REFUSED),
    ("messages", "content", "temperature", 0.5, {f"{GC}.temperature": 0.5}),
    ("messages", "content", "top_p", 0.9, {f"{GC}.topP": 0.9}),
    ("messages", "content", "top_k", 5, {f"{GC}.topK": 5}),
    ("messages", "content", "system", "sys", {"systemInstruction": {"parts": [{"text": "sys"}]}}),
    ("messages", "content", "thinking", {"type": "enabled", "budget_tokens": 1024},
     {f"{GC}.thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}),
    ("messages", "content", "stop_sequences", ["X"], DROPPED),  # applied by the gateway itself
    ("messages", "content", "metadata", {"user_id": "u1"}, DROPPED),
    ("messages", "content", "container", "c", REFUSED),
    # content -> chat, messages
    ("content", "chat", f"{GC}.temperature", 0.5, {"temperature": 0.5}),
    ("content", "chat", f"{GC}.topP", 0.9, {"top_p": 0.9}),
    ("content", "chat", f"{GC}.maxOutputTokens", 77, {"max_tokens": 77}),
    ("content", "chat", f"{GC}.stopSequences", ["X"], {"stop": ["X"]}),
    ("content", "chat", f"{GC}.seed", 3, {"seed": 3}),
    ("content", "chat", f"{GC}.presencePenalty", 0.25, {"presence_penalty": 0.25}),
    ("content", "chat", f"{GC}.frequencyPenalty", 0.5, {"frequency_penalty": 0.5}),
    ("content", "chat", f"{GC}.thinkingConfig", {"thinkingBudget": 1024}, {"reasoning_effort": "low"}),
    ("content", "chat", "systemInstruction", {"parts": [{"text": "sys"}]},
     {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]}),
    ("content", "chat", f"{GC}.topK", 5, DROPPED),
    ("content", "chat", "safetySettings", [], DROPPED),
    ("content", "chat", "labels", {"a": "b"}, DROPPED),
    ("content", "chat", f"{GC}.candidateCount", 2, REFUSED),
    ("content", "chat", "cachedContent", "c1", REFUSED),
    ("content", "messages", f"{GC}.temperature", 0.5, {"temperature": 0.5}),
    ("content", "messages", f"{GC}.topP", 0.9, {"top_p": 0.9}),
    ("content", "messages", f"{GC}.topK", 5, {"top_k": 5}),
    ("content", "messages", f"{GC}.maxOutputTokens", 77, {"max_tokens": 77}),
    ("content", "messages", f"{GC}.stopSequences", ["X"], {"stop_sequences": ["X"]}),
    ("content", "messages", f"{GC}.thinkingConfig", {"thinkingBudget": 1024},
     {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 5120}),
    ("content", "messages", "systemInstruction", {"parts": [{"text": "sys"}]}, {"system": "sys"}),
    ("content", "messages", f"{GC}.seed", 3, DROPPED),
    ("content", "messages", f"{GC}.presencePenalty", 0.25, DROPPED),
    ("content", "messages", f"{GC}.frequencyPenalty", 0.5, DROPPED),
    ("content", "messages", f"{GC}.candidateCount", 2, REFUSED),
    ("content", "messages", "cachedContent", "c1", REFUSED),
]


def _put(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        body = body.setdefault(part, {})
    body[last] = value


def _get(body: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(body, dict) or part not in body:
            return None
        body = body[part]
    return body


def _convert(source: str, target: str, change: tuple[str, Any] | None = None) -> dict[str, Any]:
    body = copy.deepcopy(BASES[source])
    if change:
        _put(body, *change)
    return convert_request(body, source=source, target=target, model="upstream-model")


def test_the_table_covers_every_direction_between_the_dialects():
    directions = {(source, target) for source, target, *_ in TABLE}
    assert directions == {(s, t) for s in BASES for t in ("chat", "messages", "content") if s != t}


@pytest.mark.parametrize("source,target,field,value,expected", TABLE,
                         ids=[f"{s}->{t}:{f}" for s, t, f, *_ in TABLE])
def test_each_field_is_carried_dropped_or_refused_as_the_conversions_page_says(source, target, field, value,
                                                                                expected):
    base = _convert(source, target)
    if expected == REFUSED:
        with pytest.raises(InvalidRequest) as refused:
            _convert(source, target, (field, value))
        assert refused.value.status == 400 and refused.value.param == field
        return
    converted = _convert(source, target, (field, value))
    if expected == DROPPED:
        assert converted == base
        return
    for path, wanted in expected.items():
        assert _get(converted, path) == wanted, path
    # and nothing else moved
    changed = {k for k in converted.keys() | base.keys() if converted.get(k) != base.get(k)}
    assert changed == {path.split(".")[0] for path in expected}


@pytest.mark.parametrize("source,target,field,value,expected", [row for row in TABLE if row[4] != REFUSED],
                         ids=[f"{s}->{t}:{f}" for s, t, f, _, e in TABLE if e != REFUSED])
def test_the_upstreams_own_rules_accept_every_converted_request(source, target, field, value, expected):
    # The simulators' rules, written from each upstream's reference: what the gateway sends a
    # channel is a request that upstream takes (no field it does not know, no value out of range).
    from gateway_local.simulators import rules

    converted = _convert(source, target, (field, value))
    if target == "content":
        assert rules.content.refusal("generateContent", converted) is None
    else:
        path = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}[target]
        assert getattr(rules, target).refusal(path, converted) is None
