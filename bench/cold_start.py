"""Cold-start share we control: a fresh Python process importing each function's handler module.

For every function of template.yaml, starts `RUNS` fresh interpreters that each import the
function's `app.py` (which builds its resolver and clients' factories at import, as on Lambda)
and report the import time and the process's peak memory (RSS). Prints the medians.

    make bench        (or: .venv/bin/python bench/cold_start.py [RUNS])

Goal: at most 300 ms and 80 MB per function on the development machine. The first AWS client
(botocore, imported lazily) is reported on its own: a request that needs DynamoDB pays it once.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "local"), str(ROOT / "layers" / "gateway")]

from gateway_local.emulator import load_template  # noqa: E402

CHILD = r"""
import importlib.util, json, resource, sys, time
sys.path[:0] = [{layer!r}]
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("fn_app", {app!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
elapsed = time.perf_counter() - started
from gateway.store.aws import client
started = time.perf_counter()
client("dynamodb")
aws_ms = (time.perf_counter() - started) * 1000
print(json.dumps({{"ms": elapsed * 1000, "aws_ms": aws_ms,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def functions() -> list[tuple[str, Path]]:
    found = []
    for logical_id, resource in load_template(ROOT / "template.yaml")["Resources"].items():
        if resource.get("Type") == "AWS::Serverless::Function":
            app = ROOT / resource["Properties"]["CodeUri"] / "app.py"
            if app.exists():
                found.append((logical_id, app))
    return found


def measure(app: Path, runs: int) -> tuple[float, float, float]:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "POWERTOOLS_LOG_LEVEL": "WARNING", "PYTHONDONTWRITEBYTECODE": "0"}
    code = CHILD.format(layer=str(ROOT / "layers" / "gateway"), app=str(app))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # warm the .pyc cache
    samples = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                         text=True).stdout) for _ in range(runs)]
    return tuple(statistics.median(s[name] for s in samples) for name in ("ms", "aws_ms", "peak_mb"))


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    print(f"cold import of each function's handler module, median of {runs} fresh processes "
          f"(Python {sys.version.split()[0]})")
    print("(import: the handler module and everything it initialises; first AWS client: what the first request")
    print(" that touches DynamoDB adds on top, botocore's imports and service model; peak: the whole process)")
    print(f"{'function':<28}{'import ms':>10}{'1st AWS client ms':>19}{'peak MB':>10}")
    for logical_id, app in functions():
        ms, aws_ms, mb = measure(app, runs)
        flag = "" if ms <= 300 and mb <= 80 else "   over the 300 ms / 80 MB goal"
        print(f"{logical_id:<28}{ms:>10.1f}{aws_ms:>19.1f}{mb:>10.1f}{flag}")


if __name__ == "__main__":
    main()
