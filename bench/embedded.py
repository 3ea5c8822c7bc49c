"""The product as users run it: chat completions through `make run` (full auth and billing on the
embedded store), against the same fake upstream called straight.

    make bench        (or: .venv/bin/python bench/embedded.py [--requests 10000] [--sample 300])

Prints, and writes to bench/results.md with a plot in bench/results.png:
- added latency p50 and p99 at concurrency 1 (gateway and upstream taking turns, request by
  request) and at concurrency 8, and requests per second at both;
- over `--requests` (10000) requests in a row at concurrency 1, the p50 of each block of 1000
  and the resident memory of the whole `make run` (gateway, emulator, simulators) after it.

Goals (issue 11): added p50 at most 10 ms at concurrency 1; the last block's p50 within 20% of
the first's; under 500 MB resident after 10000 billed requests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import KEY, ROOT, fake_upstream, gateway, interleaved, load, ms, write_section  # noqa: E402

BLOCK = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000, help="requests of the long run (blocks of 1000)")
    parser.add_argument("--sample", type=int, default=300, help="requests per latency series")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/results.* alone")
    args = parser.parse_args()

    upstream = fake_upstream()
    served = gateway(upstream)
    try:
        direct = (f"{upstream.url}/chat/v1/chat/completions", {"Authorization": "Bearer fake"})
        through = (f"{served.url}/v1/chat/completions", {"Authorization": f"Bearer {KEY}"})
        interleaved({"direct": direct, "gateway": through}, 50)  # warm both (connections, instances)
        one = interleaved({"direct": direct, "gateway": through}, args.sample)
        eight = {name: load(url, headers, args.sample * 4, 8) for name, (url, headers) in
                 (("direct", direct), ("gateway", through))}
        rows = [("1", one["direct"], one["gateway"]), ("8", eight["direct"], eight["gateway"])]
        table = ["| concurrency | added p50 | added p99 | gateway p50 | upstream p50 | gateway req/s "
                 "| upstream req/s |",
                 "|---|---|---|---|---|---|---|"]
        for concurrency, straight, gw in rows:
            table.append(f"| {concurrency} | {ms(gw.p(.5) - straight.p(.5))} | {ms(gw.p(.99) - straight.p(.99))} | "
                         f"{ms(gw.p(.5))} | {ms(straight.p(.5))} | {gw.rps:.0f} | {straight.rps:.0f} |")
        print("\n".join(table), flush=True)

        blocks: list[tuple[int, float, float]] = []  # (requests served, p50 of the block, resident MB)
        served_so_far = args.sample * 5 + 50
        print(f"\n{args.requests} requests at concurrency 1, blocks of {BLOCK}:", flush=True)
        started, cpu_before = time.monotonic(), served.cpu_seconds
        for _ in range(max(args.requests // BLOCK, 1)):
            run = load(through[0], through[1], BLOCK, 1)
            served_so_far += BLOCK
            blocks.append((served_so_far, run.p(.5), served.rss_mb))
            print(f"  after {served_so_far:6d}: p50 {ms(run.p(.5))}, resident {blocks[-1][2]:.0f} MB", flush=True)
        elapsed = time.monotonic() - started
        cpu_per_request = (served.cpu_seconds - cpu_before) / (len(blocks) * BLOCK)
        load_average = os.getloadavg()[0]
    finally:
        served.stop()
        upstream.stop()

    drift = blocks[-1][1] / blocks[0][1] - 1
    summary = [
        f"Last block p50 {drift:+.1%} against the first; resident memory {blocks[0][2]:.0f} MB after the first "
        f"block, {blocks[-1][2]:.0f} MB after {blocks[-1][0]} requests ({elapsed:.0f} s for the long run). "
        f"CPU time of the whole make run per request: {ms(cpu_per_request)} (its background loops and autosave "
        f"included); load average at the end: {load_average:.1f} on {os.cpu_count()} cores.",
        "",
        "Goals (issue 11):",
        "",
        f"- added p50 at concurrency 1 at most 10 ms: {ms(one['gateway'].p(.5) - one['direct'].p(.5))}, "
        f"{verdict(one['gateway'].p(.5) - one['direct'].p(.5) <= 0.010)}",
        f"- last block's p50 within 20% of the first's: {drift:+.1%}, {verdict(abs(drift) <= 0.20)}",
        f"- under 500 MB resident after 10000 billed requests: {blocks[-1][2]:.0f} MB, "
        f"{verdict(blocks[-1][2] < 500)}",
    ]
    print("\n" + "\n".join(summary))
    if args.no_write:
        return
    block_table = ["| requests served | p50 of the block | resident memory |", "|---|---|---|"]
    block_table += [f"| {n} | {ms(p50)} | {rss:.0f} MB |" for n, p50, rss in blocks]
    write_section("embedded", "\n".join([
        "## `make bench`: through `make run`",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {sys.platform}, "
        f"{os.cpu_count()} cores. Non-streamed chat completions (`m-small`, a short prompt) "
        "through `make run` (API key auth, reserve and settle on the embedded DynamoDB emulator in its own "
        "process, ledger and day totals) and straight to the same fake upstream (the built-in chat simulator "
        "in its own process, no delay per token). Added = gateway minus upstream, each percentile of its own series.",
        "", *table, "", *block_table, "", *summary, "", "![latency and memory](results.png)"]))
    plot(blocks)


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def plot(blocks: list[tuple[int, float, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    served = [n for n, _, _ in blocks]
    figure, latency = plt.subplots(figsize=(8, 4.5))
    latency.plot(served, [p50 * 1000 for _, p50, _ in blocks], marker="o", color="tab:blue")
    latency.set_xlabel("requests served")
    latency.set_ylabel("p50 of the block (ms)", color="tab:blue")
    latency.set_ylim(bottom=0)
    memory = latency.twinx()
    memory.plot(served, [rss for _, _, rss in blocks], marker="s", color="tab:red")
    memory.set_ylabel("resident memory of make run (MB)", color="tab:red")
    memory.set_ylim(bottom=0)
    latency.set_title("make run: chat completion latency and memory against requests served")
    figure.tight_layout()
    figure.savefig(ROOT / "bench" / "results.png", dpi=100)


if __name__ == "__main__":
    main()
