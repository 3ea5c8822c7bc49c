"""What the gateway writes is read by each dialect's official SDK (parsing only, no network).

Skipped where the SDKs are not installed; they are dev dependencies.
"""

import pytest

from gateway.formats import DONE, StreamConverter, convert_response

from .test_responses import CHAT_ANSWER, CONTENT_ANSWER, MESSAGES_ANSWER
from .test_streams import CHAT_TOOL_STREAM, CONTENT_STREAM, CONTENT_TOOL_STREAM, MESSAGES_STREAM, relay

UPSTREAMS = [("chat", CHAT_TOOL_STREAM), ("messages", MESSAGES_STREAM), ("content", CONTENT_STREAM),
             ("content", CONTENT_TOOL_STREAM)]


@pytest.mark.parametrize("upstream,stream", [u for u in UPSTREAMS if u[0] != "messages"])
def test_anthropic_sdk_accumulates_the_messages_stream(upstream, stream):
    pydantic = pytest.importorskip("pydantic")
    types = pytest.importorskip("anthropic.types")
    accumulate = pytest.importorskip("anthropic.lib.streaming._messages").accumulate_event
    adapter = pydantic.TypeAdapter(types.RawMessageStreamEvent)
    # When the converted stream is fed to the SDK's own accumulator
    snapshot, buffers = None, {}
    for name, data in relay(StreamConverter(upstream, "messages", model="public"), stream):
        event = adapter.validate_python(data)
        assert event.type == name
        snapshot = accumulate(event=event, current_snapshot=snapshot, json_bufs=buffers)
    # Then it holds a whole message
    assert snapshot.model == "public" and snapshot.stop_reason in ("end_turn", "tool_use")
    assert snapshot.usage.output_tokens > 0 and snapshot.usage.input_tokens > 0
    for block in snapshot.content:
        if block.type == "tool_use" and block.name == "get_weather":
            assert block.input["city"] in ("Paris", "Rome")


@pytest.mark.parametrize("upstream,stream", [u for u in UPSTREAMS if u[0] != "chat"])
def test_openai_sdk_accumulates_the_chat_stream(upstream, stream):
    chunk_type = pytest.importorskip("openai.types.chat").ChatCompletionChunk
    state = pytest.importorskip("openai.lib.streaming.chat._completions").ChatCompletionStreamState()
    out = relay(StreamConverter(upstream, "chat", model="public", include_usage=True), stream)
    assert out[-1] == (None, DONE)
    for name, data in out[:-1]:
        assert name is None
        state.handle_chunk(chunk_type.model_validate(data))
    completion = state.get_final_completion()
    choice = completion.choices[0]
    assert completion.model == "public" and completion.usage.total_tokens > 0
    assert choice.finish_reason in ("stop", "tool_calls")
    assert choice.message.content or choice.message.tool_calls


@pytest.mark.parametrize("upstream,stream", UPSTREAMS)
def test_openai_sdk_accumulates_the_responses_stream(upstream, stream):
    pydantic = pytest.importorskip("pydantic")
    openai = pytest.importorskip("openai")
    responses_types = pytest.importorskip("openai.types.responses")
    state_type = pytest.importorskip("openai.lib.streaming.responses._responses").ResponseStreamState
    adapter = pydantic.TypeAdapter(responses_types.ResponseStreamEvent)
    state = state_type(input_tools=openai.omit, text_format=openai.omit)
    out = relay(StreamConverter(upstream, "responses", model="public"), stream)
    for name, data in out:
        event = adapter.validate_python(data)
        assert event.type == name
        state.handle_event(event)
    final = responses_types.Response.model_validate(out[-1][1]["response"])
    assert final.status == "completed" and final.usage.total_tokens > 0
    assert final.output_text or any(item.type == "function_call" for item in final.output)


@pytest.mark.parametrize("upstream,stream", [u for u in UPSTREAMS if u[0] != "content"])
def test_google_sdk_reads_each_content_event(upstream, stream):
    types = pytest.importorskip("google.genai.types")
    out = relay(StreamConverter(upstream, "content", model="public"), stream)
    events = [types.GenerateContentResponse.model_validate(data) for _, data in out]
    assert events[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert events[-1].usage_metadata.total_token_count > 0
    text = "".join(e.text or "" for e in events)
    calls = [call for e in events for call in (e.function_calls or [])]
    assert text or calls


def test_each_sdk_reads_the_converted_whole_answers():
    anthropic_types = pytest.importorskip("anthropic.types")
    chat_types = pytest.importorskip("openai.types.chat")
    responses_types = pytest.importorskip("openai.types.responses")
    genai_types = pytest.importorskip("google.genai.types")
    for source, answer in (("chat", CHAT_ANSWER), ("messages", MESSAGES_ANSWER), ("content", CONTENT_ANSWER)):
        message = anthropic_types.Message.model_validate(convert_response(answer, source=source, target="messages"))
        assert message.content
        completion = chat_types.ChatCompletion.model_validate(convert_response(answer, source=source, target="chat"))
        assert completion.choices[0].message.role == "assistant"
        response = responses_types.Response.model_validate(convert_response(answer, source=source, target="responses"))
        assert response.output
        content = genai_types.GenerateContentResponse.model_validate(
            convert_response(answer, source=source, target="content"))
        assert content.candidates[0].content.role == "model"
