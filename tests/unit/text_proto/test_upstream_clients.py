"""The upstream clients: one shape for three protocols, their headers, answers, streams,
timeouts and the classification of failures. Peers are the simulators (through ASGITransport,
or over real HTTP when timing matters) and small MockTransport fakes."""

import asyncio
import json
import socket

import httpx
import pytest

from gateway.errors import InvalidRequest, RateLimited, UpstreamFailed, UpstreamTimeout
from gateway.sse import encode
from gateway.upstreams.base import EventStream, Timeouts, UpstreamError, parse_retry_after
from gateway.upstreams.chat import ChatClient
from gateway.upstreams.content import ContentClient
from gateway.upstreams.messages import MessagesClient
from gateway.upstreams.verdict import final_error

from .conftest import simulators_app

CHAT_BODY = {"model": "m-small", "messages": [{"role": "user", "content": "Hello there"}]}
MESSAGES_BODY = {"model": "m-small", "max_tokens": 50, "messages": [{"role": "user", "content": "Hello there"}]}
CONTENT_BODY = {"contents": [{"role": "user", "parts": [{"text": "Hello there"}]}]}


def run(coro):
    return asyncio.run(coro)


def asgi_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=simulators_app()))


def clients(http: httpx.AsyncClient, base: str = "http://sim", key: str = "sk-test", timeouts=None):
    return (ChatClient(f"{base}/chat", key, http, timeouts), MessagesClient(f"{base}/messages", key, http, timeouts),
            ContentClient(f"{base}/content", key, http, timeouts))


async def collect(stream: EventStream):
    async with stream as events:
        return [event async for event in events]


# --- requests: headers, URLs, payloads ---------------------------------------------------------------

def test_each_protocol_sends_its_own_credentials_and_stream_flags():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            chat, messages, content = clients(http, "https://up.example", key="sk-secret")
            await chat.chat_completions({**CHAT_BODY, "stream": True, "stream_options": {"include_usage": True}})
            await messages.messages({**MESSAGES_BODY, "stream": True})
            await content.generate_content("m-small", CONTENT_BODY)
            with pytest.raises(UpstreamError):  # an empty 200 is not a complete stream
                await collect(content.stream_generate_content("models/m-small", CONTENT_BODY))

    run(scenario())
    chat, messages, content, content_stream = seen
    assert chat.headers["authorization"] == "Bearer sk-secret" and "x-api-key" not in chat.headers
    assert json.loads(chat.content) == CHAT_BODY  # a plain call drops stream and stream_options
    assert messages.headers["x-api-key"] == "sk-secret" and messages.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in messages.headers and "stream" not in json.loads(messages.content)
    assert content.headers["x-goog-api-key"] == "sk-secret" and "key" not in content.url.params
    assert str(content.url) == "https://up.example/content/v1beta/models/m-small:generateContent"
    assert content_stream.url.params["alt"] == "sse" and content_stream.headers["accept"] == "text/event-stream"
    assert content_stream.url.path.endswith("/models/m-small:streamGenerateContent")


def test_a_base_url_that_already_ends_in_the_version_is_not_doubled():
    http = httpx.AsyncClient()
    assert ChatClient("https://api.example/v1", "k", http).url("/v1/chat/completions") == \
        "https://api.example/v1/chat/completions"
    assert ChatClient("https://api.example/", "k", http).url("/v1/models") == "https://api.example/v1/models"
    assert ContentClient("https://g.example/v1beta", "k", http).url("/v1beta/models/m:generateContent") == \
        "https://g.example/v1beta/models/m:generateContent"


def test_the_key_never_shows_in_repr():
    assert "sk-secret" not in repr(ChatClient("https://up.example", "sk-secret", httpx.AsyncClient()))


# --- answers from the simulators ------------------------------------------------------------------------

