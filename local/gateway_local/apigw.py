"""API Gateway's part: an HTTP request as a REST proxy event, a handler's answer as HTTP."""

from __future__ import annotations

import base64
import time
import uuid
from datetime import UTC, datetime
from typing import Any

# Lambda refuses a synchronous invocation event above 6 MB; API Gateway a payload above 10 MB.
LAMBDA_EVENT_LIMIT = 6 * 1024 * 1024
API_PAYLOAD_LIMIT = 10 * 1024 * 1024


class LambdaContext:
    """The context object Lambda hands a handler."""

    def __init__(self, function_name: str, timeout_seconds: float = 29.0):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._deadline - time.monotonic()) * 1000), 0)


def is_binary(content_type: str, binary_media_types: tuple[str, ...]) -> bool:
    media = content_type.split(";")[0].strip().lower()
    for pattern in binary_media_types:
        kind, _, sub = pattern.lower().partition("/")
        if pattern == "*/*" or media == pattern.lower() or (sub == "*" and media.startswith(kind + "/")):
            return True
    return False


def build_event(*, method: str, path: str, resource: str, path_parameters: dict[str, str],
                raw_headers: list[tuple[str, str]], raw_query: list[tuple[str, str]], body: bytes,
                binary_media_types: tuple[str, ...], source_ip: str, stage: str = "local",
                request_id: str | None = None) -> dict[str, Any]:
    headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for name, value in raw_headers:
        headers[name] = value  # the last value wins, as in API Gateway's single-value map
        multi_headers.setdefault(name, []).append(value)
    query: dict[str, str] = {}
    multi_query: dict[str, list[str]] = {}
    for name, value in raw_query:
        query[name] = value
        multi_query.setdefault(name, []).append(value)
    content_type = next((v for k, v in raw_headers if k.lower() == "content-type"), "")
    binary = bool(body) and is_binary(content_type, binary_media_types)
    if binary:
        text_body: str | None = base64.b64encode(body).decode("ascii")
    else:
        text_body = body.decode("utf-8", errors="replace") if body else None
    now = datetime.now(UTC)
    return {
        "resource": resource, "path": path, "httpMethod": method,
        "headers": headers or None, "multiValueHeaders": multi_headers or None,
        "queryStringParameters": query or None, "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": path_parameters or None, "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012", "apiId": "local", "resourceId": "local", "resourcePath": resource,
            "httpMethod": method, "path": f"/{stage}{path}", "stage": stage, "protocol": "HTTP/1.1",
            "requestId": request_id or str(uuid.uuid4()), "extendedRequestId": str(uuid.uuid4()),
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"), "requestTimeEpoch": int(now.timestamp() * 1000),
            "identity": {"sourceIp": source_ip, "userAgent": headers.get("user-agent") or headers.get("User-Agent")},
            "domainName": "127.0.0.1", "domainPrefix": "local",
        },
        "body": text_body, "isBase64Encoded": binary,
    }


def response_parts(answer: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body) of a proxy integration answer."""
    status = int(answer.get("statusCode", 200))
    headers: list[tuple[str, str]] = []
    for name, value in (answer.get("headers") or {}).items():
        headers.append((name, str(value)))
    for name, values in (answer.get("multiValueHeaders") or {}).items():
        single = (answer.get("headers") or {}).get(name)
        headers.extend((name, str(v)) for v in values if str(v) != str(single))
    body = answer.get("body") or ""
    data = base64.b64decode(body) if answer.get("isBase64Encoded") else body.encode("utf-8")
    return status, headers, data
