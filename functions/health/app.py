"""GET /health for load balancers and uptime checks: no key, no upstream call, no AWS call.

A function of its own, outside the text function's reserved pool (TextConcurrency): a burst of
long streams never makes an uptime check fail. It imports nothing of the gateway layer, so its
cold start is the interpreter's alone.
"""

from __future__ import annotations

import json
from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request_id = ((event or {}).get("requestContext") or {}).get("requestId") or ""
    return {"statusCode": 200,
            "headers": {"content-type": "application/json", "cache-control": "no-store",
                        "x-request-id": request_id},
            "body": json.dumps({"status": "ok"})}
