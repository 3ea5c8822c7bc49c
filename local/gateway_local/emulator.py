"""The AWS emulator: moto's server, with the template's tables, queues and buckets.

Two ways to run it: in this process (`start_emulator`: the tests), or in a process of its own
(`start_emulator_process`: `make run`, so that moto's work runs on another core than the
gateway's, and the process also keeps the state directory, `state.py`). Either way the calls of
the process that started it skip HTTP (`_route_calls`), and anyone else reaches it over HTTP.

Requests are served one at a time. `moto_fixes` keeps its cost per request flat and its memory
bounded. DynamoDB applies each request (a transaction included) atomically; moto applies it in
Python, with no lock of its own, so letting two requests interleave inside moto would show races
that real DynamoDB does not have.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import marshal
import os
import shutil
import signal
import socket
import struct
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from werkzeug.serving import make_server

from gateway_local import moto_fixes
from gateway_local.dynamo_model import DynamoModel, ModelCounts
from gateway_local.faults import Faults, TransactionTokens
from gateway_local.template import load_template

# Calls that change nothing worth keeping (`state.py` saves only after some other call).
_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "DescribeTable", "ListTables",
                    "ReceiveMessage", "GetQueueAttributes", "GetQueueUrl", "ListQueues", "DescribeTimeToLive",
                    "GetSecretValue", "BatchGetSecretValue", "DescribeSecret", "ListSecrets"})


_Answered = tuple[int, Any, Any]  # what moto's handlers return: status, headers, body


class _Serialized:
    """moto's app, one request at a time; counts the requests that may have changed data."""

    def __init__(self, app: Any):
        self._app, self.lock = app, threading.Lock()
        self.changes = 0
        self.model: DynamoModel | None = DynamoModel.from_environment()  # DynamoDB's limits, when asked for
        self.faults: Faults | None = Faults.from_environment()  # GATEWAY_LOCAL_FAULTS, when asked for
        self.tokens = TransactionTokens()  # TransactWriteItems' ClientRequestToken (moto ignores it)

    def _count(self, target: str) -> None:
        """Called with the lock held: one more call that may have changed data (by its `X-Amz-Target`)."""
        if target.rpartition(".")[2] not in _READS:
            self.changes += 1

    def __call__(self, environ: Any, start_response: Any) -> Any:
        with self.lock:
            self._count(environ.get("HTTP_X_AMZ_TARGET", ""))
            return list(self._app(environ, start_response))

    def dispatch(self, target: str, call: Callable[[], _Answered], body: bytes = b"") -> _Answered:
        """One call handed straight to moto's handler of its service (see `answer`); with the
        DynamoDB model on, a DynamoDB call may be refused, and answers after its service time."""
        from moto.core.exceptions import HTTPException
        from werkzeug.exceptions import InternalServerError

        def apply() -> _Answered:
            try:
                return call()
            except HTTPException as error:
                return int(error.code or 500), error.get_headers(), error.get_body()
            except Exception:  # a fault of moto's own: answered as its web server answers it
                failure = InternalServerError()
                return 500, failure.get_headers(), failure.get_body()

        model, faults, wait = self.model, self.faults, 0.0
        with self.lock:
            self._count(target)
            service, _, operation = target.partition(".")

            def applied() -> _Answer:
                if operation != "TransactWriteItems":
                    return _as_bytes(apply())
                token = self.tokens.replay(body)
                if token is None:
                    return _as_bytes(apply())
                if token[2] is not None:  # a retry of a transaction done already: its answer again
                    if faults is not None:
                        faults.counts.token_replays += 1
                    return token[2]
                answered = _as_bytes(apply())
                self.tokens.remember(token[0], token[1], answered)
                return answered

            served = applied if faults is None else functools.partial(faults.call, service, operation, body, applied)
            if model is None or service != "DynamoDB_20120810":
                return served()
            answered, wait = model.call(operation, body, served)
        model.sleep(wait)  # outside the lock: concurrent callers wait side by side
        return answered


def _as_bytes(answered: _Answered) -> tuple[int, dict[str, str], bytes]:
    status, headers, data = answered
    return int(status), {str(k): str(v) for k, v in dict(headers).items()}, (
        data.encode() if isinstance(data, str) else data)


