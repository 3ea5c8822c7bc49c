"""`make bench-faults`: a few thousand requests of every family through `make run`'s gateway while
its emulator throttles, fails and loses the answers of DynamoDB calls and delivers SQS messages
twice (`GATEWAY_LOCAL_FAULTS`, gateway_local/faults.py), then the money counted where the gateway
keeps it (tests/e2e/faults_support.py). Ends with

    bench-faults: requests=<n> server_errors=<n> lost_units=<n> double_charges=<n> stuck_tasks=<n>

all but `requests` zero when every request answered or failed cleanly with its hold released and
the ledger is exact to the unit.

    make bench-faults   (or: .venv/bin/python bench/faults.py [REQUESTS] [CONCURRENCY])

Settings: BENCH_FAULTS (default: faults_support.FAULTS), BENCH_FAULTS_SEED (default 33).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "local"), str(ROOT / "layers" / "gateway")]


def main() -> None:
    from tests.e2e.conftest import DEMO_KEY, DEMO_QUOTA, LocalGateway
    from tests.e2e.faults_support import FAULTS, Driver, count

    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    faults = os.environ.get("BENCH_FAULTS", FAULTS)
    seed = int(os.environ.get("BENCH_FAULTS_SEED", "33"))
    gateway = LocalGateway({"GATEWAY_LOCAL_FAULTS": faults, "GATEWAY_LOCAL_FAULTS_SEED": str(seed),
                            "POWERTOOLS_LOG_LEVEL": "CRITICAL"})
    try:
        started = time.monotonic()
        outcomes = Driver(gateway.url, DEMO_KEY, seed).run(requests, concurrency)
        sent = time.monotonic() - started
        counts = count(outcomes, gateway.emulator_url, DEMO_QUOTA)
    finally:
        gateway.stop()
    print(f"faults: {faults} (seed {seed}); {requests} requests, {concurrency} at a time, in {sent:.0f} s")
    for (kind, status), n in sorted(counts.statuses.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        print(f"  {kind:<10} {status}: {n}")
    for line in gateway.output:
        if "AWS emulator faults:" in line:
            print(line.strip())
    for problem in counts.problems[:40]:
        print(f"  problem: {problem}")
    print(counts.line())


if __name__ == "__main__":
    main()
