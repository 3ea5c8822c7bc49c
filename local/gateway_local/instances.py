"""Lambda's execution environments, locally: a small pool of instances per function.

Deployed, an instance of a function (an execution environment) handles one request at a time,
and concurrent requests run in separate instances, each with its own copy of the function's
module. The runner does the same inside one process:

- an instance is a separate load of the function's `app.py` (its own Powertools resolver, its
  own module globals), lent to one request at a time; a function has at most
  `GATEWAY_LOCAL_INSTANCES` of them (default: the number of cores; eight per core for the
  streaming function, whose instances mostly wait on the upstream), made on first need, and a
  request that finds every instance busy waits for one, as it would at a concurrency limit;
- buffered functions run in worker threads. Powertools keeps the current event and context on
  its `BaseRouter` class, shared by every resolver of the process; `isolate_router_state` makes
  those two attributes per thread, so a request only ever sees its own event;
- the streaming functions (text, images: ASGI apps under the Lambda Web Adapter) get the same pool of
  separately loaded apps, each serving one request at a time on the runner's event loop: the
  same one-request-per-environment rule as deployed, where the adapter hands an environment
  one invocation at a time.

What the instances still share is the layer (`gateway.*` is imported once per process): its
key cache, AWS clients, the outbound HTTP client and the logger's appended keys. The first three
hold no request's data; log lines of concurrent requests may carry each other's appended keys.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import os
import queue
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

from gateway_local.template import Function

# The streaming text function's instances spend most of a request waiting on the upstream (a
# generation takes seconds) on the runner's event loop, not on a core of their own: as many as
# this per core by default, so that a few slow answers do not queue everyone else's.
STREAMING_INSTANCES_PER_CORE = 8


def count_setting(name: str, default: int) -> int:
    """A count the runner reads from the environment variable `name` (a whole number of at least
    1), else `default`."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got '{value}'")
    return int(value)


def instance_limit(*, streaming: bool = False) -> int:
    """Instances per function: `GATEWAY_LOCAL_INSTANCES`, else the number of cores (eight per
    core for the streaming function)."""
    cores = os.cpu_count() or 1
    return count_setting("GATEWAY_LOCAL_INSTANCES", cores * STREAMING_INSTANCES_PER_CORE if streaming else cores)


