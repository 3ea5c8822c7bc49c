"""The local gateway: API Gateway, Lambda and the event sources of template.yaml, in one process
(and the AWS emulator in a second one).

- every `Api` event of the template is served on 127.0.0.1 (`serving.py`: API Gateway in front
  of the functions); each function runs in a small pool of instances that handle one request
  at a time, as Lambda's execution environments do (`instances.py`); more serving processes
  share the listening socket (`processes.py`);
- moto's server stands in for DynamoDB, SQS and S3, with the template's resources, in a process
  of its own that keeps their data across restarts in the state directory (`state.py`);
- each SQS event source is a loop (receive, invoke, delete what succeeded), each schedule a timer;
- the simulated upstreams run on a second port, and the demo account is made at start.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import secrets
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn

from gateway_local import apigw
from gateway_local.emulator import (
    LOCAL_AWS_ENVIRONMENT,
    SQS_SENDS,
    Emulator,
    EmulatorProcess,
    SqsSends,
    fork_emulator_process,
    isolate_aws_environment,
)
from gateway_local.instances import import_dependencies
from gateway_local.processes import (
    KEY_READY_SECONDS,
    Helpers,
    listening_socket,
    process_count,
    start_helpers,
    wait_for_key,
)
from gateway_local.serving import StoppableServer, function_pools, serving_server
from gateway_local.state import demo_credentials, demo_quota_changed, state_dir
from gateway_local.template import Template, read_template, schedule_seconds

EMPTY_QUEUE_PAUSE = 0.5  # at most, before an empty queue is asked again (a send wakes it at once)


class _Loop(threading.Thread):
    """A background loop that runs `step` until stopped, never letting one failure end it."""

    def __init__(self, name: str, step: Callable[[], None], pause: float, log: Callable[[str], None]):
        super().__init__(name=name, daemon=True)
        self._step, self._pause, self._log = step, pause, log
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self._step()
            except Exception as exc:  # a local event source keeps going, like the real one
                self._log(f"{self.name}: {exc!r}")
            self.stopping.wait(self._pause)


def sqs_step(sqs: Any, queue_url: str, queue_arn: str, batch_size: int, handler: Callable,
             function_id: str, partial_batch: bool, sends: SqsSends | None = None) -> None:
    """One receive → invoke → delete round of Lambda's SQS event source mapping."""
    # No long polling: the emulator serves one request at a time, so a receive that waited would
    # hold up every other AWS call of the gateway. An empty queue is asked again when this process
    # sends a message (to any queue), or shortly after in any case.
    seen = sends.count if sends is not None else 0
    answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=min(batch_size, 10), WaitTimeSeconds=0,
                                 AttributeNames=["All"], MessageAttributeNames=["All"])
    messages = answer.get("Messages", [])
    if not messages:
        if sends is not None:
            sends.wait(seen, EMPTY_QUEUE_PAUSE)
        else:
            time.sleep(EMPTY_QUEUE_PAUSE)
        return
    records = [{
        "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
        "attributes": m.get("Attributes", {}), "messageAttributes": {
            name: {"stringValue": a.get("StringValue"), "binaryValue": a.get("BinaryValue"), "stringListValues": [],
                   "binaryListValues": [], "dataType": a["DataType"]}
            for name, a in m.get("MessageAttributes", {}).items()},
        "md5OfBody": m.get("MD5OfBody"), "eventSource": "aws:sqs", "eventSourceARN": queue_arn,
        "awsRegion": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    } for m in messages]
    try:
        result = handler({"Records": records}, apigw.LambdaContext(function_id, timeout_seconds=180))
    except Exception:
        return  # the whole batch comes back after its visibility timeout, as deployed
    failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])} if partial_batch else set()
    done = [m for m in messages if m["MessageId"] not in failed]
    if done:
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])


def run_schedule(handler: Callable[[dict, Any], Any], function_id: str) -> None:
    """One tick of a schedule: the function gets EventBridge's scheduled event."""
    handler(scheduled_event(function_id), apigw.LambdaContext(function_id, 60))


def scheduled_event(function_id: str) -> dict[str, Any]:
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
        "account": "123456789012", "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "resources": [f"arn:aws:events:us-east-1:123456789012:rule/{function_id}-schedule"], "detail": {},
    }


def simulators_app() -> Any:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from gateway_local.simulators import SIMULATORS
    from gateway_local.simulators.rules import _sdk

    _sdk.warm()  # the SDK request types the text simulators check requests with
    mounts = []
    for protocol, target in SIMULATORS.items():
        module_name, attribute = target.split(":")
        mounts.append(Mount(f"/{protocol}", app=getattr(importlib.import_module(module_name), attribute)))
    return Starlette(routes=mounts)


