"""What the embedded and side-by-side benchmarks share: the services they start, the load they
send, and how they read latency and memory. Not a benchmark itself."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"  # git-ignored: the benchmarks' state directory and configs
KEY = "sk-bench" + "b" * 40
CHAT = {"model": "m-small", "messages": [{"role": "user", "content": "Say something short."}]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB (Linux /proc)."""
    total_kb, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total_kb += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, StopIteration):
            continue
    return total_kb / 1024


def _tree(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and its descendants (Linux /proc).
    Per request, it tells what the latency would be on an idle machine, whatever else runs."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for current in _tree(pid):
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / ticks


@dataclass
class Service:
    """A process group started for a benchmark, stopped with Ctrl-C as a user would."""

    name: str
    url: str
    process: subprocess.Popen
    output: list[str] = field(default_factory=list)

    def wait_ready(self, probe: str = "/", timeout: float = 120) -> None:
        threading.Thread(target=lambda: self.output.extend(self.process.stdout or []), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                httpx.get(self.url + probe, timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit(f"{self.name} did not start:\n" + "".join(self.output[-40:]))

    @property
    def rss_mb(self) -> float:
        return tree_rss_mb(self.process.pid)

    @property
    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start(name: str, command: list[str], port: int, env: dict[str, str] | None = None,
          probe: str = "/") -> Service:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environment.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    service = Service(name, f"http://127.0.0.1:{port}", process)
    service.wait_ready(probe)
    return service


def fake_upstream() -> Service:
    port = free_port()
    return start("fake upstream", [sys.executable, str(ROOT / "bench" / "fake_upstream.py"), str(port)], port)


def gateway(upstream: Service) -> Service:
    """`make run FRESH=1`, as a user starts it, with full auth and billing on the embedded store,
    its one chat channel being the fake upstream."""
    WORK.mkdir(parents=True, exist_ok=True)
    channels = WORK / "channels.yaml"
    channels.write_text(f"channels:\n  - name: fake\n    protocol: chat\n    base_url: {upstream.url}/chat\n"
                        "    api_key: fake\n    models: ['*']\nprices: {}\n")
    port = free_port()
    return start("make run", ["make", "--no-print-directory", "run", "FRESH=1"], port, env={
        "PORT": str(port), "GATEWAY_SIMULATOR_PORT": str(free_port()), "GATEWAY_DEMO_KEY": KEY,
        "GATEWAY_CHANNELS_FILE": str(channels), "GATEWAY_LOCAL_STATE_DIR": str(WORK / "state")}, probe="/plants")


@dataclass
class Run:
    latencies: list[float]
    seconds: float

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.seconds

    def p(self, share: float) -> float:
        return percentile(self.latencies, share)


def load(url: str, headers: dict[str, str], requests: int, concurrency: int, body: dict = CHAT) -> Run:
    """`requests` chat completions from `concurrency` clients at once; every answer must be a 200."""
    latencies: list[float] = []
    left = [requests]
    lock = threading.Lock()
    failures: list[str] = []

    def client() -> None:
        with httpx.Client(headers=headers, timeout=60) as http:
            while True:
                with lock:
                    if left[0] <= 0 or failures:
                        return
                    left[0] -= 1
                started = time.perf_counter()
                answer = http.post(url, json=body)
                took = time.perf_counter() - started
                if answer.status_code != 200:
                    failures.append(f"{answer.status_code} {answer.text[:200]}")
                    return
                with lock:
                    latencies.append(took)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{url}: {failures[0]}")
    return Run(latencies, time.perf_counter() - started)


def interleaved(targets: dict[str, tuple[str, dict[str, str]]], requests: int, seed: int = 11) -> dict[str, Run]:
    """Concurrency 1, the targets taking turns request by request, so each sees the same machine;
    in a new (seeded) order each round, so that the work a target leaves running after its answer
    (a proxy's logging callbacks) slows each of the targets after it alike, not always the same one."""
    runs = {name: Run([], 0.0) for name in targets}
    order, shuffle = list(targets), random.Random(seed).shuffle
    with httpx.Client(timeout=60) as http:
        for _ in range(requests):
            shuffle(order)
            for name in order:
                url, headers = targets[name]
                started = time.perf_counter()
                answer = http.post(url, json=CHAT, headers=headers)
                took = time.perf_counter() - started
                if answer.status_code != 200:
                    raise SystemExit(f"{name}: {answer.status_code} {answer.text[:200]}")
                runs[name].latencies.append(took)
                runs[name].seconds += took
    return runs


def alternating(baseline: str, proxies: list[str], targets: dict[str, tuple[str, dict[str, str]]], requests: int,
                block: int = 50) -> dict[str, Run]:
    """Concurrency 1 for each proxy in turn, a block of `block` requests at a time (each request
    followed by one to the `baseline`), the proxies alternating block by block until each has had
    `requests`: each sees the same machine over the run, and the work a proxy leaves running after
    its answers (LiteLLM's logging callbacks) slows its own next requests, not another's."""
    runs = {name: Run([], 0.0) for name in [baseline, *proxies]}
    done = 0
    while done < requests:
        size = min(block, requests - done)
        for proxy in proxies:
            for name, run in interleaved({baseline: targets[baseline], proxy: targets[proxy]}, size).items():
                runs[name].latencies.extend(run.latencies)
                runs[name].seconds += run.seconds
        proxies = proxies[::-1]  # the other one goes first next time
        done += size
    return runs


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def write_section(name: str, text: str, path: Path = ROOT / "bench" / "results.md") -> Path:
    """Replaces this benchmark's own section of bench/results.md (each benchmark writes its own)."""
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    empty = "# Benchmark results\n\nWritten by `make bench` and `make bench-peers`.\n"
    current = path.read_text() if path.exists() else empty
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in current and end in current:
        current = current[:current.index(begin)] + block + current[current.index(end) + len(end):]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    path.write_text(current)
    return path
