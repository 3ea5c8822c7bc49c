"""Cold start of each function as built: a fresh interpreter importing it, with its bytecode.

`make bench-cold` (or: .venv/bin/python bench/cold_start.py [RUNS]). The build is made here the
way `make build` makes it, for this machine's platform (the real build's arm64 wheels would not
load here): the layer's and the streaming functions' (text, images) hashed lock files installed into
bench/.work/cold, the layer package and each function's folder copied beside them, everything
compiled by `compileall --invalidation-mode unchecked-hash` as `make build` does. Each function
is then imported by `RUNS` fresh interpreters with /var/task (the function) and /opt/python (the
layer) first on sys.path and bytecode writing off, as on Lambda where both are read-only; the
median is printed. The same is measured without bytecode (what the build shipped before: each
cold start compiled every module), and the text function's import profile (`python -X
importtime`) is summarised by top-level package.

What is measured is the import (the handler module and everything it initialises at import): the
interpreter's own start (about 15-25 ms here) and Lambda's sandbox set-up are not in it. For a
streaming function (text, images) it is what run.sh starts: uvicorn's command line, the app,
uvloop and httptools.

The machine is shared (up to 8 sessions on 2 cores): figures vary by tens of percent from run to
run. Goal: at most 300 ms per function here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work" / "cold"
LAYER = WORK / "opt" / "python"
# What the Lambda runtime brings (boto3 and its dependencies), at the development environment's version.
RUNTIME = WORK / "runtime"
sys.path[:0] = [str(ROOT / "local"), str(ROOT / "layers" / "gateway")]

from gateway_local.template import load_template  # noqa: E402

CHILD = r"""
import json, resource, sys, time
sys.path[:0] = [{task!r}, {layer!r}]
sys.path.append({runtime!r})
started = time.perf_counter()
for name in {modules!r}:
    __import__(name)
elapsed = time.perf_counter() - started
from gateway.store.aws import client
started = time.perf_counter()
client("dynamodb")
aws_ms = (time.perf_counter() - started) * 1000
print(json.dumps({{"ms": elapsed * 1000, "aws_ms": aws_ms,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
# What a streaming function's run.sh imports: uvicorn's command line, the app, and the event loop
# and HTTP parser uvicorn picks when they are installed.
STREAMING_MODULES = ["uvicorn.main", "app", "uvloop", "httptools"]


def functions() -> list[tuple[str, Path]]:
    found = []
    for resource in load_template(ROOT / "template.yaml")["Resources"].values():
        if resource.get("Type") == "AWS::Serverless::Function":
            folder = ROOT / resource["Properties"]["CodeUri"]
            if (folder / "app.py").exists():
                found.append((folder.name, folder))
    return found


def _pip_install(lock: Path, target: Path) -> None:
    """A lock file's packages into `target`, for this machine, unless they are there already."""
    stamp = target / ".lock-sha256"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--require-hashes", "--no-deps", "--only-binary=:all:", "--upgrade", "-r", str(lock),
                    "--target", str(target)], check=True, stderr=subprocess.DEVNULL)
    stamp.write_text(digest)


def _runtime() -> None:
    """boto3 as the Lambda runtime has it (its own folder, after the function's and the layer's:
    the interpreter runs with -S, so nothing else of this machine's site-packages is seen)."""
    from importlib.metadata import version

    wanted = f"boto3=={version('boto3')}"
    stamp = RUNTIME / ".installed"
    if stamp.exists() and stamp.read_text() == wanted:
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade",
                    "--only-binary=:all:", wanted, "--target", str(RUNTIME)], check=True, stderr=subprocess.DEVNULL)
    stamp.write_text(wanted)


