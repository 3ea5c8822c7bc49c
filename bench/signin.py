"""Sign-in timing for a known and an unknown username, side by side, through `make run` over HTTP
(issue 33, row 1: a client must not tell which names exist by how long a wrong sign-in takes).

    make bench-signin    (or: .venv/bin/python bench/signin.py [--pairs 400])

Starts `make run FRESH=1`, creates a user with a password (the operator's route), then sends
`--pairs` pairs of wrong-password sign-ins: one for that name ("ann"), one for a name that does not
exist ("nobody"), back to back, the first of each pair alternating (ABBA), so a shared machine's
load drifts over both alike. Each try comes from an address of its own (127.x.y.z: loopback takes
any), so that no sign-in limit answers instead of the password check; both names see the same
count of failures, so their counters (the per-name ceiling included) stay in step.

Prints each side's percentiles, then the difference of the medians (known - unknown) with a 95%
confidence interval from a paired bootstrap (pairs resampled, seeded: stdlib only) and the
Mann-Whitney U test's two-sided p (normal approximation). A client cannot tell the two apart when
the interval holds 0. The last line is for scripts:

    bench-signin: known_p50_ms=<x> unknown_p50_ms=<x> diff_ms=<x> ci95_ms=[<lo>,<hi>]
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
    """A loopback address of its own for each n (below 250**3), none ending in .0."""
    rest, last = divmod(n, 250)
    return f"127.{rest // 250 % 250 + 1}.{rest % 250 + 1}.{last + 1}"


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


def median_difference_ci(known: list[float], unknown: list[float], *, rounds: int = 4000,
                         seed: int = 33) -> tuple[float, float]:
    """The 95% interval of median(known) - median(unknown) by a paired percentile bootstrap: the
    pairs (taken side by side in time) are resampled together, so load that drifts during the
    run moves both sides of a resample alike."""
    rng, n = random.Random(seed), len(known)
    diffs = []
    for _ in range(rounds):
        picks = [rng.randrange(n) for _ in range(n)]
        diffs.append(statistics.median(known[i] for i in picks) - statistics.median(unknown[i] for i in picks))
    diffs.sort()
    return diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """The two-sided p of the Mann-Whitney U test (normal approximation, ties given mean ranks)."""
    ranked = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(ranked)
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    n1, n2 = len(a), len(b)
    u = sum(r for r, (_, side) in zip(ranks, ranked, strict=True) if side == 0) - n1 * (n1 + 1) / 2
    sigma = (n1 * n2 * (n1 + n2 + 1) / 12) ** 0.5
    z = (u - n1 * n2 / 2) / sigma
    return 2 * (1 - statistics.NormalDist().cdf(abs(z)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=400, help="pairs of wrong sign-ins (one known, one unknown)")
    args = parser.parse_args()
    served = gateway()
    try:
        created = httpx.post(served.url + "/api/admin/users", timeout=30,
                             headers={"Authorization": ACCESS_TOKEN, "X-Api-User": "1"},
                             json={"username": "ann", "password": PASSWORD})
        created.raise_for_status()
        names = {"known": "ann", "unknown": "nobody"}
        for n in range(20):  # warm both paths (instances, connections)
            sign_in(served.url, names["known" if n % 2 else "unknown"], address(100_000 + n))
        times: dict[str, list[float]] = {"known": [], "unknown": []}
        statuses: dict[str, set[int]] = {"known": set(), "unknown": set()}
        tries = 0
        for n in range(args.pairs):
            for kind in ("known", "unknown") if n % 2 == 0 else ("unknown", "known"):  # ABBA
                tries += 1
                seconds, status = sign_in(served.url, names[kind], address(tries))
                times[kind].append(seconds)
                statuses[kind].add(status)
        known, unknown = times["known"], times["unknown"]
        print("| name | tries | p10 ms | p50 ms | p90 ms | p99 ms | mean ms |")
        print("|---|---|---|---|---|---|---|")
        print(row("known (wrong password)", known))
        print(row("unknown", unknown))
        diff = statistics.median(known) - statistics.median(unknown)
        low, high = median_difference_ci(known, unknown)
        slower = sum(t > statistics.median(unknown) for t in known) / len(known)
        print(f"\nmedian difference (known - unknown): {diff * 1000:+.1f} ms, 95% interval "
              f"[{low * 1000:+.1f}, {high * 1000:+.1f}] ms (paired bootstrap); "
              f"Mann-Whitney p={mann_whitney_p(known, unknown):.2f}; "
              f"known tries slower than the unknown median: {slower:.0%}; answers: known {sorted(statuses['known'])}, "
              f"unknown {sorted(statuses['unknown'])}")
        print(f"bench-signin: known_p50_ms={statistics.median(known) * 1000:.1f} "
              f"unknown_p50_ms={statistics.median(unknown) * 1000:.1f} diff_ms={diff * 1000:+.1f} "
              f"ci95_ms=[{low * 1000:+.1f},{high * 1000:+.1f}]")
    finally:
        served.stop()


if __name__ == "__main__":
    main()
