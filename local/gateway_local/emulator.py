"""The in-process AWS emulator: moto's server, with the template's tables, queues and buckets.

Requests are served one at a time. `moto_fixes` keeps its cost per request flat and its memory
bounded; `state.py` keeps its data across restarts of the runner. DynamoDB applies each request (a transaction included)
atomically; moto applies it in Python, with no lock of its own, so letting two requests
interleave inside moto would show races that real DynamoDB does not have.
"""

from __future__ import annotations

import io
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from werkzeug.serving import make_server

from gateway_local import moto_fixes


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader: yaml.Loader, suffix: str, node: yaml.Node) -> Any:
    """A short-form intrinsic (`!GetAtt A.Arn`) as its long form (`{"Fn::GetAtt": "A.Arn"}`)."""
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path | str) -> dict[str, Any]:
    return yaml.load(Path(path).read_text(), Loader=_CfnLoader)


# Calls that change nothing worth keeping (`state.py` saves only after some other call).
_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "DescribeTable", "ListTables",
                    "ReceiveMessage", "GetQueueAttributes", "GetQueueUrl", "ListQueues", "DescribeTimeToLive"})


# SQS calls after which a queue may have a message to receive at once.
_MAKE_RECEIVABLE = frozenset({"SendMessage", "SendMessageBatch", "ChangeMessageVisibility",
                              "ChangeMessageVisibilityBatch"})


class _Serialized:
    """moto's app, one request at a time; counts the requests that may have changed data, and
    the SQS calls that may have made a message receivable."""

    def __init__(self, app: Any):
        self._app, self.lock = app, threading.Lock()
        self.changes = 0
        self.sends, self._sent = 0, threading.Condition()

    def _count(self, target: str) -> None:
        service, _, action = target.rpartition(".")
        if action not in _READS:
            self.changes += 1
        if service == "AmazonSQS" and action in _MAKE_RECEIVABLE:
            with self._sent:
                self.sends += 1
                self._sent.notify_all()

    def wait_for_send(self, seen: int, timeout: float) -> None:
        """Returns once an SQS call after the `seen`-th may have made a message receivable, or
        after `timeout` seconds (a delay or a visibility timeout running out sends nothing)."""
        with self._sent:
            self._sent.wait_for(lambda: self.sends != seen, timeout)

    def __call__(self, environ: Any, start_response: Any) -> Any:
        with self.lock:
            self._count(environ.get("HTTP_X_AMZ_TARGET", ""))
            return list(self._app(environ, start_response))

    def dispatch(self, target: str, handler: Any, request: Any) -> tuple[int, Any, Any]:
        """One call handed straight to moto's handler of its service (see `_answer_in_process`)."""
        from moto.core.exceptions import HTTPException
        from werkzeug.exceptions import InternalServerError

        with self.lock:
            self._count(target)
            try:
                return handler(request, request.raw_url, request.headers)
            except HTTPException as error:
                return int(error.code or 500), error.get_headers(), error.get_body()
            except Exception:  # a fault of moto's own: answered as its web server answers it
                failure = InternalServerError()
                return 500, failure.get_headers(), failure.get_body()


class _Body(io.BytesIO):
    """The raw body of an in-process answer, as botocore reads it: whole (`stream`, what it does
    for JSON answers) or bit by bit (`read`, what a streamed S3 object's body does)."""

    def stream(self, **_: Any) -> Any:
        yield self.getvalue()


_in_process: dict[str, Any] = {}  # endpoint URL -> the emulator's WSGI app
_in_process_lock = threading.Lock()


def _json_handlers() -> dict[str, Any]:
    """moto's handler of each JSON-protocol service the gateway calls, by `X-Amz-Target` prefix."""
    from moto.dynamodb.urls import url_paths as dynamodb_paths
    from moto.sqs.urls import url_paths as sqs_paths

    return {"DynamoDB_20120810": dynamodb_paths["{0}/"], "AmazonSQS": sqs_paths["{0}/$"]}


def _answer_in_process(endpoint: str, app: Any) -> None:
    """botocore calls from this process to the emulator are answered without a socket.

    botocore serialises, signs and parses them as ever. A DynamoDB or SQS call (a JSON-protocol
    `X-Amz-Target` call) goes straight to moto's handler of that service, as moto's own
    in-process mode hands it a botocore request; any other call to the WSGI app, as an HTTP
    request. Either way no TCP connection and no server thread per call (the server closes
    every connection after one answer, which would cost more than most calls), and none of the
    web framework that only routes the call to that handler. Other processes (the admin command
    line, tests) still reach the emulator over HTTP.
    """
    from botocore.awsrequest import AWSResponse
    from botocore.httpsession import URLLib3Session
    from moto.core.request import normalize_request
    from werkzeug.test import EnvironBuilder

    with _in_process_lock:
        first = not _in_process
        _in_process[endpoint] = app
    if not first:
        return
    over_http = URLLib3Session.send
    handlers = _json_handlers()

    def send(self: Any, request: Any) -> Any:
        target = _in_process.get("/".join(request.url.split("/", 3)[:3]))  # scheme://host:port
        if target is None:
            return over_http(self, request)
        operation = request.headers.get("X-Amz-Target") or b""
        operation = operation.decode("latin-1") if isinstance(operation, bytes) else operation
        handler = handlers.get(operation.partition(".")[0])
        if handler is not None and isinstance(target, _Serialized):
            status, headers, data = target.dispatch(operation, handler, normalize_request(request))
            data = data.encode() if isinstance(data, str) else data
            return AWSResponse(request.url, int(status), {k: str(v) for k, v in dict(headers).items()},
                               _Body(data))
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        headers = [(k, v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in request.headers.items()]
        environ = EnvironBuilder(request.url, method=request.method, headers=headers, data=body or b"").get_environ()
        answer: list[Any] = []
        data = b"".join(target(environ, lambda status, headers, exc_info=None: answer.extend((status, headers))))
        return AWSResponse(request.url, int(answer[0].split()[0]), dict(answer[1]), _Body(data))

    URLLib3Session.send = send


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
        variables = (self.template.get("Globals", {}).get("Function", {})
                     .get("Environment", {}).get("Variables", {}))
        resolved: dict[str, str] = {}
        for name, value in variables.items():
            if isinstance(value, dict) and "Ref" in value:
                ref = value["Ref"]
                if ref in self.tables:
                    resolved[name] = self.tables[ref]
                elif ref in self.queues:
                    resolved[name] = self.queues[ref]
                elif ref in self.buckets:
                    resolved[name] = self.buckets[ref]
            elif isinstance(value, str):
                resolved[name] = value
        return resolved

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

    @property
    def changes(self) -> int:
        """How many calls so far may have changed a table or a queue."""
        return self._app.changes

    @property
    def sqs_sends(self) -> int:
        """How many SQS calls so far may have made a message receivable."""
        return self._app.sends

    def wait_for_sqs_send(self, seen: int, timeout: float) -> None:
        self._app.wait_for_send(seen, timeout)

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
    _answer_in_process(endpoint, app)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    emulator = Emulator(template=load_template(template_path), endpoint_url=endpoint, _server=server,
                        _thread=thread, _app=app)
    emulator.create_resources()
    os.environ.update(emulator.environment())
    reset_clients()
    reload_settings()
    return emulator
