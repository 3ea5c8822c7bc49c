"""What the gateway adds to a text request (and to speech, a transcription and a rerank): the same
requests straight to a simulator and through the local gateway (`python -m gateway_local`, what
`make run` starts), in one run.

    make bench        (or: .venv/bin/python bench/relay.py [REQUESTS] [--emulator] [--only=speech,rerank])

By default the gateway is the text function's ASGI app under uvicorn in a child process, with
the bill kept in memory and the rest of the store (the key, the catalog's health, the options) in
an in-process emulator, nearly empty: the figures are what the relay itself adds (HTTP hop,
validation, conversion, SSE). `--emulator` goes through `python -m gateway_local` instead, with
auth and billing in the moto emulator, whose transactions slow down as its table grows (tens of
ms after a few hundred requests), so those figures say more about moto than about the gateway.

Prints, per dialect or route (speech: a WAV, its stream the `stream_format: sse` events;
transcription: a 1 s WAV, its stream `stream: true`'s events; rerank: not streamed, and its direct
series goes to the Cohere simulator while the gateway may pick the Jina one):
- non-streamed calls: the added latency, p50 and p99 (gateway minus direct, each percentile of its
  own series);
- streams: the added time to the first byte (p50), and the added relay delay per event: with the
  simulator sending its events back to back, (stream time through the gateway - direct) / events.

Goals on the development machine: added p50 under 10 ms, added first byte under 10 ms, per-event
relay under 1 ms.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "local")]
from gateway_local.simulators.audio import speech_audio  # noqa: E402  (a real WAV to transcribe)

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-bench" + "b" * 40
PROMPT = " ".join(f"word{i}" for i in range(60))  # about 120 events in the answer's stream


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_in_memory(port: int, sim_port: int) -> None:
    """The child process: simulators on `sim_port`, the text app on `port`, the bill in memory,
    the rest of the store (the bench's key included) in an in-process emulator."""
    sys.path[:0] = [str(ROOT / "layers" / "gateway"), str(ROOT / "local")]
    os.environ["GATEWAY_SIMULATOR_URL"] = f"http://127.0.0.1:{sim_port}"
    import importlib.util

    import uvicorn

    from gateway.admission import billing
    from gateway_local.emulator import isolate_aws_environment, start_emulator
    from gateway_local.server import _ThreadedServer, simulators_app

    # The store the relay still reads (the catalog's health snapshot, options): the in-process
    # emulator, empty; the key and the bill stay in memory below.
    isolate_aws_environment()
    start_emulator(ROOT / "template.yaml")

    from gateway.admin import ensure_demo_account

    ensure_demo_account(user_id=1, key=KEY, quota=10**15, access_token="bench-access-token", set_quota=True)
    # In memory: the same calls as billing's, whatever options they carry (hold deadlines, log types).
    billing.reserve = lambda principal, units, *, model, route, reservation_id, **_: billing.Reservation(
        reservation_id=reservation_id, user_id=1, key_hash="bench", key_id="bench", limited_key=False, units=units,
        model=model, route=route)
    billing.settle = lambda reservation, units, **_: True
    billing.refund = lambda reservation, **_: True
    _ThreadedServer(simulators_app(), sim_port).start()
    spec = importlib.util.spec_from_file_location("fn_text", ROOT / "functions" / "text" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print("gateway ready on", port, flush=True)
    uvicorn.run(module.app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


def start_gateway(emulator: bool) -> tuple[subprocess.Popen, str, str]:
    port, sim_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"PORT": str(port), "GATEWAY_SIMULATOR_PORT": str(sim_port), "GATEWAY_DEMO_KEY": KEY,
                "GATEWAY_SIM_TOKEN_DELAY_MS": "0", "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join([str(ROOT / "layers" / "gateway"), str(ROOT / "local")])})
    command = ["-m", "gateway_local"] if emulator else [__file__, "--serve", str(port), str(sim_port)]
    process = subprocess.Popen([sys.executable, *command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    for line in process.stdout:
        if "gateway ready on" in line:
            break
        if time.monotonic() > deadline:
            break
    else:
        raise SystemExit("the local gateway did not start")
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # keep the pipe drained
    return process, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{sim_port}"


# name: (direct path under the simulator, gateway path, request, streamed request or None, stream query);
# a request is httpx's keywords (`json`, or `data` and `files` for a multipart form).
def cases() -> dict[str, tuple]:
    chat = {"model": "m-small", "messages": [{"role": "user", "content": PROMPT}]}
    messages = {"model": "m-small", "max_tokens": 1000, "messages": [{"role": "user", "content": PROMPT}]}
    content = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    speech = {"model": "m-tts", "voice": "alloy", "input": PROMPT[:200], "response_format": "wav"}
    upload = {"files": {"file": ("a.wav", speech_audio("x" * 17, "wav"), "audio/wav")}}  # about a second
    rerank = {"model": "m-rerank", "query": "word7 word8", "documents": PROMPT.split()[:50]}
    return {
        "chat": ("/chat/v1/chat/completions", "/v1/chat/completions", {"json": chat},
                 {"json": {**chat, "stream": True}}, {}),
        "messages": ("/messages/v1/messages", "/v1/messages", {"json": messages},
                     {"json": {**messages, "stream": True}}, {}),
        "content": ("/content/v1beta/models/m-small:generateContent", "/v1beta/models/m-small:generateContent",
                    {"json": content}, {"json": content}, {"alt": "sse"}),
        "speech": ("/chat/v1/audio/speech", "/v1/audio/speech", {"json": speech},
                   {"json": {**speech, "stream_format": "sse"}}, {}),
        "transcription": ("/chat/v1/audio/transcriptions", "/v1/audio/transcriptions",
                          {**upload, "data": {"model": "m-transcribe"}},
                          {**upload, "data": {"model": "m-transcribe", "stream": "true"}}, {}),
        "rerank": ("/cohere/v2/rerank", "/v1/rerank", {"json": rerank}, None, {}),
    }


def timed_call(client: httpx.Client, url: str, request: dict) -> float:
    started = time.perf_counter()
    answer = client.post(url, **request)
    answer.raise_for_status()
    return time.perf_counter() - started


def timed_stream(client: httpx.Client, url: str, request: dict, params: dict) -> tuple[float, float, int]:
    """(time to first byte, whole stream, events)."""
    started = time.perf_counter()
    first, events = None, 0
    with client.stream("POST", url, params=params, **request) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if first is None:
                first = time.perf_counter() - started
            events += line.startswith("data:")
    return first or 0.0, time.perf_counter() - started, events


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


def main(requests: int = 200, emulator: bool = False, only: list[str] | None = None) -> None:
    process, gateway, simulator = start_gateway(emulator)
    headers = {"Authorization": f"Bearer {KEY}", "x-api-key": KEY, "x-goog-api-key": KEY,
               "anthropic-version": "2023-06-01"}
    try:
        with httpx.Client(headers=headers, timeout=60) as client:
            print(f"gateway: {'python -m gateway_local (moto billing)' if emulator else 'text app, in-memory bill'}; "
                  f"{requests} requests per series, simulator events back to back, prompt of {len(PROMPT)} chars")
            for dialect, (direct, through, body, streamed, params) in cases().items():
                if only and dialect not in only:
                    continue
                stream_direct = direct.replace(":generateContent", ":streamGenerateContent")
                stream_through = through.replace(":generateContent", ":streamGenerateContent")
                for _ in range(10):  # warm both paths (connections, caches, imports)
                    timed_call(client, simulator + direct, body)
                    timed_call(client, gateway + through, body)
                    if streamed is not None:
                        timed_stream(client, simulator + stream_direct, streamed, params)
                        timed_stream(client, gateway + stream_through, streamed, params)
                plain_direct, plain_gateway, first_direct, first_gateway, relay = [], [], [], [], []
                for _ in range(requests):  # interleaved, so both series see the same machine load
                    plain_direct.append(timed_call(client, simulator + direct, body))
                    plain_gateway.append(timed_call(client, gateway + through, body))
                added_p50 = percentile(plain_gateway, .5) - percentile(plain_direct, .5)
                plain = (f"{dialect:>13}: non-streamed added p50 {ms(added_p50)}"
                         f", p99 {ms(percentile(plain_gateway, .99) - percentile(plain_direct, .99))}"
                         f" (direct p50 {ms(percentile(plain_direct, .5))})")
                if streamed is None:
                    print(plain + "; not streamed")
                    continue
                for _ in range(max(requests // 4, 10)):
                    d_first, d_total, d_events = timed_stream(client, simulator + stream_direct, streamed, params)
                    g_first, g_total, g_events = timed_stream(client, gateway + stream_through, streamed, params)
                    first_direct.append(d_first)
                    first_gateway.append(g_first)
                    relay.append(((g_total - g_first) - (d_total - d_first)) / max(g_events, 1))
                first_added = percentile(first_gateway, .5) - percentile(first_direct, .5)
                print(f"{plain}; stream added first byte p50 {ms(first_added)}"
                      f", relay per event {statistics.median(relay) * 1000:.3f} ms ({g_events} events)")
    finally:
        process.send_signal(signal.SIGINT)  # the runner's clean stop
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_in_memory(int(sys.argv[2]), int(sys.argv[3]))
    else:
        numbers = [a for a in sys.argv[1:] if a.isdigit()]
        picked = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--only=")]
        main(int(numbers[0]) if numbers else 200, emulator="--emulator" in sys.argv,
             only=picked[0].split(",") if picked else None)
