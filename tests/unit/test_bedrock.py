"""The bedrock protocol's pure parts: the converse dialect, its usage, Bedrock's error table, the
inference-profile rule, and event-stream frames decoded by botocore (over a mock transport)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gateway.formats import convert_request, convert_response
from gateway.formats.converse import StreamDecoder
from gateway.formats.neutral import End, Finish, Signed, TextDelta, ThinkingDelta, ToolArgs, ToolStart, UsageUpdate
from gateway.formats.usage import Usage, usage_from_converse
from gateway.upstreams import bedrock
from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, UpstreamError
from gateway_local.simulators.bedrock import event_frame, exception_frame

CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"


def test_input_tokens_exclude_the_cache_reads_and_writes_which_are_added_back():
    usage = usage_from_converse({"inputTokens": 10, "outputTokens": 5, "totalTokens": 1015,
                                 "cacheReadInputTokens": 600, "cacheWriteInputTokens": 400,
                                 "cacheDetails": [{"ttl": "1h", "inputTokens": 300},
                                                  {"ttl": "5m", "inputTokens": 100}]})
    assert usage == Usage(input_tokens=1010, output_tokens=5, cached_input_tokens=600,
                          cache_creation_input_tokens=400, cache_creation_1h_input_tokens=300)


def test_cache_control_marks_become_cache_points_after_what_they_mark():
    body = convert_request({"model": "m", "max_tokens": 100, "system": [
        {"type": "text", "text": "rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "tools": [{"name": "t", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "doc", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "question"}]}]},
        source="messages", target="converse", model=CLAUDE)
    assert body["system"] == [{"text": "rules"}, {"cachePoint": {"type": "default", "ttl": "1h"}}]
    assert body["messages"][0]["content"] == [{"text": "doc"}, {"cachePoint": {"type": "default"}},
                                              {"text": "question"}]
    assert body["toolConfig"]["tools"][1] == {"cachePoint": {"type": "default"}}


def test_a_history_with_tool_blocks_and_no_tools_travels_with_a_tool_config_built_from_it():
    body = convert_request({"model": "m", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call.1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call.1", "content": "sunny"}]},
        source="chat", target="converse", model=CLAUDE)
    assert body["toolConfig"] == {"tools": [{"toolSpec": {"name": "get_weather",
                                                           "inputSchema": {"json": {"type": "object"}}}}]}
    assert body["messages"][1]["content"] == [{"toolUse": {"toolUseId": "call_1", "name": "get_weather",
                                                           "input": {"city": "Oslo"}}}]
    assert body["messages"][2]["content"][0]["toolResult"]["toolUseId"] == "call_1"


def test_thinking_goes_in_claudes_own_fields_and_the_signed_reasoning_comes_back_first():
    body = convert_request({"model": "m", "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048},
                            "tools": [{"name": "w", "input_schema": {"type": "object"}}], "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]},
        source="messages", target="converse", model=CLAUDE)
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert body["messages"][1]["content"][0] == {"reasoningContent": {"reasoningText": {"text": "hmm",
                                                                                       "signature": "sig"}}}
    assert body["inferenceConfig"] == {"maxTokens": 4096}


def test_a_tool_loop_that_lost_its_reasoning_is_sent_with_thinking_off():
    body = convert_request({"model": "m", "max_tokens": 4096, "reasoning_effort": "low", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}, source="chat", target="converse", model=CLAUDE)
    assert "additionalModelRequestFields" not in body


def test_claude_45_gets_temperature_alone_and_other_models_no_claude_fields():
    claude = convert_request({"model": "m", "temperature": 1.5, "top_p": 0.5, "top_k": 5,
                              "messages": [{"role": "user", "content": "hi"}]}, source="chat", target="converse",
                             model=CLAUDE)
    assert claude["inferenceConfig"] == {"temperature": 1.0}
    assert claude["additionalModelRequestFields"] == {"top_k": 5}
    nova = convert_request({"model": "m", "top_p": 0.5, "top_k": 5, "reasoning_effort": "high",
                            "messages": [{"role": "user", "content": "hi"}]}, source="chat", target="converse",
                           model="amazon.nova-pro-v1:0")
    assert nova["inferenceConfig"] == {"topP": 0.5} and "additionalModelRequestFields" not in nova


def test_an_image_by_url_is_refused_naming_what_a_bedrock_channel_takes():
    from gateway.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="inline"):
        convert_request({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]},
            source="chat", target="converse", model=CLAUDE)


def test_an_answer_with_reasoning_a_call_and_cache_usage_in_each_dialect():
    answer = {"output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "think", "signature": "SIG"}}},
        {"reasoningContent": {"redactedContent": "UkVEQUNURUQ="}},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "w", "input": {"a": 1}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 3, "outputTokens": 7, "totalTokens": 30,
                                            "cacheReadInputTokens": 20, "cacheWriteInputTokens": 0}}
    messages = convert_response(answer, source="converse", target="messages", model="m-small")
    assert messages["content"][:2] == [{"type": "thinking", "thinking": "think", "signature": "SIG"},
                                       {"type": "redacted_thinking", "data": "UkVEQUNURUQ="}]
    assert messages["stop_reason"] == "tool_use"
    assert messages["usage"]["input_tokens"] == 3 and messages["usage"]["cache_read_input_tokens"] == 20
    chat = convert_response(answer, source="converse", target="chat", model="m-small")
    assert chat["choices"][0]["message"]["reasoning_details"][0]["signature"] == "SIG"
    assert chat["usage"]["prompt_tokens"] == 23


def test_stream_events_decode_to_the_neutral_ones():
    decoder = StreamDecoder()
    events = []
    for name, data in [
            ("messageStart", {"role": "assistant"}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "S"}}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Hi"}}),
            ("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "t1", "name": "w"}}}),
            ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{}"}}}),
            ("messageStop", {"stopReason": "tool_use"}),
            ("metadata", {"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}})]:
        events += decoder.feed(name, data)
    kinds = [type(e) for e in events[1:]]
    assert kinds == [ThinkingDelta, Signed, TextDelta, ToolStart, ToolArgs, Finish, UsageUpdate, End]
    assert events[2].part.signature == "S" and events[-2].usage == Usage(1, 2)


@pytest.mark.parametrize("code,status,fault", [
    ("ThrottlingException", 429, CAPACITY), ("ServiceUnavailableException", 503, CAPACITY),
    ("AccessDeniedException", 403, ACCOUNT), ("UnrecognizedClientException", 403, ACCOUNT),
    ("InvalidSignatureException", 403, ACCOUNT), ("ValidationException", 400, CLIENT),
    ("ModelTimeoutException", 408, UPSTREAM), ("ModelErrorException", 424, UPSTREAM),
    ("ModelNotReadyException", 429, UPSTREAM)])
def test_bedrocks_error_table_reads_the_error_type_header(code, status, fault):
    client = bedrock.BedrockClient("", "AK|SK|us-east-1", httpx.AsyncClient(), region="us-east-1")
    headers = httpx.Headers({"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"})
    error = client.status_error(status, headers, json.dumps({"message": "words"}).encode())
    assert error.fault == fault and error.status == status


def test_the_on_demand_refusal_is_not_the_clients_and_is_recognised():
    client = bedrock.BedrockClient("", "AK|SK|us-east-1", httpx.AsyncClient(), region="us-east-1")
    message = (f"Invocation of model ID {CLAUDE} with on-demand throughput isn’t supported. Retry your request "
               "with the ID or ARN of an inference profile that contains this model.")
    error = client.status_error(400, httpx.Headers({"x-amzn-ErrorType": "ValidationException:x"}),
                                json.dumps({"message": message}).encode())
    assert error.fault == UPSTREAM and bedrock.needs_profile(error)


@pytest.mark.parametrize("region,prefix", [("us-east-1", "us"), ("ca-central-1", "us"), ("eu-west-3", "eu"),
                                           ("ap-northeast-1", "apac"), ("us-gov-west-1", "us-gov")])
def test_the_profile_of_the_channels_geography(region, prefix):
    client = bedrock.BedrockClient("", "AK|SK|" + region, httpx.AsyncClient(), region=region)
    assert client.model_id(CLAUDE) == f"{prefix}.{CLAUDE}"
    assert client.model_id("amazon.nova-micro-v1:0") == "amazon.nova-micro-v1:0"
    assert client.model_id(f"eu.{CLAUDE}") == f"eu.{CLAUDE}"
    assert bedrock.BedrockClient("", "", httpx.AsyncClient(), region=region,
                                 global_profiles=True).model_id(CLAUDE) == f"global.{CLAUDE}"


def _stream(frames: bytes) -> list:
    async def run() -> list:
        transport = httpx.MockTransport(lambda request: httpx.Response(
            200, content=frames, headers={"content-type": "application/vnd.amazon.eventstream"}))
        async with httpx.AsyncClient(transport=transport) as http:
            client = bedrock.BedrockClient("https://bedrock.test", "AK|SK|us-east-1", http, region="us-east-1")
            out: list = []
            try:
                async with client.stream_converse("amazon.nova-micro-v1:0", {"messages": []}) as events:
                    async for event in events:
                        out.append((event.event, json.loads(event.data)))
            except UpstreamError as exc:
                out.append(exc)
            return out

    return asyncio.run(run())


def test_event_stream_frames_are_decoded_by_botocore_and_an_exception_frame_is_an_upstream_error():
    frames = (event_frame("messageStart", {"role": "assistant"})
              + event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})
              + exception_frame("throttlingException", "Too many requests, please wait before trying again."))
    found = _stream(frames)
    assert found[1] == ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"},
                                              "p": "abcdefghijklmnopq"})
    assert isinstance(found[2], UpstreamError) and found[2].fault == CAPACITY and found[2].status == 429


def test_a_frame_whose_crc_does_not_match_is_refused():
    corrupt = bytearray(event_frame("messageStart", {"role": "assistant"}))
    corrupt[-1] ^= 1
    (error,) = _stream(bytes(corrupt))
    assert isinstance(error, UpstreamError) and "corrupt" in error.message
