"""The fake upstream of the side-by-side benchmarks: the built-in simulators (chat at `/chat`)
in their own process, answering at once (no delay per token).

    .venv/bin/python bench/fake_upstream.py PORT
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path[:0] = [str(ROOT / "layers" / "gateway"), str(ROOT / "local")]
    os.environ["GATEWAY_SIM_TOKEN_DELAY_MS"] = "0"
    import uvicorn

    from gateway_local.server import simulators_app

    uvicorn.run(simulators_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off")
