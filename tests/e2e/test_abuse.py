"""The embedded default (`make run`) under a hostile client: nothing a client without a key, or
one key, can send stalls the other users."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

from tests.e2e.conftest import DEMO_KEY, LocalGateway

AUTH = {"Authorization": f"Bearer {DEMO_KEY}"}
CHAT = {"model": "m-small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}


@pytest.fixture(scope="module")
def abused():
    """A gateway of one serving process with two text instances and a 2 s body timeout, and a
    second user's key."""
    server = LocalGateway({"GATEWAY_LOCAL_INSTANCES": "2", "GATEWAY_LOCAL_BODY_TIMEOUT_SECONDS": "2",
                           "GATEWAY_LOCAL_PROCESSES": "1"})
    user = server.admin("create-user", "--username", "victim", "--quota-usd", "10")
    other = server.admin("issue-key", "--user", str(user["user_id"]), "--name", "victim")["key"]
    yield server, other
    server.release()


def stalled_body(port: int, path: str = "/v1/chat/completions", key: str | None = DEMO_KEY) -> socket.socket:
    """A connection that starts a chunked body and never finishes it."""
    sock = socket.create_connection(("127.0.0.1", port))
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n".encode())
    return sock


def test_stalled_bodies_hold_no_instance_and_are_dropped_after_the_timeout(abused):
    server, other = abused
    stalls = [stalled_body(server.port) for _ in range(4)] + [stalled_body(server.port, key=None)]
    try:
        # Four stalled bodies, two text instances: were an instance lent before the body is
        # whole, these would wait for a stall's timeout (and then be told 408), not answer.
        for path in ("/health", "/v1/models"):
            answer = httpx.get(server.url + path, headers={"Authorization": f"Bearer {other}"}, timeout=10)
            assert answer.status_code == 200, (path, answer.text)
        answer = httpx.post(server.url + "/v1/chat/completions", json=CHAT,
                            headers={"Authorization": f"Bearer {other}"}, timeout=10)
        assert answer.status_code == 200
        # The keyless one was refused before its body; the others get a 408 once the timeout passes.
        stalls[-1].settimeout(2)
        assert b" 401 " in stalls[-1].recv(4096).split(b"\r\n")[0] + b" "
        for sock in stalls[:-1]:
            sock.settimeout(5)
            head = sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 408"), head[:200]
            assert b'"error"' in head or sock.recv(4096)
    finally:
        for sock in stalls:
            sock.close()