def load_module(function: Function, instance: int = 1) -> Any:
    """A fresh load of a function's app.py under its own module name (every function's file is
    called app.py); each instance of a function is its own load."""
    name = f"fn_{function.logical_id}" + (f"_{instance}" if instance > 1 else "")
    spec = importlib.util.spec_from_file_location(name, function.code_dir / "app.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {function.code_dir / 'app.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def import_dependencies(functions: Iterable[Function]) -> None:
    """Imports what the functions' app.py files import at their top (the layer, Powertools'
    resolvers, ...), without loading the functions: a serving process does it while the runner
    starts, so loading its instances later costs their own module's run only."""
    for function in functions:
        tree = ast.parse((function.code_dir / "app.py").read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                __import__(node.module, fromlist=[alias.name for alias in node.names])  # submodules too


def handler_of(function: Function, module: Any) -> Callable[[dict, Any], Any]:
    return getattr(module, function.handler.rsplit(".", 1)[-1])


class FunctionPool:
    """The instances of one buffered function. `invoke` is called from any thread."""

    def __init__(self, function: Function, limit: int):
        self.function, self.limit = function, limit
        self._idle: queue.LifoQueue = queue.LifoQueue()  # the warmest instance first
        self._made, self._lock = 0, threading.Lock()
        self._idle.put(self._load())  # the first instance at start: a broken function fails here

    def _load(self) -> Callable[[dict, Any], Any]:
        with self._lock:
            self._made += 1
            number = self._made
        return handler_of(self.function, load_module(self.function, number))

    def _acquire(self) -> Callable[[dict, Any], Any]:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            room = self._made < self.limit
        return self._load() if room else self._idle.get()

    @property
    def instances(self) -> int:
        return self._made

    def invoke(self, event: dict, context: Any) -> Any:
        handler = self._acquire()
        try:
            return handler(event, context)
        finally:
            self._idle.put(handler)


class FairGate:
    """At most `limit` requests inside at once; those that wait are let in round-robin across
    principals (one of each waiting principal in turn), so that a principal with thirty requests
    queued delays another's one request by at most one turn, not thirty. Used on one event loop."""

    def __init__(self, limit: int):
        self.limit, self.busy = limit, 0
        self._waiting: OrderedDict[str, deque[asyncio.Future]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    async def acquire(self, principal: str) -> None:
        if self.busy < self.limit and not self._waiting:
            self.busy += 1
            return
        turn: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(principal, deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # let in, then cancelled: pass the place on
            else:
                line = self._waiting.get(principal)
                if line is not None and turn in line:
                    line.remove(turn)
                    if not line:
                        del self._waiting[principal]
            raise

    def release(self) -> None:
        while self._waiting:
            principal, line = next(iter(self._waiting.items()))
            turn = line.popleft()
            if line:
                self._waiting.move_to_end(principal)  # its next request waits for everyone else's turn
            else:
                del self._waiting[principal]
            if not turn.done():
                turn.set_result(None)  # the place passes on: `busy` stays
                return
        self.busy -= 1


class AsgiPool:
    """The instances of the streaming function: an ASGI app that lends each request one instance,
    admitted fairly across principals (`FairGate`)."""

    def __init__(self, function: Function, limit: int):
        self.function, self.limit = function, limit
        self._idle: list[Any] = [load_module(function).app]
        self._made = 1
        self.gate = FairGate(limit)

    @property
    def instances(self) -> int:
        return self._made

    async def __call__(self, scope: dict, receive: Callable, send: Callable, principal: str = "") -> None:
        await self.gate.acquire(principal)
        try:
            if self._idle:
                app = self._idle.pop()
            else:
                self._made += 1
                app = load_module(self.function, self._made).app
            try:
                await app(scope, receive, send)
            finally:
                self._idle.append(app)
        finally:
            self.gate.release()


_isolated = False


def isolate_router_state() -> None:
    """Makes Powertools' class-level `current_event` and `lambda_context` per thread (once)."""
    global _isolated
    if _isolated:
        return
    from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

    names = ("current_event", "lambda_context")
    state = threading.local()

    class PerThread:
        def __init__(self, name: str):
            self.name = name

        def __get__(self, instance: Any, owner: Any = None) -> Any:
            return getattr(state, self.name, None)

        def __set__(self, instance: Any, value: Any) -> None:
            setattr(state, self.name, value)

    class PerThreadRouterMeta(type(BaseRouter)):  # type: ignore[misc]
        """`BaseRouter.current_event = event` (how Powertools sets it) writes this thread's copy."""

        def __setattr__(cls, name: str, value: Any) -> None:
            if cls is BaseRouter and name in names:
                setattr(state, name, value)
            else:
                super().__setattr__(name, value)

    for name in names:
        type.__setattr__(BaseRouter, name, PerThread(name))
    BaseRouter.__class__ = PerThreadRouterMeta  # type: ignore[method-assign]
    # Fail at start, not on a request, if Powertools stopped keeping them this way.
    BaseRouter.current_event = "probe"  # type: ignore[assignment]
    seen: list[Any] = []
    probe = threading.Thread(target=lambda: seen.append(BaseRouter.current_event))
    probe.start()
    probe.join()
    if BaseRouter.current_event != "probe" or seen != [None]:
        raise RuntimeError("aws_lambda_powertools no longer keeps the current event on BaseRouter; "
                           "gateway_local/instances.py must be checked again")
    BaseRouter.current_event = None  # type: ignore[assignment]
    _isolated = True