class _Body(io.BytesIO):
    """The raw body of an in-process answer, as botocore reads it: whole (`stream`, what it does
    for JSON answers) or bit by bit (`read`, what a streamed S3 object's body does)."""

    def stream(self, **_: Any) -> Any:
        yield self.getvalue()


@functools.cache
def _json_handlers() -> dict[str, Any]:
    """moto's handler of each JSON-protocol service the gateway calls, by `X-Amz-Target` prefix."""
    from moto.dynamodb.urls import url_paths as dynamodb_paths
    from moto.sqs.urls import url_paths as sqs_paths

    return {"DynamoDB_20120810": dynamodb_paths["{0}/"], "AmazonSQS": sqs_paths["{0}/$"]}


_Answer = tuple[int, dict[str, str], bytes]  # status, headers, body


def _target_of(headers: list[tuple[str, str]]) -> str:
    """The call's `X-Amz-Target` (`Service.Operation`), or "" for a call that names none (S3)."""
    return next((value for name, value in headers if name.lower() == "x-amz-target"), "")


def answer(app: _Serialized, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
    """One AWS call answered by the emulator's app, given as botocore sends it.

    A DynamoDB or SQS call (a JSON-protocol `X-Amz-Target` call) goes straight to moto's handler
    of that service, as moto's own in-process mode hands it a request; any other call to the WSGI
    app, as an HTTP request. Either way none of the web framework that only routes the call."""
    from moto.core.request import Request
    from werkzeug.test import EnvironBuilder

    operation = _target_of(headers)
    handler = _json_handlers().get(operation.partition(".")[0])
    if handler is not None:
        call = _dynamodb_call(url, headers, body) if operation.startswith(_DYNAMODB) else None
        if call is None:
            request = Request.from_primitives(method, url, dict(headers), body)
            call = functools.partial(handler, request, request.raw_url, request.headers)
        return _as_bytes(app.dispatch(operation, call, body))
    environ = EnvironBuilder(url, method=method, headers=headers, data=body).get_environ()
    started: list[Any] = []
    data = b"".join(app(environ, lambda status, found, exc_info=None: started.extend((status, found))))
    return int(started[0].split()[0]), dict(started[1]), data


_DYNAMODB = "DynamoDB_20120810."


def _dynamodb_call(url: str, headers: list[tuple[str, str]], body: bytes) -> Callable[[], _Answered] | None:
    """moto's DynamoDB handler made ready for one call as its `setup_class` makes it, without the
    web request it builds first (a werkzeug environ, form and query string parsing, botocore's
    request parser over the JSON body): about a third of a small call's cost. The body is the
    parameters as JSON, as that parser reads them, unless it holds a binary value (`B`, `BS`),
    which the parser decodes from base64: those, and a body that is not a JSON object, take
    moto's whole way (None)."""
    if b'"B"' in body or b'"BS"' in body:
        return None
    try:
        params = json.loads(body) if body else {}
    except ValueError:
        return None
    if not isinstance(params, dict):
        return None
    from moto.dynamodb.responses import DynamoHandler
    from moto.utilities.utils import get_partition
    from werkzeug.datastructures import Headers
    from werkzeug.http import http_date

    handler = DynamoHandler()
    parsed = urlparse(url)
    handler.headers = Headers(headers)
    handler.is_werkzeug_request = False
    handler.parsed_url, handler.uri, handler.path, handler.raw_path = parsed, url, parsed.path, parsed.path
    handler.method, handler.uri_match = "POST", {}
    handler.body, handler.raw_body = body.decode("utf-8"), body
    handler.querystring = handler.data = {}
    handler.params = params
    handler.response_headers = {"server": "amazon.com", "date": http_date(datetime.now(UTC))}
    authorization = handler.headers.get("Authorization", "")
    handler.region = authorization.split(",")[0].split("/")[2] if "AWS4" in authorization else handler.default_region
    handler.partition = get_partition(handler.region)
    handler.access_key = handler.get_access_key()
    handler.current_account = handler.get_current_account()
    return handler.call_action


class SqsSends:
    """How many SQS calls this process made that may have put a message within reach of a
    receive; the runner's queue loops wait on it instead of asking an empty queue again and again."""

    MAKE_RECEIVABLE = frozenset({"SendMessage", "SendMessageBatch", "ChangeMessageVisibility",
                                 "ChangeMessageVisibilityBatch"})

    def __init__(self) -> None:
        self.count, self._changed = 0, threading.Condition()

    def note(self, operation: str) -> None:
        service, _, action = operation.rpartition(".")
        if service == "AmazonSQS" and action in self.MAKE_RECEIVABLE:
            with self._changed:
                self.count += 1
                self._changed.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        """Returns once a send after the `seen`-th one happened, or after `timeout` seconds (a
        delay or a visibility timeout running out sends nothing)."""
        with self._changed:
            self._changed.wait_for(lambda: self.count != seen, timeout)


SQS_SENDS = SqsSends()
_routes: dict[str, Callable[[str, str, list[tuple[str, str]], bytes], _Answer]] = {}  # endpoint -> answerer
_routes_lock = threading.Lock()


def _endpoint_of(url: str) -> str:
    """scheme://host:port of a request's URL (what `_routes` is keyed by)."""
    return "/".join(url.split("/", 3)[:3])


def _route_calls(endpoint: str, answerer: Callable[[str, str, list[tuple[str, str]], bytes], _Answer]) -> None:
    """botocore calls from this process to `endpoint` are answered by `answerer` instead of a
    TCP connection to the emulator's web server (which closes every connection after one answer,
    costing more than most calls). botocore serialises and parses them as ever, but does not sign
    the DynamoDB ones (every billed request's): they never leave the machine, moto's DynamoDB
    handler checks no signature, and SigV4 costs a SHA-256 of the body and a chain of HMACs per
    call (about 0.2 ms of a billed chat's latency). Other services' calls are signed (moto's web
    app finds their service by the signature's scope), and other processes (the admin command
    line, tests) reach the emulator over HTTP, signed."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSResponse
    from botocore.httpsession import URLLib3Session

    with _routes_lock:
        first = not _routes
        _routes[endpoint] = answerer
    if not first:
        return
    over_http = URLLib3Session.send

    def send(self: Any, request: Any) -> Any:
        routed = _routes.get(_endpoint_of(request.url))
        if routed is None:
            return over_http(self, request)
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode()
        headers = [(k, v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in request.headers.items()]
        operation = _target_of(headers)
        status, found, data = routed(request.method, request.url, headers, body or b"")
        SQS_SENDS.note(operation)
        return AWSResponse(request.url, status, found, _Body(data))

    URLLib3Session.send = send
    signs = SigV4Auth.add_auth

    def add_auth(self: Any, request: Any) -> None:
        if self._service_name != "dynamodb" or _endpoint_of(request.url) not in _routes:
            signs(self, request)

    SigV4Auth.add_auth = add_auth


def _environment_of(template: dict[str, Any], resources: dict[str, str]) -> dict[str, str]:
    """The template's global function environment, with !Ref of tables, queues and buckets resolved."""
    variables = (template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
    resolved: dict[str, str] = {}
    for name, value in variables.items():
        if isinstance(value, dict) and "Ref" in value:
            if value["Ref"] in resources:
                resolved[name] = resources[value["Ref"]]
        elif isinstance(value, str):
            resolved[name] = value
    return resolved


@dataclass
class Emulator:
    template: dict[str, Any]
    endpoint_url: str
    _server: Any
    _thread: threading.Thread
    _app: _Serialized
    tables: dict[str, str] = field(default_factory=dict)  # logical id -> table name
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    buckets: dict[str, str] = field(default_factory=dict)  # logical id -> bucket name

    def create_resources(self) -> None:
        import boto3

        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint_url)
        sqs = boto3.client("sqs", endpoint_url=self.endpoint_url)
        s3 = boto3.client("s3", endpoint_url=self.endpoint_url)
        resources = self.template.get("Resources", {})
        for logical_id, resource in resources.items():
            if resource.get("Type") == "AWS::S3::Bucket":
                name = logical_id.lower()  # bucket names are lower case
                s3.create_bucket(Bucket=name)
                self.buckets[logical_id] = name
        for logical_id, resource in resources.items():
            if resource.get("Type") != "AWS::DynamoDB::Table":
                continue
            props = resource["Properties"]
            params: dict[str, Any] = {
                "TableName": logical_id, "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": props["AttributeDefinitions"], "KeySchema": props["KeySchema"],
            }
            if props.get("GlobalSecondaryIndexes"):
                params["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
            dynamodb.create_table(**params)
            self.tables[logical_id] = logical_id
        queues = {k: r.get("Properties", {}) for k, r in resources.items() if r.get("Type") == "AWS::SQS::Queue"}
        # Dead-letter queues first, so the queues that redrive to them can name their ARN.
        for logical_id, props in sorted(queues.items(), key=lambda q: "RedrivePolicy" in q[1]):
            attributes = {name: str(props[name]) for name in ("VisibilityTimeout", "MessageRetentionPeriod",
                                                               "DelaySeconds") if name in props}
            redrive = props.get("RedrivePolicy")
            if redrive:
                target = redrive["deadLetterTargetArn"]["Fn::GetAtt"]
                dlq = (target if isinstance(target, list) else target.split("."))[0]
                dlq_arn = sqs.get_queue_attributes(QueueUrl=self.queues[dlq],
                                                   AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": dlq_arn,
                                                          "maxReceiveCount": int(redrive["maxReceiveCount"])})
            self.queues[logical_id] = sqs.create_queue(QueueName=logical_id, Attributes=attributes)["QueueUrl"]

    def environment(self) -> dict[str, str]:
        """The template's global function environment, with !Ref of tables and queues resolved."""
        return _environment_of(self.template, {**self.buckets, **self.queues, **self.tables})

    def reset(self) -> None:
        """Wipes every table and queue and makes them again, empty."""
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")).read()
        self.tables.clear()
        self.queues.clear()
        self.buckets.clear()
        self.create_resources()

    @property
    def lock(self) -> threading.Lock:
        """Held, no AWS call is served: the emulator's data stands still."""
        return self._app.lock

    def use_model(self, model: DynamoModel | None) -> None:
        """DynamoDB's limits on (a `DynamoModel`) or off (None) from the next call on."""
        with self._app.lock:
            self._app.model = model

    def use_faults(self, faults: Faults | None) -> None:
        """Faults below the gateway (`gateway_local.faults`) on or off (None) from the next call on."""
        with self._app.lock:
            self._app.faults = faults

    @property
    def changes(self) -> int:
        """How many calls so far may have changed a table or a queue."""
        return self._app.changes

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)


