"""What one serving process of the local gateway serves: API Gateway (REST) in front of the
template's functions (`GatewayApp`), over this process's instances of them (`function_pools`),
behind one HTTP server (`serving_server`: uvicorn with `front_door`'s connection rules). The
runner (`server`) serves it in the first process, `processes` in each other one.

- every `Api` event of the template is served: a buffered function gets a REST proxy event in a
  worker thread; the streaming function's ASGI app gets the request itself, so streaming is real,
  its key checked before its body is read, its body read whole (its Lambda event at most 6 MB)
  before an instance is lent. A client's own `x-amzn-*` headers are dropped first: they are the
  platform's to set, never a client's.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import anyio
import uvicorn

from gateway_local import apigw, front_door
from gateway_local.instances import AsgiPool, FunctionPool, instance_limit, isolate_router_state
from gateway_local.template import Template

_FORBIDDEN = json.dumps({"message": "Missing Authentication Token"}).encode()
_TOO_LONG = json.dumps({"message": "Request Too Long"}).encode()
SHUTDOWN_SETTLE_SECONDS = 10


_TIMEOUT = json.dumps({"message": "Request Timeout"}).encode()
# What API Gateway takes of a request's headers (REST: 10240 bytes for the request line and the
# header values); the count bounds a flood of tiny headers (refused while parsing: `front_door`).
MAX_HEADER_BYTES = 10_240
MAX_HEADERS = front_door.MAX_HEADERS
BODY_TIMEOUT_SECONDS = 10.0
# The streaming function's routes that need no key.
KEYLESS_STREAMING_PATHS = ("/health", "/healthz")


def body_timeout() -> float:
    """Seconds a request's body may take to arrive: `GATEWAY_LOCAL_BODY_TIMEOUT_SECONDS` (10)."""
    return float(os.environ.get("GATEWAY_LOCAL_BODY_TIMEOUT_SECONDS") or BODY_TIMEOUT_SECONDS)


def front_door_refusal(scope: dict) -> Any:
    """The error (431) for headers API Gateway would not take, else None: counted in one pass."""
    from gateway.errors import PayloadTooLarge

    headers = scope["headers"]
    if len(headers) > MAX_HEADERS:
        return PayloadTooLarge(f"more than {MAX_HEADERS} request headers", status=431,
                               code="request_header_fields_too_large")
    if sum(len(k) + len(v) for k, v in headers) > MAX_HEADER_BYTES:
        return PayloadTooLarge(f"the request headers are larger than {MAX_HEADER_BYTES} bytes", status=431,
                               code="request_header_fields_too_large")
    return None


def _check_key(pairs: list[tuple[str, str]], query_string: bytes) -> None:
    """What the function will check first: one credential, and a valid key."""
    from gateway import auth

    raw_query = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    auth.single_credential(pairs, [v for k, v in raw_query if k == "key"])
    auth.authenticate(auth.first_values(pairs), dict(raw_query))


