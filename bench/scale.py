"""One account at high request rates: the gateway's own admission path (hold before the upstream
call, settle after it) against the emulator with DynamoDB's limits on (`gateway_local.dynamo_model`).

    make bench-scale     (or: .venv/bin/python bench/scale.py [--designs today,leases] [--seconds 3])

No HTTP and no upstream: each request holds its worst case, waits a fixed simulated generation
time, and settles a price drawn around the hold (some above it, some refunds), as the text
function does. Requests arrive open-loop at the offered rate (one user, one limited key), spread
over `--instances` simulated function instances (each its own lease pool, as a warm Lambda
environment is). Per design and offered rate it measures the rate served, p99 of the admission
overhead (the request's time minus the generation time), conflicts and throttles the model
refused, 429s the gateway answered, DynamoDB calls on a request's thread before its upstream call,
and the write units the model charged per billed request. After every run it checks the money:
the user's units before = quota after + everything charged + whatever is still held (lost units),
and nothing was charged beyond the quota (overspend units); a last run gives the account a quota
smaller than the load wants, to show that it runs out exactly.

Prints, writes its section of bench/results.md with a plot (bench/scale.png), and ends with
`bench-scale: account_rps=<n> overspend_units=<n> lost_units=<n> wru_per_request=<x>
round_trips_before_upstream=<x>` for the new design.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "layers" / "gateway"), str(ROOT / "local"), str(Path(__file__).resolve().parent)]
os.environ.update({"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
                   "AWS_REGION": "us-east-1", "POWERTOOLS_LOG_LEVEL": "ERROR", "GATEWAY_KEY_CACHE_SECONDS": "5",
                   "POWERTOOLS_METRICS_NAMESPACE": "bench", "POWERTOOLS_SERVICE_NAME": "bench"})

from load import percentile, write_section  # noqa: E402

HOLD = 2000  # units held per request (a short chat at its output limit)
MODEL, ROUTE = "m-small", "/v1/chat/completions"


@dataclass
class Level:
    design: str
    offered: float
    served: float = 0.0
    p99_ms: float = 0.0
    ok: int = 0
    refused_429: int = 0
    refused_quota: int = 0
    failed: int = 0
    conflicts: int = 0
    throttles: int = 0
    write_units: float = 0.0
    trips_before: float = 0.0
    lost_units: int = 0
    overspend_units: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def wru_per_request(self) -> float:
        return self.write_units / max(self.ok, 1)


_thread = threading.local()


def _count_call(**_: object) -> None:
    _thread.calls = getattr(_thread, "calls", 0) + 1


class Design:
    """One admission design as the functions call it: `hold` before the upstream, `close` after."""

    name = ""

    def instance(self, n: int) -> object:
        return n

    def hold(self, instance: object, principal: object, request_id: str) -> object:
        raise NotImplementedError

    def close(self, instance: object, reservation: object, units: int) -> None:
        raise NotImplementedError

    def finish(self, instances: list[object]) -> None:
        """Every instance gives back what it still holds (their functions go idle)."""

    def held(self, user_id: int) -> int:
        """Units still held for the user after `finish`."""
        return 0


class Today(Design):
    """The design before issue 21: a reservation transaction, then a settlement transaction."""

    name = "today"

    def hold(self, instance, principal, request_id):
        from gateway.admission import billing

        return billing.reserve(principal, HOLD, model=MODEL, route=ROUTE, reservation_id=request_id,
                               hold_seconds=1020)

    def close(self, instance, reservation, units):
        from gateway.admission import billing

        if units < 0:
            billing.refund(reservation, reason="bench: upstream failed")
        else:
            billing.settle(reservation, units)

    def held(self, user_id):
        """Reservations still open (a settlement that gave up with a 429 leaves its hold to the sweeper)."""
        from gateway.admission import billing

        return sum(r.units for r in billing.overdue(time.time() + 10**9) if r.user_id == user_id)


class Leases(Design):
    """Issue 21's design: quota leases held per instance (`gateway.admission.leases`)."""

    name = "leases"

    def instance(self, n):
        from gateway.admission import leases

        return leases.LeasePool(holder=f"bench-{n}")

    def hold(self, instance, principal, request_id):
        from gateway.admission import billing

        return billing.reserve_request(principal, HOLD, model=MODEL, route=ROUTE, request_id=request_id,
                                       pool=instance)

    def close(self, instance, reservation, units):
        from gateway.admission import billing

        if units < 0:
            billing.refund(reservation, reason="bench: upstream failed", pool=instance)
        else:
            billing.settle(reservation, units, pool=instance)

    def finish(self, instances):
        for pool in instances:
            pool.release_all()


