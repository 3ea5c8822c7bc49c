"""The local gateway's serving processes: `GATEWAY_LOCAL_PROCESSES` of them (default: the number
of cores) accept the requests of one listening socket, as Lambda runs a function's instances in
separate execution environments. Python runs one thread at a time per process: with one process
the runner serves at most one core's worth of requests, whatever the machine has.

- the first process is the runner itself (`server.py`): it also runs the simulators, the queue
  loops and schedules, the demo account and the state; the others (`serve_more`, started with
  `spawn` as soon as the emulator's process is forked, importing what the functions import while
  it starts, then told to go) only serve requests: each loads the template's functions for itself (its own pools of
  instances, its own layer: key cache, quota leases, clients) and reaches the AWS emulator's
  process over its Unix socket, as the first does;
- the listening socket is made once, by the first process, and handed to the others: the kernel
  gives each new connection to whichever process accepts first (an idle one, mostly);
- a helper takes no connection before it reads the demo key the runner printed the way a request
  reads it (`gateway.auth.key_served`: its own key cache, its own clients, the store): it says so
  on its pipe, and the runner prints "gateway ready" only once every serving process has (the
  first checks the key itself, before it serves). A helper that cannot read the key within
  `KEY_READY_SECONDS` serves nothing and says why, and the runner stops: a printed key that a
  serving process refuses is never announced (issue 33's "demo key refused once");
- a helper stops (uvicorn's graceful stop: its requests finish, its last bills are written) when
  its pipe from the runner closes: the runner stopping, or gone.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gateway_local.instances import count_setting

KEY_READY_SECONDS = 60.0  # how long a helper waits to read the demo key before it gives up
# Test hook only (tests/e2e/test_local_processes.py): a helper's key lookups miss for this many
# seconds after it starts, as if its view of the store had not caught up with the seeding yet.
UNSEEN_KEY_HOOK = "GATEWAY_LOCAL_TEST_KEY_UNSEEN_SECONDS"


def process_count() -> int:
    """Serving processes: `GATEWAY_LOCAL_PROCESSES`, else the number of cores."""
    return count_setting("GATEWAY_LOCAL_PROCESSES", os.cpu_count() or 1)


def listening_socket(port: int) -> socket.socket:
    """The gateway's listening socket on 127.0.0.1 (`port` 0: any free one), shared by every
    serving process."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener


@dataclass
class Helpers:
    """The serving processes after the first, seen from the runner."""

    processes: list[Any] = field(default_factory=list)
    pipes: list[Any] = field(default_factory=list)

    def wait_ready(self, timeout: float) -> list[str]:
        """Waits until every helper has said it is ready (it has read the demo key); what went
        wrong instead, one line per helper that did not (empty: all ready)."""
        problems = []
        deadline = time.monotonic() + timeout
        for number, pipe in enumerate(self.pipes, 1):
            try:
                said = pipe.recv() if pipe.poll(max(deadline - time.monotonic(), 0)) else \
                    f"serving process {number}: not ready within {timeout:.0f} s"
            except (EOFError, OSError):
                said = f"serving process {number}: exited before it was ready"
            if said != "ready":
                problems.append(str(said))
        return problems

    def go(self, calls_address: str, endpoint_url: str, demo_key: str) -> None:
        """Each, its imports done meanwhile, is told what the runner has set up since it started
        (the emulator's addresses, the environment, the demo key): it then loads its functions."""
        orders = {"calls_address": calls_address, "endpoint_url": endpoint_url, "demo_key": demo_key,
                  "environment": dict(os.environ)}
        for pipe in self.pipes:
            pipe.send(orders)

    def stop(self, timeout: float = 20) -> None:
        """Each stops as a Ctrl-C stops the runner (its requests finish, its bills are written),
        told by its pipe closing; one that has not within `timeout` is killed. Once is enough
        (a second stop finds them stopped); one never told to go stops at once."""
        for pipe in self.pipes:
            pipe.close()
        for process in self.processes:
            process.join(timeout)
            if process.is_alive():
                process.kill()
                process.join()


def start_helpers(count: int, template_path: str, listener: socket.socket) -> Helpers:
    """`count` more serving processes on `listener`, started while the runner itself starts (the
    emulator, the simulators, the demo account): each imports the layer meanwhile, then waits for
    `Helpers.go`, then loads its functions and serves once it has read the demo key (a second or
    two; the first process serves meanwhile; `Helpers.wait_ready` waits for them)."""
    context = multiprocessing.get_context("spawn")
    helpers = Helpers()
    # A helper starts with Ctrl-C ignored (inherited): a Ctrl-C in the terminal reaches every
    # process of the group, and one still importing would die of it mid-start. Once serving,
    # uvicorn's own handler takes Ctrl-C (a graceful stop); the runner stops it by its pipe.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for number in range(1, count + 1):
            mine, theirs = context.Pipe()
            process = context.Process(target=serve_more, name=f"gateway-serving-{number}", daemon=False,
                                      args=(template_path, listener, theirs, number))
            process.start()
            theirs.close()
            helpers.processes.append(process)
            helpers.pipes.append(mine)
    finally:
        signal.signal(signal.SIGINT, previous)
    return helpers


def serve_more(template_path: str, listener: socket.socket, runner: Any, number: int = 1) -> None:
    """A serving process after the first: the template's functions behind the shared socket,
    from the moment it reads the demo key as a request would."""
    from gateway.settings import reload_settings
    from gateway.store.aws import reset_clients
    from gateway_local.emulator import route_calls_to_emulator
    from gateway_local.instances import import_dependencies
    from gateway_local.serving import function_pools, serving_server
    from gateway_local.template import read_template

    # What the functions import, while the runner starts (no layer module reads its settings or
    # makes a client at import: `reload_settings` and `reset_clients` below see the orders').
    template = read_template(template_path)
    import_dependencies(template.functions.values())
    try:
        orders = runner.recv()
    except (EOFError, OSError):
        return  # the runner stopped (or did not start) before it needed this process
    os.environ.update(orders["environment"])
    route_calls_to_emulator(orders["endpoint_url"], orders["calls_address"])
    reset_clients()
    reload_settings()
    server = serving_server(template, *function_pools(template))
    if os.environ.get(UNSEEN_KEY_HOOK):
        _hide_keys_for(float(os.environ[UNSEEN_KEY_HOOK]))
    if not wait_for_key(orders["demo_key"], KEY_READY_SECONDS):
        runner.send(f"serving process {number}: the demo key is not readable here after {KEY_READY_SECONDS:.0f} s")
        return
    runner.send("ready")

    def watch_runner() -> None:
        try:
            runner.recv()  # nothing is ever sent: this returns when the runner's end closes
        except (EOFError, OSError):
            pass
        server.should_exit = True

    threading.Thread(target=watch_runner, name="runner-watch", daemon=True).start()
    server.run(sockets=[listener])


def wait_for_key(demo_key: str, timeout: float) -> bool:
    """Whether this process reads `demo_key` as a request would (asked again every 0.1 s) within
    `timeout` seconds."""
    from gateway.auth import key_served

    deadline = time.monotonic() + timeout
    while not key_served(demo_key):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _hide_keys_for(seconds: float) -> None:
    """The test hook (`UNSEEN_KEY_HOOK`): this process's key lookups miss for `seconds`."""
    from gateway.store.keys import KeysRepository

    until, real = time.monotonic() + seconds, KeysRepository.raw_key

    def unseen(self: Any, key_hash: str, **kwargs: Any) -> Any:
        return None if time.monotonic() < until else real(self, key_hash, **kwargs)

    KeysRepository.raw_key = unseen  # type: ignore[method-assign]