def test_a_body_over_10_mb_is_a_413_in_the_envelope_at_once_and_a_keyless_one_a_401_unread(abused):
    server, _ = abused
    big = b'{"model":"m-small","messages":[{"role":"user","content":"' + b"x" * (11 * 1024 * 1024) + b'"}]}'
    answer = httpx.post(server.url + "/v1/chat/completions", content=big, headers={**AUTH,
                        "Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "request_too_large"
    messages = httpx.post(server.url + "/v1/messages", content=big, headers={"x-api-key": DEMO_KEY,
                          "Content-Type": "application/json", "anthropic-version": "2023-06-01"}, timeout=30)
    assert messages.status_code == 413 and messages.json()["type"] == "error"
    keyless = httpx.post(server.url + "/v1/chat/completions", content=big,
                         headers={"Content-Type": "application/json"}, timeout=30)
    assert keyless.status_code == 401 and keyless.json()["error"]["type"] == "authentication_error"


def test_a_text_body_lambda_would_refuse_is_a_413_locally_as_deployed(abused):
    # Between Lambda's 6 MB invocation payload and API Gateway's 10 MB: on AWS the text function's
    # invocation is refused (InvokeWithResponseStream takes 6 MB, like Invoke), so locally too
    server, _ = abused
    big = b'{"model":"m-small","messages":[{"role":"user","content":"' + b"x" * (7 * 1024 * 1024) + b'"}]}'
    answer = httpx.post(server.url + "/v1/chat/completions", content=big, headers={**AUTH,
                        "Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "request_too_large"
    assert "6 MB" in answer.json()["error"]["message"]


def test_the_431_comes_while_the_client_still_has_headers_unsent(abused):
    """The 101st header is refused as it is parsed: the client has sent 102 headers (a header
    is whole once the next begins) and not the blank line that ends them, and has its 431, in the
    route's envelope, already (before, the runner waited for the end of the headers, then parsed
    all 20,000 of a flood)."""
    server, _ = abused
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(101)))
        sock.settimeout(30)  # not a measure: the answer must come with the headers unfinished
        head = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 431"), head[:200]
    assert json.loads(head.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_header_fields_too_large"


def test_a_header_block_past_16_kb_is_a_431_before_its_end_arrives(abused):
    server, _ = abused
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /v1/messages HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"v" * (16 * 1024) + b"\r\n")
        sock.settimeout(30)
        head = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 431"), head[:200]
    assert json.loads(head.split(b"\r\n\r\n", 1)[1])["type"] == "error"  # the messages envelope
    with socket.create_connection(("127.0.0.1", server.port)) as sock:  # a request line alone past 16 KB
        sock.sendall(b"GET /v1/models?q=" + b"x" * (17 * 1024))
        sock.settimeout(30)
        assert read_answer(sock).startswith(b"HTTP/1.1 431")
    # API Gateway's own rule still holds for a whole header block under 16 KB (values past 10240 bytes)
    big = httpx.get(server.url + "/v1/models", headers={**AUTH, "X-Big": "v" * 11_000}, timeout=10)
    assert big.status_code == 431 and big.json()["error"]["message"]


def read_answer(sock: socket.socket) -> bytes:
    """An answer's head and its body (as much as arrives before the server closes)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), None)
        if length is not None and len(body) >= length:
            break
    return data


@pytest.mark.parametrize("path,headers,query", [
    ("/v1/models", [("Authorization", f"Bearer {DEMO_KEY}"), ("Authorization", "Bearer sk-" + "o" * 48)], {}),
    ("/v1/dashboard/billing/subscription", [("Authorization", "Bearer sk-" + "o" * 48),
                                            ("Authorization", f"Bearer {DEMO_KEY}")], {}),
    ("/v1/models", [("x-api-key", DEMO_KEY)], {"key": "sk-" + "o" * 48}),
    ("/v1beta/models", [("x-goog-api-key", DEMO_KEY)], {"key": "sk-" + "o" * 48}),
    ("/v1/dashboard/billing/usage", [("Authorization", f"Bearer {DEMO_KEY}")], {"key": "sk-" + "o" * 48}),
])
def test_two_different_credentials_are_a_401_on_every_route(abused, path, headers, query):
    server, _ = abused
    answer = httpx.get(server.url + path, headers=httpx.Headers(headers), params=query, timeout=10)
    assert answer.status_code == 401, (path, answer.text)
    mine = [h for h in headers if DEMO_KEY in h[1]]
    same = httpx.get(server.url + path, headers=httpx.Headers(mine * 2),
                     params={"key": DEMO_KEY} if query else {}, timeout=10)
    assert same.status_code == 200, (path, same.text)


def test_one_key_flooding_32_streams_delays_another_user_by_one_turn_not_32(abused):
    """The fair queue's order, seen from outside: one key keeps 32 long streams open against two
    text instances; another user's request, sent once the flood is being served, is answered
    before all but a few of the flood's streams end (first come, first served, it would wait for
    the ~30 queued ahead of it). The timing of the same flood is `bench/abuse.py`'s."""
    server, other = abused
    finished: list[str] = []
    long_answer = {**CHAT, "stream": True, "max_tokens": 400,
                   "messages": [{"role": "user", "content": " ".join(["word"] * 400)}]}

    async def scenario() -> None:
        started = asyncio.Event()
        async with httpx.AsyncClient(base_url=server.url, timeout=120,
                                     limits=httpx.Limits(max_connections=40)) as client:
            async def flood(n: int) -> None:
                async with client.stream("POST", "/v1/chat/completions", json=long_answer, headers=AUTH) as answer:
                    assert answer.status_code == 200
                    started.set()
                    async for _ in answer.aiter_bytes():
                        pass
                finished.append(f"flood-{n}")

            async def victim() -> None:
                await started.wait()  # the flood is being served, the rest of it queued
                answer = await client.post("/v1/chat/completions", json=CHAT,
                                           headers={"Authorization": f"Bearer {other}"})
                assert answer.status_code == 200
                finished.append("victim")

            await asyncio.gather(*(flood(n) for n in range(32)), victim())

    asyncio.run(scenario())
    assert len(finished) == 33
    ahead = finished.index("victim")
    assert ahead <= 6, finished  # two in flight when it came, then one of each principal in turn


# --- the connections themselves: header timeout, connections per address --------------------------------

GUARD_CAP = 6


@pytest.fixture(scope="module")
def guarded():
    """A gateway of one serving process that closes unfinished headers after 4 s and lets one
    address hold 6 connections."""
    server = LocalGateway({"GATEWAY_LOCAL_PROCESSES": "1", "GATEWAY_LOCAL_HEADER_TIMEOUT_SECONDS": "4",
                           "GATEWAY_LOCAL_MAX_CONNECTIONS_PER_ADDRESS": str(GUARD_CAP)})
    yield server
    server.release()


def kept_alive(port: int) -> socket.socket:
    """A connection that has had one answer and stays open (keep-alive)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    sock.settimeout(30)
    return sock


def test_the_connection_past_the_cap_from_one_address_is_refused_and_a_freed_place_is_taken(guarded):
    held = [kept_alive(guarded.port) for _ in range(GUARD_CAP)]
    try:
        assert all(read_answer(sock).startswith(b"HTTP/1.1 200") for sock in held)
        with socket.create_connection(("127.0.0.1", guarded.port)) as extra:
            extra.settimeout(30)
            refused = read_answer(extra)
        assert refused.startswith(b"HTTP/1.1 429"), refused[:200]
        held.pop().close()
        # The freed place is taken by the next connection (once the runner has seen the close).
        for _ in range(50):
            with kept_alive(guarded.port) as again:
                if read_answer(again).startswith(b"HTTP/1.1 200"):
                    break
        else:
            raise AssertionError("a freed place was never given to a new connection")
    finally:
        for sock in held:
            sock.close()


def test_a_connection_with_unfinished_headers_is_closed_and_an_idle_one_too(guarded):
    half = socket.create_connection(("127.0.0.1", guarded.port))
    idle = socket.create_connection(("127.0.0.1", guarded.port))
    try:
        half.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bear")
        for sock in (half, idle):
            sock.settimeout(60)  # not a measure: the runner closes them after its 4 s
            assert sock.recv(4096) == b""  # closed by the runner, nothing answered
    finally:
        half.close()
        idle.close()


# --- admission at accept: new connections per address, the penalty after a header flood ----------------

BURST = 5


@pytest.fixture(scope="module")
def admitting():
    """A gateway of one serving process that lets an address open 5 connections and then (nearly)
    none (one a quarter of an hour: no refill within a test), and refuses an address at its
    first 431 for ten minutes."""
    server = LocalGateway({"GATEWAY_LOCAL_PROCESSES": "1", "GATEWAY_LOCAL_NEW_CONNECTIONS_PER_SECOND": "0.001",
                           "GATEWAY_LOCAL_NEW_CONNECTIONS_BURST": str(BURST), "GATEWAY_LOCAL_HEADER_STRIKES": "1",
                           "GATEWAY_LOCAL_HEADER_PENALTY_SECONDS": "600"})
    yield server
    server.release()


def connect_from(address: str, port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(address, 0))
    sock.settimeout(30)  # not a measure: a refused connection is reset after the runner's 1 s hold
    return sock


def refused_unread(sock: socket.socket) -> bool:
    """A request on `sock` gets no answer: the connection is reset (nothing of it was read, so the
    close is a reset) or closed, without a byte of HTTP."""
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def served(sock: socket.socket) -> bool:
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return read_answer(sock).startswith(b"HTTP/1.1 200")


def test_the_connection_past_an_address_burst_is_refused_unread_and_another_address_is_served(admitting):
    opened = [connect_from("127.0.0.5", admitting.port) for _ in range(BURST + 1)]
    try:
        assert all(served(sock) for sock in opened[:BURST])
        assert refused_unread(opened[BURST])
        with connect_from("127.0.0.6", admitting.port) as other:
            assert served(other)
    finally:
        for sock in opened:
            sock.close()


def test_an_address_answered_431_has_its_next_connection_refused_at_accept_and_others_are_served(admitting):
    with connect_from("127.0.0.7", admitting.port) as flood:
        flood.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(101)))
        assert read_answer(flood).startswith(b"HTTP/1.1 431")
    with connect_from("127.0.0.7", admitting.port) as again:  # within its burst: refused for the 431
        assert refused_unread(again)
    with connect_from("127.0.0.8", admitting.port) as other:
        assert served(other)