def _price(rng: random.Random) -> int:
    """Most requests cost less than their hold, some more (the hold was an estimate), some fail."""
    roll = rng.random()
    if roll < 0.03:
        return -1  # the upstream failed: a refund
    if roll < 0.10:
        return HOLD + rng.randint(1, 500)
    return rng.randint(100, HOLD)


def _setup(quota: int):
    from gateway import auth
    from gateway.auth import authenticate
    from gateway.store.keys import KeysRepository
    from gateway.store.users import UsersRepository

    auth.clear_cache()
    user = UsersRepository().create_user(username=f"bench{time.monotonic_ns()}", quota=quota)
    user_id = int(user["id"])
    secret = "sk-bench" + os.urandom(16).hex()
    KeysRepository().create_key(user_id, name="bench", key=secret, quota=quota)
    return user_id, authenticate({"authorization": f"Bearer {secret}"})


def run_level(emulator, design: Design, offered: float, seconds: float, *, generation_ms: float, instances: int,
              quota: int = 10**12, seed: int = 21) -> Level:
    from gateway.errors import InsufficientQuota, RateLimited
    from gateway.store.aws import client

    user_id, principal = _setup(quota)
    pools = [design.instance(n) for n in range(instances)]
    client("dynamodb").meta.events.register("before-call.dynamodb", _count_call)
    level, lock = Level(design.name, offered), threading.Lock()
    latencies: list[float] = []
    charged = [0]
    rng = random.Random(seed)
    counts_before = emulator.model_counts()
    total = int(offered * seconds)
    generation = generation_ms / 1000

    def one(n: int, due: float) -> None:
        pool = pools[n % instances]
        price = _price(random.Random(seed * 1_000_003 + n))
        _thread.calls = 0
        started = time.monotonic()
        try:
            reservation = design.hold(pool, principal, f"bench-{user_id}-{n}")
            trips = _thread.calls
            time.sleep(generation)
            design.close(pool, reservation, price)
        except RateLimited:
            with lock:
                level.refused_429 += 1
            return
        except InsufficientQuota:
            with lock:
                level.refused_quota += 1
            return
        except Exception as exc:  # counted and shown: a benchmark never hides a failure
            with lock:
                level.failed += 1
                level.errors[type(exc).__name__] = level.errors.get(type(exc).__name__, 0) + 1
            return
        finished = time.monotonic()
        with lock:
            level.ok += 1
            level.trips_before += trips
            latencies.append(finished - max(started, due) - generation)
            charged[0] += max(price, 0)

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(2000, max(64, int(offered * (generation + 0.2)) + 32))) as workers:
        for n in range(total):
            due = began + n / offered
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            workers.submit(one, n, due)
        submitted_by = time.monotonic()
    ended = time.monotonic()
    design.finish(pools)
    client("dynamodb").meta.events.unregister("before-call.dynamodb", _count_call)
    counts = emulator.model_counts()
    level.conflicts = counts.conflicts - counts_before.conflicts
    level.throttles = counts.throttles - counts_before.throttles
    level.write_units = counts.write_units - counts_before.write_units
    level.served = level.ok / max(ended - began, submitted_by - began, 1e-9)
    level.p99_ms = percentile(latencies, 0.99) * 1000 if latencies else 0.0
    level.trips_before /= max(level.ok, 1)
    # The money: what the user had = what is left + what the ledger charged + what is still held.
    from gateway.admission import balances
    from gateway.store.usage import UsageRepository

    user = balances.get_user(user_id) or {}
    ledger = UsageRepository().ledger(user_id)
    billed = sum(int(e.get("units", 0)) for e in ledger)
    left = int(user.get("quota", 0))
    level.lost_units = quota - (left + billed + design.held(user_id))
    level.overspend_units = max(billed - quota, 0) + max(-left, 0)
    del rng
    return level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--designs", default="today,leases")
    parser.add_argument("--rates", default="", help="offered requests per second, comma separated")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of load per rate")
    parser.add_argument("--generation-ms", type=float, default=100.0, help="the simulated upstream's time")
    parser.add_argument("--instances", type=int, default=8, help="simulated function instances")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/results.* alone")
    args = parser.parse_args()

    import tempfile

    from gateway_local.emulator import start_emulator_process

    # The emulator in a process of its own (as under `make run`), with DynamoDB's limits on.
    os.environ.update({"GATEWAY_LOCAL_DYNAMODB_MODEL": "1", "GATEWAY_LOCAL_SAVE_SECONDS": "86400"})
    emulator = start_emulator_process(ROOT / "template.yaml", Path(tempfile.mkdtemp(prefix="bench-scale-")),
                                      fresh=True)
    designs = {"today": Today(), "leases": Leases()}
    default_rates = {"today": [25, 50, 100, 200], "leases": [250, 500, 1000, 1200]}
    levels: list[Level] = []
    print(HEADER, flush=True)
    try:
        for name in args.designs.split(","):
            rates = [float(r) for r in args.rates.split(",")] if args.rates else default_rates[name]
            for rate in rates:
                level = run_level(emulator, designs[name], rate, args.seconds, generation_ms=args.generation_ms,
                                  instances=args.instances)
                levels.append(level)
                print(_row(level), flush=True)
        # An account whose quota runs out under the load: it must end at 0, never below, nothing lost.
        exhausted = run_level(emulator, designs["leases"], 500, 2, generation_ms=args.generation_ms,
                              instances=args.instances, quota=HOLD * 300)
        exhausted.design = "leases, quota runs out"
        print(_row(exhausted), flush=True)
    finally:
        emulator.stop()
    load = os.getloadavg()[0]
    new = [level for level in levels if level.design == "leases"] or levels
    clean = [level for level in new if not level.refused_429 and not level.failed]
    summary = (f"bench-scale: account_rps={max((level.served for level in clean), default=0):.0f} "
               f"overspend_units={sum(level.overspend_units for level in [*new, exhausted])} "
               f"lost_units={sum(abs(level.lost_units) for level in [*new, exhausted])} "
               f"wru_per_request={max(level.wru_per_request for level in new):.2f} "
               f"round_trips_before_upstream={max(level.trips_before for level in new):.3f}")
    note = (f"load average {load:.1f} on {os.cpu_count()} cores at the end (the machine is shared with other "
            "sessions: the figures are noisy, and above a few hundred requests a second the limit is the CPU "
            "of the benchmark and the emulator, not the model)")
    print(note)
    if not args.no_write:
        _write(levels + [exhausted], args, note, summary)
    print(summary)


