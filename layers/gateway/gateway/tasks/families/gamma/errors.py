"""Gamma's (DashScope's) errors as it means them: its own `code`, whose fault each is.

Source: DashScope's status code reference (help.aliyun.com/zh/dashscope/return-status-code-description,
and Model Studio's "Error messages", alibabacloud.com/help/en/model-studio/error-code). An
account in arrears is a **400** `Arrearage` ("Access denied, please make sure your account is
in good standing."; as users meet it: tencentmusic/supersonic#1572, 1Panel-dev/MaxKB#5297): by
status alone it would be relayed to the client as its own mistake, with no failover.
"""

from __future__ import annotations

from typing import Any

from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, ErrorTable, Rule

_SOURCE = "DashScope status codes (help.aliyun.com/zh/dashscope/return-status-code-description)"


def dashscope_code(body: Any) -> list[str]:
    """`code` of an error answer, or `output.code` of a failed task."""
    if not isinstance(body, dict):
        return []
    output = body.get("output")
    found = [body.get("code"), output.get("code") if isinstance(output, dict) else None]
    return [c for c in found if isinstance(c, str) and c]


ERRORS = ErrorTable("gamma", [
    Rule(ACCOUNT, code="Arrearage", source=_SOURCE),  # 400: the account owes money
    Rule(ACCOUNT, code="InvalidApiKey", source=_SOURCE),  # 401
    Rule(ACCOUNT, code="AccessDenied", source=_SOURCE),  # 403: the account may not use this API or model
    Rule(ACCOUNT, code="AccessDenied.Unpurchased", source=_SOURCE),  # 403: the model not bought
    Rule(ACCOUNT, code="Model.AccessDenied", source="alibabacloud.com/help/en/model-studio/error-code"),
    # 403: the free quota is spent and "use free tier only" is on in the console: the operator's switch.
    Rule(ACCOUNT, code="AllocationQuota.FreeTierOnly", source="alibabacloud.com/help/en/model-studio/error-code"),
    Rule(CAPACITY, code="Throttling", source=_SOURCE),  # 429
    Rule(CAPACITY, code="Throttling.RateQuota", source=_SOURCE),  # 429: requests per minute
    Rule(CAPACITY, code="Throttling.AllocationQuota", source=_SOURCE),  # 429: tokens per minute
    Rule(CAPACITY, code="Throttling.BurstRate", source="alibabacloud.com/help/en/model-studio/error-code"),
    Rule(CLIENT, code="InvalidParameter", source=_SOURCE),
    Rule(CLIENT, code="DataInspectionFailed", source=_SOURCE),  # 400: the prompt or image refused by moderation
    Rule(CLIENT, code="InvalidParameter.DataInspection", source=_SOURCE),
    Rule(CLIENT, code="InvalidURL", source=_SOURCE),
    Rule(UPSTREAM, code="RequestTimeOut", source=_SOURCE),  # 408
    Rule(UPSTREAM, code="InternalError", source=_SOURCE),  # 500
    Rule(UPSTREAM, code="InternalError.Algo", source=_SOURCE),
], codes=dashscope_code)