def test_non_streamed_calls_of_every_protocol():
    async def scenario():
        async with asgi_client() as http:
            chat, messages, content = clients(http)
            return (await chat.chat_completions(CHAT_BODY), await chat.responses({"model": "m-small", "input": "Hi"}),
                    await chat.compact_responses({"model": "m-small", "input": "Hi"}),
                    await chat.embeddings({"model": "e-small", "input": ["a", "b"]}), await chat.models(),
                    await messages.messages(MESSAGES_BODY), await content.generate_content("m-small", CONTENT_BODY),
                    await content.count_tokens("m-small", CONTENT_BODY),
                    await content.embed_content("e-small", {"content": {"parts": [{"text": "a"}]}}),
                    await content.batch_embed_contents("e-small", {"requests": [
                        {"model": "models/e-small", "content": {"parts": [{"text": "a"}]}}]}))

    completion, response, compacted, embeddings, models, message, generated, counted, embedded, batch = run(scenario())
    assert completion["choices"][0]["message"]["content"] == "You said: Hello there"
    assert response["output"][0]["content"][0]["text"] == "You said: Hi"
    assert compacted["object"] == "response.compaction"
    assert len(embeddings["data"]) == 2 and embeddings["usage"]["prompt_tokens"] == 2
    assert models["object"] == "list"
    assert message["content"][0]["text"] == "You said: Hello there" and message["stop_reason"] == "end_turn"
    assert generated["candidates"][0]["content"]["parts"][0]["text"] == "You said: Hello there"
    assert counted["totalTokens"] > 0
    assert embedded["embedding"]["values"] == batch["embeddings"][0]["values"]


def test_streams_of_every_protocol_end_complete():
    async def scenario():
        async with asgi_client() as http:
            chat, messages, content = clients(http)
            streams = [chat.stream_chat_completions({**CHAT_BODY, "stream_options": {"include_usage": True}}),
                       chat.stream_responses({"model": "m-small", "input": "Hello there"}),
                       messages.stream_messages(MESSAGES_BODY),
                       content.stream_generate_content("m-small", CONTENT_BODY)]
            return [(await collect(s), s.completed) for s in streams]

    (chat, chat_done), (responses, responses_done), (messages, messages_done), (content, content_done) = run(scenario())
    assert chat_done and responses_done and messages_done and content_done
    assert all(not e.is_done for e in chat)  # [DONE] is consumed by the client
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in (e.json() for e in chat) if c["choices"]) \
        == "You said: Hello there"
    assert chat[-1].json()["usage"]["completion_tokens"] > 0
    assert responses[-1].event == "response.completed"
    assert [e.event for e in messages][0] == "message_start" and messages[-1].event == "message_stop"
    assert content[-1].json()["candidates"][0]["finishReason"] == "STOP"


# --- failures -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["chat", "messages", "content"])
def test_a_missing_key_is_a_401_that_is_not_retried_and_blames_the_channel(protocol):
    async def scenario():
        async with asgi_client() as http:
            client = dict(zip(("chat", "messages", "content"), clients(http, key=""), strict=True))[protocol]
            with pytest.raises(UpstreamError) as caught:
                await _plain_call(client)
            return caught.value

    error = run(scenario())
    assert error.status == 401 and not error.retryable and error.body
    assert error.message.startswith("upstream answered 401: ")
    assert isinstance(final_error(error), UpstreamFailed)  # never the client's key: a 502


async def _plain_call(client):
    if isinstance(client, ChatClient):
        return await client.chat_completions(CHAT_BODY)
    if isinstance(client, MessagesClient):
        return await client.messages(MESSAGES_BODY)
    return await client.generate_content("m-small", CONTENT_BODY)


@pytest.mark.parametrize("protocol", ["chat", "messages", "content"])
def test_429_from_a_failing_channel_is_retryable_with_its_retry_after(protocol):
    async def scenario():
        async with asgi_client() as http:
            client = dict(zip(("chat", "messages", "content"), clients(http), strict=True))[protocol]
            client.base_url += "/fault/429"  # the whole channel fails
            with pytest.raises(UpstreamError) as caught:
                await _plain_call(client)
            return caught.value

    error = run(scenario())
    assert error.status == 429 and error.retryable and error.retry_after == 1.0
    gateway_error = final_error(error)
    assert isinstance(gateway_error, RateLimited) and gateway_error.headers == {"Retry-After": "1"}


@pytest.mark.parametrize("protocol", ["chat", "messages", "content"])
def test_500_asked_by_directive_is_retryable(protocol):
    async def scenario():
        async with asgi_client() as http:
            client = dict(zip(("chat", "messages", "content"), clients(http), strict=True))[protocol]
            with pytest.raises(UpstreamError) as caught:
                if isinstance(client, ChatClient):
                    await client.chat_completions({**CHAT_BODY,
                                                   "messages": [{"role": "user", "content": "x #fault=500"}]})
                elif isinstance(client, MessagesClient):
                    await client.messages({**MESSAGES_BODY, "messages": [{"role": "user", "content": "x #fault=500"}]})
                else:
                    await client.generate_content("m",
                                                  {"contents": [{"role": "user", "parts": [{"text": "#fault=500"}]}]})
            return caught.value

    error = run(scenario())
    assert error.status == 500 and error.retryable and isinstance(final_error(error), UpstreamFailed)


