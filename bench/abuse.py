"""The local runner under abuse: another user's latency while one client floods it (issue 33).

    .venv/bin/python bench/abuse.py [--samples 40]

Starts `python -m gateway_local` as the e2e tests do (a fresh state, the simulated upstreams),
a second user with a key of their own, then measures that user's `GET /v1/models` (the text
function, the key checked) one request at a time, `--samples` times in each condition:

- idle: nobody else;
- header flood: 8 clients without a key, each sending requests of 20,000 headers in a loop;
- slowloris: one address opening connections whose headers never finish (a header line every
  second on each), 500 new ones a second (the issue's attack: 24,000 open after 50 s), up to 2,000
  at once;

- stream flood: one key keeping 32 chat completions in flight (the fair queue's case; what
  `tests/e2e/test_abuse.py` checks as an order, timed here).

Every attacker connects from 127.0.0.2, the user from 127.0.0.1 (the runner limits connections per
address, as a network would show them). Each attack runs in a process of its own (its clients
are threads there), not in the user's: threads of one Python process take turns on one lock, so
attackers beside the user in its process would slow the user's own client by its turns, not by
the runner (a first version did, and measured that). The attackers still share the machine's
cores with the runner, as they would not across a network: their CPU seconds are printed beside
the runner's.

Prints each condition's p50 and p99 and its p50 as a multiple of the idle p50 (the goal for the
header abuse: at most 2x), the runner's and the attackers' CPU seconds in the condition, and what
the attackers got (431s, closes, resets, refusals), then one line `bench-abuse: idle_p50_ms=...
header_flood_x=... slowloris_x=... stream_flood_x=...`. Timings depend on the machine: run it
alone on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from load import ms, percentile, tree_cpu_seconds  # noqa: E402

from tests.e2e.conftest import DEMO_KEY, LocalGateway  # noqa: E402

# The attackers connect from another loopback address than the user they slow down, as on a network:
# the runner caps connections per address.
ATTACKER = "127.0.0.2"
CHAT = {"model": "m-small", "messages": [{"role": "user", "content": " ".join(["word"] * 60)}], "stream": True}


def victim_latencies(url: str, key: str, samples: int) -> list[float]:
    took = []
    with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
        for _ in range(samples):
            started = time.perf_counter()
            answer = http.get(url + "/v1/models")
            took.append(time.perf_counter() - started)
            if answer.status_code != 200:
                raise SystemExit(f"the victim got {answer.status_code}: {answer.text[:200]}")
            time.sleep(0.05)
    return took


def header_flood(port: int, stop: threading.Event, seen: Counter) -> None:
    flood = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(20_000)) + b"\r\n"
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(ATTACKER, 0)) as sock:
                try:
                    sock.sendall(flood)
                except OSError:
                    pass  # refused while still sending: the answer may be waiting
                head = sock.recv(64)
                seen[head[:12].decode(errors="replace") or "closed unanswered"] += 1
        except OSError as exc:
            seen[type(exc).__name__] += 1


def slowloris(port: int, stop: threading.Event, seen: Counter, most: int = 2000, per_second: int = 500) -> None:
    open_: list[socket.socket] = []
    while not stop.is_set():
        for _ in range(min(per_second, most - len(open_))):
            if stop.is_set():
                break
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=1, source_address=(ATTACKER, 0))
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
                sock.setblocking(False)
                open_.append(sock)
                seen["opened"] += 1
            except OSError:
                seen["connect failed"] += 1
                break
        time.sleep(1)
        alive = []
        for sock in open_:
            try:
                if sock.recv(64, socket.MSG_PEEK) is not None:
                    seen["answered or closed by the runner"] += 1
                    sock.close()
                    continue
            except BlockingIOError:
                pass  # nothing from the runner: still open
            except OSError:
                seen["reset by the runner"] += 1
                sock.close()
                continue
            try:
                sock.send(b"X-a: b\r\n")
                alive.append(sock)
            except OSError:
                seen["reset by the runner"] += 1
                sock.close()
        open_ = alive
        seen["held at once (max)"] = max(seen["held at once (max)"], len(open_))
    for sock in open_:
        sock.close()


def stream_flood(url: str, stop: threading.Event, seen: Counter) -> None:
    async def run() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120, headers={"Authorization": f"Bearer {DEMO_KEY}"},
                                     limits=httpx.Limits(max_connections=32),
                                     transport=httpx.AsyncHTTPTransport(local_address=ATTACKER)) as client:
            async def worker() -> None:
                while not stop.is_set():
                    async with client.stream("POST", "/v1/chat/completions", json=CHAT) as answer:
                        async for _ in answer.aiter_bytes():
                            pass
                    seen[f"streams {answer.status_code}"] += 1

            await asyncio.gather(*(worker() for _ in range(32)))

    asyncio.run(run())


def run_attack(name: str, port: int, url: str, clients: int, stop: Any, results: Any) -> None:
    """One attack's process: its clients as threads, until `stop`; what they saw into `results`."""
    attack = {"header": lambda halt, seen: header_flood(port, halt, seen),
              "slowloris": lambda halt, seen: slowloris(port, halt, seen),
              "streams": lambda halt, seen: stream_flood(url, halt, seen)}[name]
    halt = threading.Event()
    seen: Counter[str] = Counter()
    threads = [threading.Thread(target=attack, args=(halt, seen), daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    stop.wait()
    halt.set()
    for thread in threads:
        thread.join(30)
    results.put(dict(seen))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args()
    server = LocalGateway({"GATEWAY_SIM_TOKEN_DELAY_MS": "5"})
    try:
        user = server.admin("create-user", "--username", "victim", "--quota-usd", "10")
        key = server.admin("issue-key", "--user", str(user["user_id"]), "--name", "victim")["key"]
        victim_latencies(server.url, key, 5)  # warm
        idle = victim_latencies(server.url, key, args.samples)
        rows: list[tuple[str, list[float], float, float, Counter]] = [("idle", idle, 0.0, 0.0, Counter())]
        attacks = [("header flood (8 clients x 20,000 headers)", "header", 8),
                   ("slowloris (up to 2,000 half-header connections)", "slowloris", 1),
                   ("stream flood (one key, 32 streams)", "streams", 1)]
        context = multiprocessing.get_context("spawn")
        for name, attack, clients in attacks:
            stop, results = context.Event(), context.Queue()
            attacker = context.Process(target=run_attack,
                                       args=(attack, server.port, server.url, clients, stop, results))
            attacker.start()
            time.sleep(3)  # the attack under way
            cpu, attacker_cpu = tree_cpu_seconds(server.process.pid), tree_cpu_seconds(attacker.pid)
            loaded = victim_latencies(server.url, key, args.samples)
            cpu = tree_cpu_seconds(server.process.pid) - cpu
            attacker_cpu = tree_cpu_seconds(attacker.pid) - attacker_cpu
            stop.set()
            seen = Counter(results.get(timeout=60))
            attacker.join(30)
            rows.append((name, loaded, cpu, attacker_cpu, seen))
            time.sleep(6)  # what the attack left open is closed by the runner's timeouts
    finally:
        server.stop()

    idle_p50 = percentile(idle, 0.5)
    print(f"{'condition':50} {'p50':>10} {'p99':>10} {'x idle p50':>10} {'runner CPU s':>12} {'attacker CPU s':>14}")
    for name, took, cpu, attacker_cpu, _ in rows:
        print(f"{name:50} {ms(percentile(took, 0.5)):>10} {ms(percentile(took, 0.99)):>10} "
              f"{percentile(took, 0.5) / idle_p50:>10.2f} {cpu:>12.1f} {attacker_cpu:>14.1f}")
    for name, _, _, _, seen in rows[1:]:
        print(f"  {name}: " + ", ".join(f"{k}={v}" for k, v in sorted(seen.items())))
    ratios = [percentile(took, 0.5) / idle_p50 for _, took, _, _, _ in rows[1:]]
    print(f"bench-abuse: idle_p50_ms={idle_p50 * 1000:.2f} header_flood_x={ratios[0]:.2f} "
          f"slowloris_x={ratios[1]:.2f} stream_flood_x={ratios[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
