"""Sign-in timing for a known and an unknown username, side by side, through `make run` over HTTP
(issue 33, row 1: a client must not tell which names exist by how long a wrong sign-in takes).

    make bench-signin    (or: .venv/bin/python bench/signin.py [--tries 300])

Starts `make run FRESH=1`, creates a user with a password (the operator's route), then sends
`--tries` wrong-password sign-ins for that name and as many for names that do not exist,
interleaved in a shuffled order, each from an address of its own (127.x.y.z: loopback takes any),
so that no sign-in limit answers instead of the password check. Prints each distribution's
percentiles, the difference of the medians, and how often a known-name try is slower than the
unknown median (about half when nothing tells them apart; 100% before issue 33).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import WORK, Service, free_port, start  # noqa: E402

ACCESS_TOKEN = "bench-access-token"
PASSWORD = "a long enough password"


def gateway() -> Service:
    WORK.mkdir(parents=True, exist_ok=True)
    port = free_port()
    return start("make run", ["make", "--no-print-directory", "run", "FRESH=1"], port, env={
        "PORT": str(port), "GATEWAY_SIMULATOR_PORT": str(free_port()), "GATEWAY_DEMO_ACCESS_TOKEN": ACCESS_TOKEN,
        "GATEWAY_LOCAL_STATE_DIR": str(WORK / "signin-state")}, probe="/plants")


def address(n: int) -> str:
    return f"127.{(n >> 16) & 255}.{(n >> 8) & 255}.{(n & 255) or 1}"


def sign_in(url: str, username: str, source: str) -> tuple[float, int]:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=30) as client:
        started = time.perf_counter()
        answer = client.post(url + "/api/user/login", json={"username": username, "password": "wrong password"})
        return time.perf_counter() - started, answer.status_code


def row(name: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=100)
    return (f"| {name} | {len(values)} | {q[9] * 1000:.1f} | {statistics.median(values) * 1000:.1f} | "
            f"{q[89] * 1000:.1f} | {q[98] * 1000:.1f} | {statistics.mean(values) * 1000:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=300, help="wrong sign-ins per kind of name")
    args = parser.parse_args()
    served = gateway()
    try:
        created = httpx.post(served.url + "/api/admin/users", timeout=30,
                             headers={"Authorization": ACCESS_TOKEN, "X-Api-User": "1"},
                             json={"username": "ann", "password": PASSWORD})
        created.raise_for_status()
        plan = [("known", "ann")] * args.tries + [("unknown", f"nobody{n}") for n in range(args.tries)]
        random.Random(33).shuffle(plan)
        for n in range(20):  # warm both paths (instances, connections)
            sign_in(served.url, "ann" if n % 2 else f"warm{n}", address(100_000 + n))
        times: dict[str, list[float]] = {"known": [], "unknown": []}
        statuses: dict[str, set[int]] = {"known": set(), "unknown": set()}
        for n, (kind, username) in enumerate(plan):
            seconds, status = sign_in(served.url, username, address(n + 1))
            times[kind].append(seconds)
            statuses[kind].add(status)
        print("| name | tries | p10 ms | p50 ms | p90 ms | p99 ms | mean ms |")
        print("|---|---|---|---|---|---|---|")
        print(row("known (wrong password)", times["known"]))
        print(row("unknown", times["unknown"]))
        unknown_median = statistics.median(times["unknown"])
        slower = sum(t > unknown_median for t in times["known"]) / len(times["known"])
        print(f"\nmedian difference (known - unknown): "
              f"{(statistics.median(times['known']) - unknown_median) * 1000:+.1f} ms; known tries slower than "
              f"the unknown median: {slower:.0%}; answers: known {sorted(statuses['known'])}, "
              f"unknown {sorted(statuses['unknown'])}")
    finally:
        served.stop()


if __name__ == "__main__":
    main()
