"""Side by side with the peer users would pick instead: the same chat load, in the same run,
straight to a fake upstream, through `make run` (full auth and billing) and through LiteLLM's
proxy (its own virtual environment, as many workers as the machine has cores, only a master key,
no database).

    make bench-peers  (or: .venv/bin/python bench/peers.py --litellm .venv-peers/bin/litellm)

Prints, and writes to bench/results.md: added p50 and p99 at concurrency 1 (each proxy in blocks
of 50 requests, the two alternating block by block, each request followed by one straight to the
upstream; `load.alternating`) and requests per second at concurrency 1 and 8, with the
gateway's figure over LiteLLM's as a ratio (added p50: lower is better; requests per second:
higher is better), and the CPU time each process tree spent per request (what the latency would
be on an idle machine, whatever else the machine runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import KEY, WORK, alternating, fake_upstream, free_port, gateway, interleaved, load, ms, start, write_section  # noqa: E402,E501

MASTER_KEY = "sk-bench-litellm-master"


# LiteLLM gets as many workers as `make run` has cores to use (the fair comparison, issue 21).
WORKERS = os.cpu_count() or 1


def litellm(executable: str, upstream_url: str):
    WORK.mkdir(parents=True, exist_ok=True)
    config = WORK / "litellm.yaml"
    config.write_text("model_list:\n  - model_name: m-small\n    litellm_params:\n      model: openai/m-small\n"
                      f"      api_base: {upstream_url}/chat/v1\n      api_key: fake\n"
                      f"general_settings:\n  master_key: {MASTER_KEY}\n")
    port = free_port()
    # The model cost map shipped in the package, not fetched: nothing here reaches the internet.
    return start("litellm", [executable, "--config", str(config), "--port", str(port), "--host", "127.0.0.1",
                             "--num_workers", str(WORKERS)], port,
                 env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}, probe="/health/liveliness")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--litellm", default=".venv-peers/bin/litellm", help="the litellm executable")
    parser.add_argument("--sample", type=int, default=300, help="requests per target at concurrency 1")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/results.md alone")
    args = parser.parse_args()
    if not os.access(args.litellm, os.X_OK):
        raise SystemExit(f"{args.litellm} not found: `make bench-peers` installs it")

    upstream = fake_upstream()
    services = [upstream]
    try:
        services.append(gateway(upstream))
        services.append(litellm(args.litellm, upstream.url))
        _, served, peer = services
        targets = {
            "upstream": (f"{upstream.url}/chat/v1/chat/completions", {"Authorization": "Bearer fake"}),
            "gateway": (f"{served.url}/v1/chat/completions", {"Authorization": f"Bearer {KEY}"}),
            "litellm": (f"{peer.url}/v1/chat/completions", {"Authorization": f"Bearer {MASTER_KEY}"}),
        }
        interleaved(targets, 50)  # warm every path
        one = alternating("upstream", ["gateway", "litellm"], targets, args.sample)
        eight, cpu = {}, {}
        for name, (url, headers) in targets.items():
            service = {"upstream": upstream, "gateway": served, "litellm": peer}[name]
            before = service.cpu_seconds
            eight[name] = load(url, headers, args.sample * 4, 8)
            cpu[name] = (service.cpu_seconds - before) / (args.sample * 4)
    finally:
        for service in reversed(services):
            service.stop()

    def added(name: str, share: float) -> float:
        return one[name].p(share) - one["upstream"].p(share)

    rows = ["| | added p50 (c=1) | added p99 (c=1) | req/s c=1 | req/s c=8 | CPU per request (c=8) |",
            "|---|---|---|---|---|---|"]
    for name in ("gateway", "litellm"):
        rows.append(f"| {name} | {ms(added(name, .5))} | {ms(added(name, .99))} | {one[name].rps:.0f} | "
                    f"{eight[name].rps:.0f} | {ms(cpu[name])} |")
    rows.append(f"| upstream straight | | | {one['upstream'].rps:.0f} | {eight['upstream'].rps:.0f} | "
                f"{ms(cpu['upstream'])} |")
    rows.append(f"| **gateway / litellm** | **{added('gateway', .5) / added('litellm', .5):.2f}x** | "
                f"{added('gateway', .99) / added('litellm', .99):.2f}x | "
                f"**{one['gateway'].rps / one['litellm'].rps:.2f}x** | "
                f"**{eight['gateway'].rps / eight['litellm'].rps:.2f}x** | "
                f"{cpu['gateway'] / cpu['litellm']:.2f}x |")
    ratios = {"added p50 at c=1 at or below LiteLLM's": added("gateway", .5) / added("litellm", .5) <= 1,
              "requests per second at c=1 at or above LiteLLM's": one["gateway"].rps >= one["litellm"].rps,
              "requests per second at c=8 at or above LiteLLM's": eight["gateway"].rps >= eight["litellm"].rps}
    cpu_ratio = cpu["gateway"] / cpu["litellm"]
    goals = {"CPU per request at most 0.5x LiteLLM's": cpu_ratio <= 0.5,
             "added p50 at c=1 at most 0.5x LiteLLM's": added("gateway", .5) / added("litellm", .5) <= 0.5,
             "requests per second at c=8 at least 1.5x LiteLLM's": eight["gateway"].rps >= 1.5 * eight["litellm"].rps}
    rows += ["", "Goals (issue 11):", ""]
    rows += [f"- {goal}: {'met' if met else '**not met**'}" for goal, met in ratios.items()]
    rows += ["", "Goals (issue 21):", ""]
    rows += [f"- {goal}: {'met' if met else '**not met**'}" for goal, met in goals.items()]
    summary = (f"bench-peers: workers={WORKERS} cpu_ratio={cpu_ratio:.2f} "
               f"added_p50_ratio={added('gateway', .5) / added('litellm', .5):.2f} "
               f"rps_c1_ratio={one['gateway'].rps / one['litellm'].rps:.2f} "
               f"rps_c8_ratio={eight['gateway'].rps / eight['litellm'].rps:.2f}")
    rows += ["", f"Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine: "
             "noisy).", "", f"`{summary}`"]
    print("\n".join(rows))
    if args.no_write:
        print(summary)
        return
    write_section("peers", "\n".join([
        "## `make bench-peers`: beside LiteLLM's proxy",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. The same non-streamed chat completions, in one run, "
        "straight to the fake upstream, through `make run` (API key auth, reserve and settle on the embedded store) "
        f"and through LiteLLM's proxy (`litellm --num_workers {WORKERS}`, a master key, no database) in front of "
        f"the same upstream. Concurrency 1: {args.sample} requests per target, each proxy in blocks of 50 requests "
        "(each followed by one straight to the upstream), the two proxies alternating block by block (so that the "
        "work one leaves running after its answers slows its own requests, not the other's); concurrency 8: "
        f"{args.sample * 4} per target. Added p50: lower is better; requests per second: higher is better. "
        "CPU per request: the CPU "
        "time the whole process tree (gateway: make run with its emulator) spent per request at concurrency 8.",
        "", *rows]))
    print(summary)


if __name__ == "__main__":
    main()
