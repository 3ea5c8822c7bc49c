"""The simulated text upstreams refuse what the real ones refuse, by rules of their own written
from each upstream's API reference (`local/gateway_local/simulators/rules/`), never the gateway's
request models: an unknown top-level field, a value out of the upstream's range, a missing field."""

import pytest

from .test_simulators import CHAT, CONTENT, MESSAGES, chat, gen, msg, post


@pytest.mark.parametrize("path,body,headers,field,said", [
    ("/chat/v1/chat/completions", chat("hi", vendor_knob=1), CHAT, "vendor_knob",
     "Unrecognized request argument supplied: vendor_knob"),
    ("/chat/v1/responses", {"model": "m", "input": "hi", "vendor_knob": 1}, CHAT, "vendor_knob",
     "Unrecognized request argument supplied: vendor_knob"),
    ("/chat/v1/embeddings", {"model": "e", "input": "hi", "vendor_knob": 1}, CHAT, "vendor_knob",
     "Unrecognized request argument supplied: vendor_knob"),
    ("/messages/v1/messages", msg("hi", vendor_knob=1), MESSAGES, "vendor_knob",
     "vendor_knob: Extra inputs are not permitted"),
    ("/messages/v1/messages/count_tokens", {"model": "m", "max_tokens": 5, "messages": [{"role": "user",
                                                                                       "content": "hi"}]},
     MESSAGES, "max_tokens", "max_tokens: Extra inputs are not permitted"),
    ("/content/v1beta/models/m-small:generateContent", {**gen("hi"), "vendorKnob": 1}, CONTENT, "vendorKnob",
     'Invalid JSON payload received. Unknown name "vendorKnob": Cannot find field.'),
    ("/content/v1beta/models/m-small:generateContent", gen("hi", vendorKnob=1), CONTENT, "generationConfig",
     'Invalid JSON payload received. Unknown name "vendorKnob" at \'generationConfig\': Cannot find field.'),
])
def test_an_unknown_field_is_refused_as_the_upstream_refuses_it(path, body, headers, field, said):
    answer = post(path, body, headers)
    assert answer.status_code == 400
    assert said in answer.json()["error"]["message"], answer.text


@pytest.mark.parametrize("path,body,headers,said", [
    ("/chat/v1/chat/completions", chat("hi", temperature=2.5), CHAT, "'temperature'"),
    ("/chat/v1/chat/completions", chat("hi", n=129), CHAT, "'n'"),
    ("/chat/v1/chat/completions", chat("hi", presence_penalty=-2.5), CHAT, "'presence_penalty'"),
    ("/chat/v1/chat/completions", chat("hi", stop=["a", "b", "c", "d", "e"]), CHAT, "'stop'"),
    ("/chat/v1/chat/completions", {"model": "m", "messages": []}, CHAT, "'messages'"),
    ("/chat/v1/responses", {"model": "m", "input": "hi", "max_output_tokens": 15}, CHAT, "'max_output_tokens'"),
    ("/messages/v1/messages", msg("hi", temperature=1.5), MESSAGES, "temperature"),
    ("/messages/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, MESSAGES,
     "max_tokens: Field required"),
    ("/messages/v1/messages", msg("hi", thinking={"type": "enabled", "budget_tokens": 512}), MESSAGES,
     "greater than or equal to 1024"),
    ("/messages/v1/messages", msg("hi", thinking={"type": "enabled", "budget_tokens": 2048}), MESSAGES,
     "`max_tokens` must be greater than `thinking.budget_tokens`"),
    ("/content/v1beta/models/m-small:generateContent", gen("hi", candidateCount=9), CONTENT, "candidateCount"),
    ("/content/v1beta/models/m-small:generateContent", gen("hi", stopSequences=list("abcdef")), CONTENT,
     "stopSequences"),
    ("/content/v1beta/models/m-small:generateContent", gen("hi", temperature=2.5), CONTENT, "temperature"),
])
def test_a_value_out_of_the_upstreams_range_is_refused(path, body, headers, said):
    answer = post(path, body, headers)
    assert answer.status_code == 400 and said in answer.json()["error"]["message"], answer.text


def test_every_field_the_upstream_documents_is_accepted():
    full_chat = chat("hi", temperature=2, top_p=1, n=2, presence_penalty=2, frequency_penalty=-2, seed=1,
                     stop=["a", "b", "c", "d"], max_completion_tokens=50, user="u", store=False,
                     metadata={"k": "v"}, service_tier="auto", parallel_tool_calls=True, logprobs=True,
                     top_logprobs=2, reasoning_effort="low", prompt_cache_key="k", safety_identifier="s")
    assert post("/chat/v1/chat/completions", full_chat, CHAT).status_code == 200
    full_messages = msg("hi", temperature=1, top_k=5, stop_sequences=["x"], metadata={"user_id": "u"},
                        system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
                        service_tier="auto")
    answer = post("/messages/v1/messages", full_messages, MESSAGES)
    assert answer.status_code == 200, answer.text
    full_content = {**gen("hi", temperature=2, topP=1, topK=3, candidateCount=1, maxOutputTokens=50, seed=1,
                          presencePenalty=0.5, frequencyPenalty=0.5, stopSequences=list("abcde")),
                    "systemInstruction": {"parts": [{"text": "be brief"}]}, "safetySettings": []}
    assert post("/content/v1beta/models/m-small:generateContent", full_content, CONTENT).status_code == 200