def test_a_refused_stream_fails_when_opened_before_any_event():
    async def scenario():
        async with asgi_client() as http:
            chat, _, _ = clients(http)
            stream = chat.stream_chat_completions({**CHAT_BODY,
                                                   "messages": [{"role": "user", "content": "#fault=503"}]})
            with pytest.raises(UpstreamError) as caught:
                await stream.open()
            return caught.value

    error = run(scenario())
    assert error.status == 503 and error.retryable


def test_a_bad_request_is_not_retried_and_becomes_the_clients_400():
    async def scenario():
        async with asgi_client() as http:
            _, messages, _ = clients(http)
            with pytest.raises(UpstreamError) as caught:
                await messages.messages({**MESSAGES_BODY, "temperature": 9})
            return caught.value

    error = run(scenario())
    assert error.status == 400 and not error.retryable
    assert isinstance(final_error(error), InvalidRequest) and "temperature" in error.message


def test_a_cut_answer_is_a_retryable_failure():
    async def scenario():
        async with asgi_client() as http:
            chat, messages, content = clients(http)
            with pytest.raises(UpstreamError) as plain:
                await chat.chat_completions({**CHAT_BODY,
                                             "messages": [{"role": "user", "content": "long answer #fault=cut"}]})
            received = []
            for stream in (chat.stream_chat_completions({**CHAT_BODY, "messages": [
                    {"role": "user", "content": "a long enough answer #fault=cut"}]}),
                    messages.stream_messages({**MESSAGES_BODY,
                                              "messages": [{"role": "user", "content": "x #fault=cut"}]}),
                    content.stream_generate_content("m",
                                                    {"contents": [{"role": "user",
                                                                   "parts": [{"text": "x #fault=cut"}]}]})):
                events = []
                with pytest.raises(UpstreamError) as cut:
                    async with stream:
                        async for event in stream:
                            events.append(event)
                received.append((events, cut.value, stream.completed))
            return plain.value, received

    plain, received = run(scenario())
    assert plain.retryable and "not JSON" in plain.message
    for events, error, completed in received:
        assert events and not completed
        assert error.retryable and "ended before its final event" in error.message


def test_connection_refused_is_retryable():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now

    async def scenario():
        async with httpx.AsyncClient() as http:
            chat = ChatClient(f"http://127.0.0.1:{port}", "sk-secret", http)
            with pytest.raises(UpstreamError) as caught:
                await chat.chat_completions(CHAT_BODY)
            return caught.value

    error = run(scenario())
    assert error.status is None and error.retryable and "connect" in error.message
    assert "sk-secret" not in error.message


def test_the_upstream_key_is_redacted_from_errors():
    def handler(request):
        return httpx.Response(401, json={"error": {"message": "Incorrect API key provided: sk-secret-123",
                                                   "type": "invalid_request_error"}})

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            with pytest.raises(UpstreamError) as caught:
                await ChatClient("https://up.example", "sk-secret-123", http).chat_completions(CHAT_BODY)
            return caught.value

    error = run(scenario())
    assert "sk-secret-123" not in error.message and "sk-secret-123" not in json.dumps(error.body)
    assert "***" in error.message