HEADER = ("| design | offered req/s | served req/s | p99 admission | 429 | conflicts | throttles | failed "
          "| write units / request | DynamoDB calls before upstream | lost units | overspend units |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def _write(levels: list[Level], args: argparse.Namespace, note: str, summary: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (served, p99) = plt.subplots(1, 2, figsize=(11, 4))
    for design, style in (("today", "o-"), ("leases", "s-")):
        mine = [level for level in levels if level.design == design]
        if not mine:
            continue
        served.plot([lv.offered for lv in mine], [lv.served for lv in mine], style, label=design)
        p99.plot([lv.offered for lv in mine], [lv.p99_ms for lv in mine], style, label=design)
    served.set(xlabel="offered requests per second (one account)", ylabel="served requests per second")
    p99.set(xlabel="offered requests per second (one account)", ylabel="p99 admission overhead (ms)", yscale="log")
    for axes in (served, p99):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(ROOT / "bench" / "scale.png", dpi=100)
    from datetime import UTC, datetime

    text = "\n".join([
        "## `make bench-scale`: one account under DynamoDB's limits",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores. The admission path alone (hold, "
        f"{args.generation_ms:.0f} ms of simulated generation, settle: some above the hold, some refunds) for one "
        f"user and one limited key, spread over {args.instances} simulated instances, against the emulator in its "
        "own process with its model of DynamoDB on (transaction conflicts, 1000 write units a second per "
        "partition key, 4 ms per call, 12 ms per transaction). `today` is the design before issue 21 (a "
        "reservation transaction and a settlement transaction on the account's items); `leases` is issue 21's.",
        "",
        HEADER,
        *(_row(level) for level in levels),
        "",
        note + ".",
        "",
        f"`{summary}`",
        "",
        "![served and p99 against offered load](scale.png)",
    ])
    write_section("scale", text)


def _row(level: Level) -> str:
    return (f"| {level.design} | {level.offered:.0f} | {level.served:.0f} | {level.p99_ms:.1f} ms | "
            f"{level.refused_429} | {level.conflicts} | {level.throttles} | {level.failed} | "
            f"{level.wru_per_request:.2f} | {level.trips_before:.2f} | {level.lost_units} | {level.overspend_units} |")


if __name__ == "__main__":
    main()