class _ThreadedServer:
    """A uvicorn server on its own thread and event loop (the simulated upstreams)."""

    def __init__(self, app: Any, port: int):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan="off"))
        self.server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]  # the main server owns the signals
        self.thread = threading.Thread(target=self.server.run, name="simulators", daemon=True)

    def start(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


def _queue_arn(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


ENDPOINT_FILE = Path(".local") / "gateway.json"
DEFAULT_DEMO_QUOTA = 500_000_000  # 1000 USD


# The runner's own settings a function needs (simulators, task pacing, the link secret): what
# `make invoke` gives a function it runs beside this gateway.
_FUNCTION_SETTINGS = ("GATEWAY_SIMULATOR_URL", "GATEWAY_PUBLIC_URL", "GATEWAY_CHANNELS_FILE",
                      "GATEWAY_TASK_POLL_SECONDS", "GATEWAY_TASK_POLL_MAX_SECONDS", "GATEWAY_TASK_SWEEP_GRACE_SECONDS",
                      "GATEWAY_CALLBACK_ALLOW_PRIVATE", "GATEWAY_CALLBACK_RETRY_SECONDS", "GATEWAY_CALLBACK_SECRET",
                      "GATEWAY_RESULT_LINK_SECRET", "GATEWAY_STRIPE_API_KEY", "GATEWAY_STRIPE_WEBHOOK_SECRET",
                      "GATEWAY_STRIPE_API_BASE", "GATEWAY_MAIL_OUTBOX", "GATEWAY_DEMO_KEY_HINT")


def write_endpoint_file(root: Path, emulator: Emulator | EmulatorProcess, port: int, demo_key: str = "") -> Path:
    """Where the admin command line finds this running gateway's AWS emulator and tables
    (`.local/gateway.json`, git-ignored, only this user's), so it needs no AWS variables; and
    what `make invoke` needs to run a function beside it."""
    path = Path(os.environ.get("GATEWAY_LOCAL_ENDPOINT_FILE") or root / ENDPOINT_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    environment = {**emulator.environment(), **LOCAL_AWS_ENVIRONMENT, "AWS_ENDPOINT_URL": emulator.endpoint_url}
    settings = {name: os.environ[name] for name in _FUNCTION_SETTINGS if os.environ.get(name)}
    # The channels in force, for `make admin ARGS=channels`.
    if os.environ.get("GATEWAY_CHANNELS_FILE"):
        environment["GATEWAY_CHANNELS_FILE"] = str(Path(os.environ["GATEWAY_CHANNELS_FILE"]).resolve())
    elif os.environ.get("GATEWAY_SIMULATOR_URL"):
        environment["GATEWAY_SIMULATOR_URL"] = os.environ["GATEWAY_SIMULATOR_URL"]
    path.write_text(json.dumps({"pid": os.getpid(), "gateway_url": f"http://127.0.0.1:{port}",
                                "environment": environment, "function_environment": settings,
                                "demo_key": demo_key}, indent=2))
    path.chmod(0o600)
    return path


def remove_endpoint_file(path: Path) -> None:
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():  # another runner may have taken it over
            path.unlink()
    except (OSError, ValueError):
        pass


def first_call(port: int, demo_key: str) -> list[str]:
    """The banner's first call, for a second terminal: it sets KEY as the docs' examples use it
    and asks for a chat answer, which works on every start (it stores nothing)."""
    body = '{"model":"m-small","messages":[{"role":"user","content":"hello"}]}'
    return ["In another terminal:", f"  export KEY={demo_key} BASE=http://127.0.0.1:{port}",
            f"  curl $BASE/v1/chat/completions -H \"Authorization: Bearer $KEY\" -d '{body}'"]


def main(template_path: str = "template.yaml") -> int:
    # The user's AWS settings (region, profile, credentials, ~/.aws) never reach the runner.
    isolate_aws_environment()
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    # One EMF line per request would drown the console; POWERTOOLS_METRICS_DISABLED=false shows them.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    port = int(os.environ.get("PORT", "3000"))
    simulator_port = int(os.environ.get("GATEWAY_SIMULATOR_PORT", str(port + 1)))
    schedule_pause = float(os.environ.get("GATEWAY_LOCAL_SCHEDULE_SECONDS", "5"))

    template = read_template(template_path)
    directory = state_dir(template.root)
    try:
        listener = listening_socket(port)
    except OSError as exc:
        print(f"gateway not started: 127.0.0.1:{port}: {exc.strerror} (PORT sets another port)", file=sys.stderr,
              flush=True)
        return 2
    # First, before any thread starts or any other child's pipe is made: the emulator's process is
    # forked from this one. The other serving processes import the layer while it starts.
    template_file = template.root / Path(template_path).name
    starting = fork_emulator_process(template_file, directory,
                                     fresh=os.environ.get("GATEWAY_LOCAL_FRESH", "").strip() not in ("", "0"))
    helpers = start_helpers(process_count() - 1, str(template_file), listener)
    try:
        import_dependencies(template.functions.values())  # this one's imports too, meanwhile
        emulator = starting.wait()
    except BaseException:
        helpers.stop()
        listener.close()
        raise
    try:
        return _serve(template, emulator, directory, listener, helpers, simulator_port, schedule_pause)
    finally:
        helpers.stop()  # (already stopped when it served; never told to go when it did not)
        listener.close()
        emulator.stop()  # saves the state, with no function running any more (however the runner ends)


def announce(server: StoppableServer, helpers: Helpers, banner: list[str], not_started: list[str]) -> None:
    """Prints the banner ("gateway ready") once the first process serves and every other one
    reads the printed key as its requests will (the kernel may give the user's first request to
    any of them); else says why not in `not_started` and stops the runner."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.02)
    problems = helpers.wait_ready(KEY_READY_SECONDS + 120)
    if server.should_exit:  # stopped (Ctrl-C) while they started: nothing to announce
        return
    not_started.extend(problems)
    if not_started:
        print("gateway not started: " + "; ".join(not_started), file=sys.stderr, flush=True)
        server.should_exit = True
        return
    print("\n".join(banner), flush=True)


def _serve(template: Template, emulator: EmulatorProcess, directory: Path, listener: socket.socket,
           helpers: Helpers, simulator_port: int, schedule_pause: float) -> int:
    port = listener.getsockname()[1]
    loaded = emulator.loaded
    if loaded is None:
        print(f"state: starting empty (FRESH); data is kept in {directory}", flush=True)
    else:
        print(f"state: {loaded['items']} items and {loaded['messages']} messages loaded from {emulator.state_path}"
              if loaded["items"] or loaded["messages"] else f"state: none yet; data is kept in {directory}",
              flush=True)
    simulators = _ThreadedServer(simulators_app(), simulator_port)
    simulator_port = simulators.start()
    os.environ["GATEWAY_SIMULATOR_URL"] = f"http://127.0.0.1:{simulator_port}"
    os.environ["GATEWAY_PUBLIC_URL"] = f"http://127.0.0.1:{port}"
    # Tasks: polled every second or so, callbacks allowed to a receiver on this machine and
    # signed with a known local secret (deployed: from Secrets Manager, private addresses refused).
    for name, value in (("GATEWAY_TASK_POLL_SECONDS", "1"), ("GATEWAY_TASK_POLL_MAX_SECONDS", "5"),
                        ("GATEWAY_TASK_SWEEP_GRACE_SECONDS", "10"), ("GATEWAY_CALLBACK_ALLOW_PRIVATE", "1"),
                        ("GATEWAY_CALLBACK_RETRY_SECONDS", "1"), ("GATEWAY_CALLBACK_SECRET", "local-callback-secret"),
                        # Signs the links to results the gateway serves (beta samples): a new key per run.
                        ("GATEWAY_RESULT_LINK_SECRET", secrets.token_hex(24)),
                        # Online top-up against the Stripe simulator, whose webhooks come back here.
                        ("GATEWAY_STRIPE_API_KEY", "sk_test_local"),
                        ("GATEWAY_STRIPE_WEBHOOK_SECRET", "whsec_local_" + secrets.token_hex(16)),
                        ("GATEWAY_STRIPE_API_BASE", f"http://127.0.0.1:{simulator_port}/stripe"),
                        ("GATEWAY_STRIPE_WEBHOOK_URL", f"http://127.0.0.1:{port}/api/stripe/webhook"),
                        # Mail to people lands in a folder (`make admin ARGS="outbox"`), not SES.
                        ("GATEWAY_MAIL_OUTBOX", str(directory / "outbox"))):
        os.environ.setdefault(name, value)

    from gateway.admin import ensure_demo_account
    from gateway.settings import reload_settings

    reload_settings()
    from gateway.routing.channel import ChannelsConfigError
    from gateway.routing.channels import check_at_start

    try:
        check_at_start()
    except ChannelsConfigError as exc:  # docs/channels.md's promise: a bad document stops the start
        print(f"gateway not started: bad channels document: {exc}", file=sys.stderr, flush=True)
        simulators.stop()
        listener.close()
        return 2
    demo_key, access_token = demo_credentials(directory, os.environ.get("GATEWAY_DEMO_KEY"),
                                              os.environ.get("GATEWAY_DEMO_ACCESS_TOKEN"))
    # An unknown key's 401 names the printed key's last four characters (`auth.unknown_key_message`):
    # set before any function is loaded or serving process started, which read it.
    os.environ["GATEWAY_DEMO_KEY_HINT"] = demo_key[-4:]
    reload_settings()
    quota_text = os.environ.get("GATEWAY_DEMO_QUOTA", "").strip() or str(DEFAULT_DEMO_QUOTA)
    if not quota_text.isdigit():
        print(f"gateway not started: GATEWAY_DEMO_QUOTA: must be a whole number of units (500000 per USD), "
              f"not {quota_text[:100]!r}", file=sys.stderr, flush=True)
        simulators.stop()
        listener.close()
        return 2
    quota = int(quota_text)
    # A changed GATEWAY_DEMO_QUOTA is applied (the demo user's remaining quota set to it); an
    # unchanged one leaves what the kept data says, spending included.
    endpoint_file = write_endpoint_file(template.root, emulator, port, demo_key)
    changed = demo_quota_changed(directory, quota)
    left = ensure_demo_account(user_id=1, key=demo_key, quota=quota, access_token=access_token, set_quota=changed)
    print(f"demo quota: set to {left} units (GATEWAY_DEMO_QUOTA changed)" if changed else
          f"demo quota: {left} units left (GATEWAY_DEMO_QUOTA={quota} applies when it changes)", flush=True)
    if not wait_for_key(demo_key, KEY_READY_SECONDS):  # this process reads it as its requests will
        print("gateway not started: the demo key just stored is not readable", file=sys.stderr, flush=True)
        simulators.stop()
        listener.close()
        return 2

    handlers, streaming_apps = function_pools(template)

    from gateway.store.aws import client

    sqs = client("sqs")
    loops: list[_Loop] = []
    for function in template.functions.values():
        for queue_id, batch_size in function.queues:
            url = emulator.queues[queue_id]
            step = functools.partial(sqs_step, sqs, url, _queue_arn(sqs, url), batch_size,
                                     handlers[function.logical_id], function.logical_id, function.partial_batch,
                                     SQS_SENDS)
            loops.append(_Loop(f"sqs:{function.logical_id}", step, 0.0, print))
        for expression in function.schedules:
            pause = min(schedule_seconds(expression), schedule_pause)
            step = functools.partial(run_schedule, handlers[function.logical_id], function.logical_id)
            loops.append(_Loop(f"schedule:{function.logical_id}", step, pause, print))
    for loop in loops:
        loop.start()

    server = serving_server(template, handlers, streaming_apps)
    # The other serving processes take requests from the same socket (`processes.py`).
    helpers.go(emulator.calls_address, emulator.endpoint_url, demo_key)
    not_started: list[str] = []
    banner = [
        "", "Unified AI gateway, local", f"  URL:            http://127.0.0.1:{port}",
        f"  demo API key:   {demo_key}", f"  access token:   {access_token}   (X-Api-User: 1)",
        f"  simulators:     http://127.0.0.1:{simulator_port}",
        f"  API docs:       http://127.0.0.1:{port}/docs (Swagger UI of /openapi.json)",
        f"  Console:        http://127.0.0.1:{port}/console/ (sign in: make admin ARGS=\"set-password --user 1\")",
        f"  AWS emulator:   {emulator.endpoint_url}", "", *first_call(port, demo_key), "",
        f"gateway ready on http://127.0.0.1:{port}"]
    threading.Thread(target=announce, args=(server, helpers, banner, not_started), daemon=True).start()
    try:
        server.run(sockets=[listener])  # returns on Ctrl-C / SIGTERM
    finally:
        helpers.stop()  # their last settlements written, before the emulator stops
        listener.close()
        for loop in loops:
            loop.stopping.set()
        for loop in loops:
            loop.join(timeout=5)
        remove_endpoint_file(endpoint_file)
        simulators.stop()
        print("gateway stopped", flush=True)
    return 2 if not_started else 0