@pytest.mark.parametrize("protocol,event,status,retryable", [
    ("messages", encode({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"),
     529, True),
    ("messages", encode({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}, "error"), 400,
     False),
    ("chat", encode({"error": {"message": "boom", "type": "server_error", "code": None}}), None, True),
    ("chat", encode({"type": "response.failed", "sequence_number": 3, "response": {
        "error": {"code": "server_error", "message": "boom"}}}, "response.failed"), None, True),
    ("content", encode({"error": {"code": 503, "message": "later", "status": "UNAVAILABLE"}}), 503, True),
])
def test_an_error_inside_a_200_stream_is_raised(protocol, event, status, retryable):
    first = {"chat": encode({"choices": [{"index": 0, "delta": {"content": "a"}}]}),
             "messages": encode({"type": "message_start", "message": {}}, "message_start"),
             "content": encode({"candidates": [{"content": {"parts": [{"text": "a"}]}}]})}[protocol]

    def handler(request):
        return httpx.Response(200, content=first + event, headers={"content-type": "text/event-stream"})

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            client = {"chat": ChatClient, "messages": MessagesClient, "content": ContentClient}[protocol](
                "https://up.example", "k", http)
            stream = client.stream("/v1/x", {})
            events = []
            with pytest.raises(UpstreamError) as caught:
                async with stream:
                    async for e in stream:
                        events.append(e)
            return events, caught.value

    events, error = run(scenario())
    assert len(events) == 1 and error.status == status and error.retryable is retryable and error.body


# --- the stream stops when its consumer does ---------------------------------------------------------------

class TrackedStream(httpx.AsyncByteStream):
    """An endless upstream body that records whether the client closed it."""

    def __init__(self):
        self.sent = 0
        self.closed = False

    async def __aiter__(self):
        while True:
            self.sent += 1
            yield encode({"choices": [{"index": 0, "delta": {"content": "x"}}]})
            await asyncio.sleep(0.001)

    async def aclose(self):
        self.closed = True


def test_leaving_the_stream_closes_the_upstream_response():
    body = TrackedStream()

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, stream=body))) as http:
            async with ChatClient("https://up.example", "k", http).stream_chat_completions(CHAT_BODY) as events:
                async for _ in events:
                    if body.sent >= 3:
                        break

    run(scenario())
    assert body.closed and body.sent < 10


def test_cancelling_the_consumer_closes_the_upstream_response():
    body = TrackedStream()

    async def consume(stream):
        async with stream:
            async for _ in stream:
                pass

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, stream=body))) as http:
            task = asyncio.create_task(consume(ChatClient("https://up.example", "k",
                                                          http).stream_chat_completions(CHAT_BODY)))
            await asyncio.sleep(0.05)
            task.cancel()  # what Starlette does when the gateway's own client goes away
            with pytest.raises(asyncio.CancelledError):
                await task

    run(scenario())
    assert body.closed


# --- timeouts, against the simulators over real HTTP -----------------------------------------------------

# An upstream this slow (s) is one a 0.3 s timeout gives up on: the call ends in the timeout's own
# error ("within 0.3s"), which only the timer raises (the answer, had it come, would be a success).
SLOW_UPSTREAM = 8

