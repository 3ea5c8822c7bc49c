"""`make invoke FUNCTION=<name> EVENT=events/<file>.json`: one function's handler run once, in
this process, on a sample event, against the running `make run`'s AWS emulator and simulators;
prints the answer, as `sam local invoke <Function> -e <event>` does (no Docker needed).

The function is named by its folder (`plants`, `functions/plants`) or its logical id
(`PlantsFunction`). It runs with the template's environment for it (globals and its own plain
values), the tables and queues of the running gateway (from `.local/gateway.json`) and the
runner's own settings (simulators, task pacing, link secret). The sample events carry a
placeholder key: the key in their `Authorization`, `x-api-key`, `x-goog-api-key` or `x-key`
header is replaced by `KEY` when it is set, else by the running gateway's demo key.

A streaming function (text, images: an ASGI app behind the Lambda Web Adapter) gets the event as
the adapter would give it, an HTTP request; its answer is printed in the proxy shape once it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

from gateway_local.emulator import LOCAL_AWS_ENVIRONMENT, isolate_aws_environment
from gateway_local.template import Function, Template, read_template

_KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "x-key")


class InvokeError(Exception):
    """A usage error: printed to stderr, exit code 2."""


def find_function(template: Template, name: str) -> Function:
    wanted = name.strip().rstrip("/").removeprefix("functions/")
    for function in template.functions.values():
        if wanted in (function.logical_id, function.code_dir.name):
            return function
    names = ", ".join(sorted(f.code_dir.name for f in template.functions.values()))
    raise InvokeError(f"FUNCTION={name}: no such function in template.yaml (one of: {names})")


def running_gateway(root: Path) -> dict[str, Any]:
    """What the running `make run` wrote to its endpoint file; an error naming the file if none runs."""
    from gateway.admin import TargetError, read_endpoint_file

    path = Path(os.environ.get("GATEWAY_LOCAL_ENDPOINT_FILE") or root / ".local" / "gateway.json")
    if not path.is_file():
        raise InvokeError(f"no running gateway found ({path}): start `make run` in another terminal first")
    try:
        return read_endpoint_file(path)
    except TargetError as exc:
        raise InvokeError(str(exc)) from None


def with_key(event: dict[str, Any], key: str) -> dict[str, Any]:
    """The event with the key of its key header replaced (a bearer stays a bearer)."""
    event = json.loads(json.dumps(event))
    for field in ("headers", "multiValueHeaders"):
        headers = event.get(field) or {}
        for name in list(headers):
            if name.lower() not in _KEY_HEADERS:
                continue
            bearer = name.lower() == "authorization"
            value = f"Bearer {key}" if bearer else key
            headers[name] = [value] if field == "multiValueHeaders" else value
    return event


def _environment(function: Function, gateway: dict[str, Any]) -> dict[str, str]:
    plain = {name: value for name, value in function.environment.items() if isinstance(value, str)}
    return {**plain, **gateway.get("environment", {}), **gateway.get("function_environment", {}),
            **LOCAL_AWS_ENVIRONMENT, "AWS_ENDPOINT_URL": gateway["environment"]["AWS_ENDPOINT_URL"],
            "AWS_LAMBDA_FUNCTION_NAME": function.logical_id, "POWERTOOLS_METRICS_DISABLED": "true"}


def invoke(function: Function, event: dict[str, Any]) -> dict[str, Any]:
    """The function's answer to `event`, in the Lambda proxy shape for an API event."""
    from gateway_local import apigw
    from gateway_local.instances import handler_of, load_module

    module = load_module(function)
    if not function.streaming:
        return handler_of(function, module)(event, apigw.LambdaContext(function.logical_id))
    return asyncio.run(_invoke_asgi(module.app, event))


async def _invoke_asgi(app: Any, event: dict[str, Any]) -> dict[str, Any]:
    """An API Gateway event as the Lambda Web Adapter hands it to the ASGI app, and its answer."""
    import httpx

    body = event.get("body") or ""
    data = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() not in ("host", "content-length")}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.request(event.get("httpMethod", "GET"), event.get("path", "/"), content=data,
                                      params=event.get("queryStringParameters") or None, headers=headers,
                                      timeout=900)
    text = answer.content.decode("utf-8", errors="replace")
    return {"statusCode": answer.status_code, "headers": dict(answer.headers), "body": text,
            "isBase64Encoded": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make invoke", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("function", help="the function's folder (plants) or logical id (PlantsFunction)")
    parser.add_argument("event", help="the event file, e.g. events/plants.json")
    parser.add_argument("--template", default="template.yaml")
    args = parser.parse_args(argv)
    try:
        template = read_template(args.template)
        function = find_function(template, args.function)
        try:
            event = json.loads(Path(args.event).read_text())
        except (OSError, ValueError) as exc:
            raise InvokeError(f"EVENT={args.event}: not a readable JSON file ({exc})") from None
        if not isinstance(event, dict):
            raise InvokeError(f"EVENT={args.event}: an event is a JSON object")
        gateway = running_gateway(template.root)
    except InvokeError as exc:
        print(f"make invoke: {exc}", file=sys.stderr)
        return 2
    key = os.environ.get("KEY", "").strip() or gateway.get("demo_key")
    isolate_aws_environment()
    os.environ.update(_environment(function, gateway))
    sys.path[:0] = [str(template.root / "layers" / "gateway")]
    answer = invoke(function, with_key(event, key) if key else event)
    print(json.dumps(answer, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