def build() -> dict[str, Path]:
    """The layer and each function as `make build` lays them out, with bytecode; name -> /var/task."""
    LAYER.mkdir(parents=True, exist_ok=True)
    RUNTIME.mkdir(parents=True, exist_ok=True)
    _runtime()
    _pip_install(ROOT / "layers" / "gateway" / "requirements.txt", LAYER)
    shutil.rmtree(LAYER / "gateway", ignore_errors=True)
    shutil.copytree(ROOT / "layers" / "gateway" / "gateway", LAYER / "gateway",
                    ignore=shutil.ignore_patterns("__pycache__"))
    tasks = {}
    for name, folder in functions():
        task = WORK / "task" / name
        task.mkdir(parents=True, exist_ok=True)
        lock = folder / "requirements.txt"
        if lock.exists():
            _pip_install(lock, task)
        for item in folder.iterdir():
            if item.name in ("__pycache__",):
                continue
            destination = task / item.name
            if item.is_dir():
                shutil.rmtree(destination, ignore_errors=True)
                shutil.copytree(item, destination, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(item, destination)
        tasks[name] = task
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                    str(WORK)], check=True)
    return tasks


def _environment(bytecode: bool) -> dict[str, str]:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "POWERTOOLS_LOG_LEVEL": "WARNING", "PYTHONDONTWRITEBYTECODE": "1",
           # no channels source: a cold start reads none (its cost is an AWS call, not an import)
           "GATEWAY_CHANNELS_PARAMETER": "", "GATEWAY_CHANNELS_SECRET": "", "GATEWAY_CHANNELS_FILE": ""}
    env.pop("PYTHONPATH", None)
    if not bytecode:
        # bytecode looked for in an empty folder, and never written: every module compiled each time
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="no-pyc-")
    return env


def measure(name: str, task: Path, runs: int, bytecode: bool) -> tuple[float, float, float]:
    modules = STREAMING_MODULES if (task / "run.sh").exists() else ["app"]
    code = CHILD.format(task=str(task), layer=str(LAYER), runtime=str(RUNTIME), modules=modules)
    samples = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-S", "-c", code], env=_environment(bytecode), cwd=task,
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{name}: the import failed:\n{done.stderr}")
        samples.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return tuple(statistics.median(s[key] for s in samples) for key in ("ms", "aws_ms", "peak_mb"))


def import_profile(task: Path, top: int = 14) -> list[tuple[str, float]]:
    """`python -X importtime` of the text function, self time summed per top-level package (ms)."""
    code = (f"import sys; sys.path[:0] = [{str(task)!r}, {str(LAYER)!r}]; sys.path.append({str(RUNTIME)!r})\n"
            + "\n".join(
        f"import {m}" for m in STREAMING_MODULES))
    done = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", code], env=_environment(True), cwd=task,
                          capture_output=True, text=True, check=True)
    by_package: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if found:
            name = found.group(2)
            package = ".".join(name.split(".")[:2]) if name.startswith("gateway.") else name.split(".")[0]
            by_package[package] += int(found.group(1)) / 1000
    return sorted(by_package.items(), key=lambda item: -item[1])[:top]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tasks = build()
    print(f"cold import of each function as built, median of {runs} fresh interpreters "
          f"(Python {sys.version.split()[0]}; a shared machine: expect tens of percent of noise)")
    print(f"{'function':<18}{'with .pyc ms':>14}{'without ms':>12}{'1st AWS client ms':>19}{'peak MB':>9}")
    figures = {}
    for name, task in tasks.items():
        ms, aws_ms, mb = measure(name, task, runs, bytecode=True)
        plain_ms, _, _ = measure(name, task, max(1, runs // 2), bytecode=False)
        figures[name] = ms
        flag = "" if ms <= 300 else "   over the 300 ms goal"
        print(f"{name:<18}{ms:>14.0f}{plain_ms:>12.0f}{aws_ms:>19.0f}{mb:>9.0f}{flag}")
    print("\nthe text function's import profile (python -X importtime, self time per package, ms):")
    for package, ms in import_profile(tasks["text"]):
        print(f"  {package:<32}{ms:>8.1f}")
    print("bench-cold: " + " ".join(f"{name}_ms={round(ms)}" for name, ms in figures.items()))


if __name__ == "__main__":
    main()