def start_emulator(template_path: Path | str, port: int = 0) -> Emulator:
    """Starts moto on 127.0.0.1, points boto3 at it, and makes the template's resources."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    from gateway.settings import reload_settings
    from gateway.store.aws import reset_clients

    moto_fixes.apply()  # flat cost per request, bounded memory; fails here if moto changed

    class QuietHandler(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per AWS call is noise
            pass

    app = _Serialized(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="aws-emulator", daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    _route_calls(endpoint, functools.partial(answer, app))
    _point_boto3_at(endpoint)
    emulator = Emulator(template=load_template(template_path), endpoint_url=endpoint, _server=server,
                        _thread=thread, _app=app)
    emulator.create_resources()
    os.environ.update(emulator.environment())
    reset_clients()
    reload_settings()
    return emulator


# What every AWS client of the local runner (the functions, the emulator, the admin command line)
# sees, whatever the user's shell and ~/.aws say: the emulator's region and fake credentials, no
# profile, no config or credentials file (they can name a region, a profile, an endpoint).
LOCAL_AWS_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def isolate_aws_environment() -> None:
    """Drops every AWS_* setting of the user's environment (a region, a profile that does not
    exist here, a session token, another endpoint) and sets LOCAL_AWS_ENVIRONMENT."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        del os.environ[name]
    os.environ.update(LOCAL_AWS_ENVIRONMENT)