class GatewayApp:
    """The ASGI application that plays API Gateway in front of the template's functions."""

    def __init__(self, template: Template, handlers: dict[str, Callable], streaming_apps: dict[str, Any],
                 log: Callable[[str], None] = print):
        self.template, self.handlers, self.streaming_apps, self.log = template, handlers, streaming_apps, log

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            # As the text function's own shutdown does: the streams a stop cancelled are billed
            # before the emulator they are billed in goes away.
            from gateway.api.text import settle_pending

            await settle_pending(SHUTDOWN_SETTLE_SECONDS)
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        started, method, path = time.perf_counter(), scope["method"], scope["path"]
        status_seen: list[int] = []
        scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if not k.lower().startswith(b"x-amzn-")]}
        request_id = str(uuid.uuid4())  # API Gateway's, for the runner's own answers and the event

        async def logged_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(message["status"])
            await send(message)

        refused = front_door_refusal(scope)
        found = self.template.route_for(method, path)
        if refused is not None:
            await self._refuse(logged_send, path, refused, request_id)
        elif found is None:  # only without the template's catch-all route
            await self._answer(logged_send, 403, [("content-type", "application/json")], _FORBIDDEN, request_id)
        else:
            route, params = found
            if route.function in self.streaming_apps:
                await self._stream(scope, receive, logged_send, route.function, request_id)
            else:
                await self._invoke(scope, receive, logged_send, route.function, route.path, params, request_id)
        self.log(f"{method} {path} {status_seen[0] if status_seen else '-'} "
                 f"{(time.perf_counter() - started) * 1000:.1f}ms")

    async def _stream(self, scope: dict, receive: Callable, send: Callable, function_id: str,
                      request_id: str) -> None:
        """The streaming function, as API Gateway and the Lambda Web Adapter hand it a request: the
        key checked before the body is read, the whole body (its event at most 6 MB, within the body
        timeout) before an instance is lent, instances lent fairly across principals."""
        from gateway import auth, keys
        from gateway.errors import GatewayError
        from gateway.observability import unexpected
        from gateway.store.aws import here_unless_it_waits

        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        if scope["path"] not in KEYLESS_STREAMING_PATHS:
            try:  # a cached key is checked on the loop; one to read, on a worker thread
                await here_unless_it_waits(_check_key, pairs, scope.get("query_string", b""))
            except GatewayError as error:
                await self._refuse(send, scope["path"], error, request_id)
                return
            except Exception as exc:  # as the function's own error mapping answers it (gateway.asgi)
                self.log(f"key check failed: {exc!r}")
                await self._refuse(send, scope["path"], unexpected(exc), request_id)
                return
        body = await self._read_body(scope, receive, send, request_id)
        if body is None:
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # then the client's disconnect, as the app watches for it

        credential = auth.extract_key(auth.first_values(pairs), query)
        principal = ("key:" + keys.hash_secret(credential)) if credential else \
            "ip:" + (scope.get("client") or ("", 0))[0]
        await self.streaming_apps[function_id](scope, replay, send, principal)

    async def _read_body(self, scope: dict, receive: Callable, send: Callable, request_id: str) -> bytearray | None:
        """The request's whole body, or None once it has answered 413 or 408 (not all there within
        the body timeout). The streaming function is invoked like any other (InvokeWithResponseStream
        takes the same 6 MB request payload as Invoke: only the response streams), so a body whose
        Lambda event would pass 6 MB is refused, as deployed; one past 6 MB as soon as it is seen."""
        from gateway.errors import InvalidRequest, PayloadTooLarge

        too_large = PayloadTooLarge(f"the request is larger than the {apigw.LAMBDA_EVENT_LIMIT} bytes (6 MB) "
                                    "Lambda accepts for an invocation, its body included")
        body = bytearray()
        try:
            with anyio.fail_after(body_timeout()):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    body += message.get("body", b"")
                    if len(body) > apigw.LAMBDA_EVENT_LIMIT:
                        await self._refuse(send, scope["path"], too_large, request_id)
                        return None
                    if not message.get("more_body"):
                        if self._event_size(scope, bytes(body), request_id) > apigw.LAMBDA_EVENT_LIMIT:
                            await self._refuse(send, scope["path"], too_large, request_id)
                            return None
                        return body
        except TimeoutError:
            await self._refuse(send, scope["path"], InvalidRequest(
                f"the request body did not arrive within {body_timeout():g} s", status=408, code="request_timeout"),
                request_id)
            return None

    def _event_size(self, scope: dict, body: bytes, request_id: str) -> int:
        """The size of the Lambda event API Gateway would build for this request (the body
        base64-encoded when its type is binary)."""
        event = apigw.build_event(
            method=scope["method"], path=scope["path"], resource=scope["path"], path_parameters={},
            raw_headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
            raw_query=parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True),
            body=body, binary_media_types=self.template.binary_media_types,
            source_ip=(scope.get("client") or ("127.0.0.1", 0))[0], request_id=request_id)
        return len(json.dumps(event))

    async def _refuse(self, send: Callable, path: str, error: Any, request_id: str) -> None:
        from gateway.errors import dialect_for_path, render

        rendered = render(error, dialect_for_path(path), request_id)
        headers = [("content-type", "application/json"), *rendered.headers.items()]
        if rendered.status == 408:
            headers.append(("connection", "close"))
        await self._answer(send, rendered.status, headers, json.dumps(rendered.body).encode(), request_id)

    async def _invoke(self, scope: dict, receive: Callable, send: Callable, function_id: str, resource: str,
                      params: dict[str, str], request_id: str) -> None:
        try:
            with anyio.fail_after(body_timeout()):
                body = bytearray()
                while True:
                    message = await receive()
                    body += message.get("body", b"")
                    if len(body) > apigw.API_PAYLOAD_LIMIT:
                        await self._answer(send, 413, [("content-type", "application/json")], _TOO_LONG, request_id)
                        return
                    if not message.get("more_body"):
                        break
        except TimeoutError:
            await self._answer(send, 408, [("content-type", "application/json"), ("connection", "close")],
                               _TIMEOUT, request_id)
            return
        raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        raw_query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        event = apigw.build_event(
            method=scope["method"], path=scope["path"], resource=resource, path_parameters=params,
            raw_headers=raw_headers, raw_query=raw_query, body=bytes(body),
            binary_media_types=self.template.binary_media_types,
            source_ip=(scope.get("client") or ("127.0.0.1", 0))[0], request_id=request_id)
        if len(json.dumps(event)) > apigw.LAMBDA_EVENT_LIMIT:
            await self._answer(send, 413, [("content-type", "application/json")], _TOO_LONG, request_id)
            return
        context = apigw.LambdaContext(function_id)
        try:
            answer = await anyio.to_thread.run_sync(self.handlers[function_id], event, context)
            status, headers, data = apigw.response_parts(answer)
        except Exception as exc:  # what API Gateway answers when the function itself fails
            self.log(f"function {function_id} failed: {exc!r}")
            status, headers = 502, [("content-type", "application/json")]
            data = json.dumps({"message": f"Internal server error (request id: {request_id})"}).encode()
        await self._answer(send, status, headers, data, request_id)

    @staticmethod
    async def _answer(send: Callable, status: int, headers: list[tuple[str, str]], data: bytes,
                      request_id: str) -> None:
        encoded = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers
                   if k.lower() not in ("content-length", "x-request-id")]
        encoded.append((b"content-length", str(len(data)).encode()))
        encoded.append((b"x-request-id", request_id.encode()))
        await send({"type": "http.response.start", "status": status, "headers": encoded})
        await send({"type": "http.response.body", "body": data})


class StoppableServer(uvicorn.Server):
    """Stops on Ctrl-C or SIGTERM and returns, so `main` cleans up and exits 0 (uvicorn would
    otherwise re-raise the signal after shutting down, and the process would die by it)."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


def function_pools(template: Template) -> tuple[dict[str, Callable], dict[str, Any]]:
    """This process's instances of the template's functions: the buffered ones' invoke, by logical
    id, and the streaming ones' ASGI pools."""
    handlers: dict[str, Callable] = {}
    streaming_apps: dict[str, Any] = {}
    isolate_router_state()
    for function in template.functions.values():
        if function.streaming:
            streaming_apps[function.logical_id] = AsgiPool(function, instance_limit(streaming=True))
        else:
            handlers[function.logical_id] = FunctionPool(function, instance_limit()).invoke
    return handlers, streaming_apps


def serving_server(template: Template, handlers: dict[str, Callable],
                   streaming_apps: dict[str, Any]) -> StoppableServer:
    """The gateway's HTTP server over this process's function instances (it is given its socket)."""
    app = GatewayApp(template, handlers, streaming_apps)
    return StoppableServer(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=3,
                                          http=front_door.FrontDoorProtocol))
