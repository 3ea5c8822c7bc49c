"""The text function as deployed (run.sh: uvicorn, no graceful wait), stopped by SIGTERM in the
middle of a stream: the settlement of what was relayed still finishes before the process exits."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from gateway.admission import billing
from gateway.store.usage import UsageRepository
from gateway_local.server import simulators_app
from tests.conftest import ROOT, serve_asgi


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sigterm_in_the_middle_of_a_stream_still_settles_what_was_relayed(demo, aws, monkeypatch):
    # Given the text function started by its run.sh, and a slow upstream stream
    monkeypatch.setenv("GATEWAY_SIM_TOKEN_DELAY_MS", "100")
    port = _free_port()
    with serve_asgi(simulators_app()) as simulators:
        env = {**os.environ, **aws.environment(), "PORT": str(port), "GATEWAY_SIMULATOR_URL": simulators,
               "PYTHONPATH": str(ROOT / "layers" / "gateway"),
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        process = subprocess.Popen(["sh", "run.sh"], cwd=ROOT / "functions" / "text", env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and process.poll() is None, process.stdout.read()
                time.sleep(0.1)
            words = " ".join(f"word{i}" for i in range(60))
            body = {"model": "m-small", "stream": True, "messages": [{"role": "user", "content": words}]}
            # When SIGTERM comes after the first few events
            relayed = 0
            with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30,
                              headers={"authorization": f"Bearer {demo['key']}"}) as answer:
                request_id = answer.headers["x-request-id"]
                try:
                    for line in answer.iter_lines():
                        if line.startswith("data: {"):
                            relayed += 1
                            if relayed == 3:
                                process.send_signal(signal.SIGTERM)
                except httpx.HTTPError:
                    pass  # the connection was cut by the shutdown
            assert process.wait(timeout=30) is not None
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        output = process.stdout.read()
    # Then the process settled the request before it exited: closed once, billed for what it relayed
    entries = [e for e in UsageRepository().ledger(1) if e["request_id"] == request_id]
    assert len(entries) == 1 and entries[0]["outcome"] == billing.SETTLED, output
    (entry,) = entries
    assert entry["detail"]["outcome"] in ("client_gone", "cut") and int(entry["units"]) > 0
    assert 0 < int(entry["detail"]["output_tokens"]) < 60
    assert json.dumps(entry, default=str)