def _point_boto3_at(endpoint: str) -> None:
    for name, value in LOCAL_AWS_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_PROFILE", None)
    os.environ["AWS_ENDPOINT_URL"] = endpoint


# ---------------------------------------------------------------------------------------------
# The emulator in a process of its own, as `make run` starts it: moto's work (every billed
# request's transactions) runs on another core than the gateway's, with no lock shared between
# them. The runner's calls reach it over a Unix socket (`_CallServer`, `_Calls`: one connection
# per calling thread, length-prefixed marshal frames of what botocore would send over HTTP);
# other processes over HTTP, as before. It also keeps the state directory (`state.py`).

_FRAME = struct.Struct(">I")


def _send_frame(connection: socket.socket, value: Any) -> None:
    data = marshal.dumps(value)
    connection.sendall(_FRAME.pack(len(data)) + data)


def _receive_frame(connection: socket.socket) -> Any:
    """The next frame's value; None when the other side closed the connection."""
    head = _receive_exactly(connection, _FRAME.size)
    if head is None:
        return None
    data = _receive_exactly(connection, _FRAME.unpack(head)[0])
    return None if data is None else marshal.loads(data)


def _receive_exactly(connection: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _CallServer:
    """In the emulator's process: answers the runner's calls, each connection on its own thread."""

    def __init__(self, address: str, app: _Serialized):
        self.app, self._listener = app, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(address)
        self._listener.listen(128)
        threading.Thread(target=self._accept, name="emulator-calls", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            while (call := _receive_frame(connection)) is not None:
                method, url, headers, body = call
                status, found, data = answer(self.app, method, url, [tuple(h) for h in headers], body)
                _send_frame(connection, (status, list(found.items()), data))

    def close(self) -> None:
        self._listener.close()


class _Calls:
    """In the runner's process: sends each call to the emulator's process on this thread's connection."""

    def __init__(self, address: str):
        self.address, self._local = address, threading.local()

    def __call__(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(self.address)
        try:
            _send_frame(connection, (method, url, headers, body))
            answered = _receive_frame(connection)
        except OSError:
            answered = None
        if answered is None:
            self._local.connection = None
            connection.close()
            raise ConnectionError("the AWS emulator's process closed its connection")
        status, found, data = answered
        return status, dict(found), data


_CALLS_SOCKET = "calls.sock"


def route_calls_to_emulator(endpoint_url: str, address: str) -> None:
    """This process's boto3 calls to `endpoint_url` go to the emulator's process over its Unix
    socket at `address` (any process of the runner: the first, and the serving ones after it)."""
    _route_calls(endpoint_url, _Calls(address))


@dataclass
class EmulatorProcess:
    """The emulator's process, seen from the runner: its addresses, resources and stop."""

    template: dict[str, Any]
    endpoint_url: str
    tables: dict[str, str]
    queues: dict[str, str]
    buckets: dict[str, str]
    loaded: dict[str, int] | None  # what the state directory gave back; None: started empty (FRESH)
    state_path: str
    _process: Any
    _control: Any
    _socket_dir: str

    def environment(self) -> dict[str, str]:
        return _environment_of(self.template, {**self.buckets, **self.queues, **self.tables})

    @property
    def calls_address(self) -> str:
        """The Unix socket that answers the runner's processes' calls (`route_calls_to_emulator`)."""
        return os.path.join(self._socket_dir, _CALLS_SOCKET)

    def model_counts(self) -> ModelCounts | None:
        """What the emulator's DynamoDB model has counted so far (None when it is off)."""
        self._control.send("model-counts")
        counted = self._control.recv()
        return ModelCounts(**counted) if counted is not None else None

    def fault_counts(self) -> dict[str, int] | None:
        """The faults the emulator injected so far (`gateway_local.faults.FaultCounts`; None: off)."""
        self._control.send("fault-counts")
        counted: dict[str, int] | None = self._control.recv()
        return counted

    def stop(self) -> None:
        """Saves the state and ends the process (waiting for its last save). Once is enough."""
        if not self._process.is_alive() and not os.path.exists(self._socket_dir):
            return
        try:
            self._control.send("stop")
            self._control.poll(60)
        except (OSError, EOFError):
            pass
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        shutil.rmtree(self._socket_dir, ignore_errors=True)


def start_emulator_process(template_path: Path | str, state_directory: Path, *, fresh: bool) -> EmulatorProcess:
    """Starts the emulator in a child process, with the state directory's data (none if `fresh`),
    and points this process's boto3 at it. Call it before any thread starts (the child is forked)."""
    return fork_emulator_process(template_path, state_directory, fresh=fresh).wait()


@dataclass
class StartingEmulator:
    """The emulator's process, forked and loading (moto, the tables, the kept state): what the
    runner does meanwhile (its other serving processes' imports) overlaps that start."""

    template_path: str
    process: Any
    control: Any
    socket_dir: str

    def wait(self) -> EmulatorProcess:
        """Once it serves: the emulator, with this process's boto3 pointed at it."""
        from gateway.settings import reload_settings
        from gateway.store.aws import reset_clients

        mine = self.control
        ready: dict[str, Any] = mine.recv() if mine.poll(180) else {
            "error": "the AWS emulator did not start within 180 s"}
        if "error" in ready:
            self.process.join(timeout=10)
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            raise RuntimeError(ready["error"])
        address = os.path.join(self.socket_dir, _CALLS_SOCKET)
        route_calls_to_emulator(ready["endpoint_url"], address)
        _point_boto3_at(ready["endpoint_url"])
        emulator = EmulatorProcess(template=load_template(self.template_path), endpoint_url=ready["endpoint_url"],
                                   tables=ready["tables"], queues=ready["queues"], buckets=ready["buckets"],
                                   loaded=ready["loaded"], state_path=ready["state_path"], _process=self.process,
                                   _control=mine, _socket_dir=self.socket_dir)
        os.environ.update(emulator.environment())
        reset_clients()
        reload_settings()
        return emulator


def fork_emulator_process(template_path: Path | str, state_directory: Path, *, fresh: bool) -> StartingEmulator:
    """Forks the emulator's process and returns while it starts (`StartingEmulator.wait`). Call it
    before any thread starts, and before any other child's pipe is made: the fork copies both."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    mine, theirs = context.Pipe()
    socket_dir = tempfile.mkdtemp(prefix="gateway-emulator-")
    address = os.path.join(socket_dir, _CALLS_SOCKET)
    process = context.Process(target=_emulator_main, name="aws-emulator",
                              args=(theirs, mine, str(template_path), str(state_directory), fresh, address))
    process.start()
    theirs.close()
    return StartingEmulator(template_path=str(template_path), process=process, control=mine, socket_dir=socket_dir)


def _emulator_main(control: Any, runners_end: Any, template_path: str, state_directory: str, fresh: bool,
                   address: str) -> None:
    """The emulator's process: serves until the runner says stop or goes away, then saves."""
    from gateway_local.state import State

    runners_end.close()  # forked with it open: the runner's death must close the pipe's last copy

    # Ctrl-C and SIGTERM reach the whole process group: the runner stops first (its last
    # settlements still need the emulator), then tells this process to save and stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        emulator = start_emulator(template_path)
        state = State(emulator, Path(state_directory))
        if fresh:
            state.wipe()
            loaded = None
        else:
            loaded = state.load()
        calls = _CallServer(address, emulator._app)
        state.autosave(float(os.environ.get("GATEWAY_LOCAL_SAVE_SECONDS", "30")))
    except Exception as exc:  # told to the runner, which stops with it
        control.send({"error": f"the AWS emulator did not start: {exc!r}"})
        return
    control.send({"endpoint_url": emulator.endpoint_url, "tables": emulator.tables, "queues": emulator.queues,
                  "buckets": emulator.buckets, "loaded": loaded, "state_path": str(state.path)})
    try:
        while (said := control.recv()) != "stop":
            if said == "model-counts":  # what the DynamoDB model counted (None: the model is off)
                model = emulator._app.model
                control.send(dataclasses.asdict(model.counts) if model else None)
            elif said == "fault-counts":  # the faults met so far (None: faults are off)
                faults = emulator._app.faults
                control.send(dataclasses.asdict(faults.counts) if faults else None)
    except EOFError:
        pass  # the runner is gone without a word: save all the same
    finally:
        calls.close()
        if emulator._app.faults is not None:  # what GATEWAY_LOCAL_FAULTS made happen, for the record
            print(f"AWS emulator faults: {dataclasses.asdict(emulator._app.faults.counts)}", flush=True)
        state.stop()
        emulator.stop()
        try:
            control.send("stopped")
        except OSError:
            pass