def test_first_byte_timeout_on_a_slow_stream(sim_url, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", str(SLOW_UPSTREAM))

    async def scenario():
        async with httpx.AsyncClient() as http:
            chat, _, _ = clients(http, sim_url, timeouts=Timeouts(first_byte=0.3))
            with pytest.raises(UpstreamError) as caught:
                await collect(chat.stream_chat_completions({**CHAT_BODY, "messages": [
                    {"role": "user", "content": "hi #fault=slow"}]}))
            return caught.value

    error = run(scenario())
    assert error.timed_out and error.retryable and "within 0.3s" in error.message
    assert isinstance(final_error(error), UpstreamTimeout)


def test_total_timeout_on_a_slow_plain_call(sim_url, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", str(SLOW_UPSTREAM))

    async def scenario():
        async with httpx.AsyncClient() as http:
            _, messages, _ = clients(http, sim_url, timeouts=Timeouts(total=0.3))
            with pytest.raises(UpstreamError) as caught:
                await messages.messages({**MESSAGES_BODY, "messages": [{"role": "user", "content": "#fault=slow"}]})
            return caught.value

    error = run(scenario())
    assert error.timed_out and error.retryable


@pytest.mark.parametrize("protocol", ["chat", "messages", "content"])
def test_a_plain_call_unanswered_within_the_first_byte_time_times_out_then(sim_url, monkeypatch, protocol):
    # Given an upstream that answers only after 8 s, and a first-byte time of 0.3 s (total 900 s)
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", str(SLOW_UPSTREAM))

    async def scenario():
        async with httpx.AsyncClient() as http:
            chat, messages, content = clients(http, sim_url, timeouts=Timeouts(first_byte=0.3))
            with pytest.raises(UpstreamError) as caught:
                if protocol == "chat":
                    await chat.chat_completions({**CHAT_BODY, "messages": [{"role": "user", "content": "#fault=slow"}]})
                elif protocol == "messages":
                    await messages.messages({**MESSAGES_BODY, "messages": [{"role": "user", "content": "#fault=slow"}]})
                else:
                    await content.generate_content("m", {"contents": [
                        {"role": "user", "parts": [{"text": "#fault=slow"}]}]})
            return caught.value

    # When a non-streamed call is made, then it fails at the first-byte time as a timeout (a 504)
    error = run(scenario())
    assert error.timed_out and error.retryable and "within 0.3s" in error.message
    assert isinstance(final_error(error), UpstreamTimeout)


def test_a_plain_answer_within_the_first_byte_time_arrives(sim_url, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "0.2")

    async def scenario():
        async with httpx.AsyncClient() as http:
            chat, _, _ = clients(http, sim_url, timeouts=Timeouts(first_byte=2))
            return await chat.chat_completions({**CHAT_BODY, "messages": [{"role": "user", "content": "#fault=slow"}]})

    assert run(scenario())["choices"][0]["finish_reason"] == "stop"


def test_a_slow_answer_within_the_limits_arrives(sim_url, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_SLOW_SECONDS", "0.3")

    async def scenario():
        async with httpx.AsyncClient() as http:
            _, _, content = clients(http, sim_url, timeouts=Timeouts(first_byte=2))
            return await collect(content.stream_generate_content("m", {"contents": [
                {"role": "user", "parts": [{"text": "#fault=slow"}]}]}))

    assert run(scenario())[-1].json()["candidates"][0]["finishReason"] == "STOP"


def test_idle_timeout_between_chunks(sim_url, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "500")

    async def scenario():
        async with httpx.AsyncClient() as http:
            _, messages, _ = clients(http, sim_url, timeouts=Timeouts(first_byte=2, idle=0.2))
            events = []
            with pytest.raises(UpstreamError) as caught:
                async with messages.stream_messages(MESSAGES_BODY) as stream:
                    async for event in stream:
                        events.append(event)
            return events, caught.value

    events, error = run(scenario())
    assert events and events[0].event == "message_start"
    assert error.timed_out and "idle for more than 0.2s" in error.message


def test_total_timeout_while_streaming(sim_url, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "50")

    async def scenario():
        async with httpx.AsyncClient() as http:
            chat, _, _ = clients(http, sim_url, timeouts=Timeouts(first_byte=1, idle=1, total=0.4))
            with pytest.raises(UpstreamError) as caught:
                await collect(chat.stream_chat_completions({**CHAT_BODY, "messages": [
                    {"role": "user", "content": "word " * 50}]}))
            return caught.value

    error = run(scenario())
    assert error.timed_out and "0.4s in total" in error.message


def test_real_http_streams_arrive_event_by_event(sim_url, monkeypatch):
    """Nothing is buffered on the way: the simulator sends each next event only once the client
    holds the one before it (its pause between events waits for that, at most 2000 looks)."""
    import types

    from gateway_local.simulators import _text

    # A delay no other test uses: the pauses of this stream are told from those of streams earlier
    # tests left running in the shared simulator (a client that timed out does not stop them at
    # once), which go through the same patched `asyncio` and must not count here.
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "3")
    arrivals: list[int] = []
    paused: list[int] = []
    starved: list[int] = []
    real = asyncio.sleep

    async def pause(seconds: float) -> None:
        if seconds != 0.003:
            await real(seconds)
            return
        paused.append(len(paused) + 1)
        for _ in range(2000):
            if len(arrivals) >= len(paused):
                return
            await real(0.005)
        starved.append(len(paused))  # the client did not have the event before this pause

    monkeypatch.setattr(_text, "asyncio", types.SimpleNamespace(sleep=pause))

    async def scenario():
        async with httpx.AsyncClient() as http:
            chat, _, _ = clients(http, sim_url)
            async with chat.stream_responses({"model": "m-small", "input": "one two three four"}) as stream:
                async for _ in stream:
                    arrivals.append(len(arrivals) + 1)

    run(scenario())
    assert len(paused) >= 5 and starved == []


# --- classification helpers -----------------------------------------------------------------------------

def test_retry_after_forms():
    assert parse_retry_after(httpx.Headers({"retry-after": "2"})) == 2.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert 0 <= parse_retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) <= 1
    assert parse_retry_after(httpx.Headers({})) is None


@pytest.mark.parametrize("status,retryable", [(400, False), (401, False), (403, False), (404, False), (408, True),
                                              (429, True), (500, True), (502, True), (503, True), (529, True)])
def test_status_classification(status, retryable):
    error = ChatClient("https://x", "k", httpx.AsyncClient()).status_error(status, httpx.Headers(), b"{}")
    assert error.retryable is retryable and error.status == status
