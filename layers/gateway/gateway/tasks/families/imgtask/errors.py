"""Imgtask's (midjourney-proxy's) errors as it means them.

The proxy answers a submit with HTTP 200 and its own `code` (`ReturnCode`: 1 submitted, 3 not
found, 4 validation, 9 failure, 21 exists, 22 queued, 23 queue full, 24 banned prompt), and a
wrong `mj-api-secret` with a 401 (the channel's key). Its code 3 means two things: the task a
change names is gone (the client's), or "无可用的账号实例", no Discord account instance is
available (every account of the proxy disabled or disconnected: the channel's own account,
failed over and cooled down). Source: novicezk/midjourney-proxy `SubmitController` /
`TaskServiceImpl` (`SubmitResultVO.fail(ReturnCode.NOT_FOUND, "无可用的账号实例")`).
"""

from __future__ import annotations

from typing import Any

from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, ErrorTable, Rule

_SOURCE = "novicezk/midjourney-proxy ReturnCode, SubmitController"


def proxy_code(body: Any) -> list[str]:
    code = body.get("code") if isinstance(body, dict) else None
    return [str(code)] if isinstance(code, int) and not isinstance(code, bool) else []


def proxy_description(body: Any) -> str | None:
    description = body.get("description") if isinstance(body, dict) else None
    return description if isinstance(description, str) else None


ERRORS = ErrorTable("imgtask", [
    Rule(ACCOUNT, code="3", message="无可用的账号实例", source=_SOURCE),  # no Discord account instance
    Rule(CLIENT, code="3", source=_SOURCE),  # the task named is gone
    Rule(CLIENT, code="4", source=_SOURCE),  # validation
    Rule(CLIENT, code="24", source=_SOURCE),  # banned prompt
    Rule(CAPACITY, code="23", source=_SOURCE),  # queue full
    Rule(UPSTREAM, code="9", source=_SOURCE),  # the proxy's own failure
], codes=proxy_code, message=proxy_description)
