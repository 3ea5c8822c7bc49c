"""Zeta's (Volcengine Ark's) errors as it means them: `error.code`, whose fault each is.

Source: Ark's error code reference (volcengine.com/docs/82379/1299023, "错误码"), body
`{"error": {"code", "message", "param", "type"}}`; an overdue account is a 403
`AccountOverdueError` "The request failed because your account has an overdue balance." (as
users meet it: coze-dev/coze-studio#2195).
"""

from __future__ import annotations

from typing import Any

from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, ErrorTable, Rule

_SOURCE = "Ark error codes (volcengine.com/docs/82379/1299023)"


def ark_code(body: Any) -> list[str]:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return []
    return [c for c in (error.get("code"), error.get("type")) if isinstance(c, str) and c]


ERRORS = ErrorTable("zeta", [
    Rule(ACCOUNT, code="AuthenticationError", source=_SOURCE),  # 401: the API key missing or invalid
    Rule(ACCOUNT, code="AccountOverdueError", source=_SOURCE),  # 403: an overdue balance
    Rule(ACCOUNT, code="AccessDenied", source=_SOURCE),  # 403: no access to the resource
    Rule(ACCOUNT, code="OperationDenied.ServiceNotOpen", source=_SOURCE),  # 403: the model service not activated
    Rule(ACCOUNT, code="OperationDenied.ServiceOverdue", source=_SOURCE),  # 403: the service overdue
    Rule(ACCOUNT, code="OperationDenied.PermissionDenied", source=_SOURCE),
    Rule(ACCOUNT, code="InvalidSubscription", source=_SOURCE),
    # 429s about the account, not about the rate: the free trial quota spent, the inference limit
    # the operator set ("safe experience mode") reached.
    Rule(ACCOUNT, code="QuotaExceeded", source=_SOURCE),
    Rule(ACCOUNT, code="SetLimitExceeded", source=_SOURCE),
    Rule(CAPACITY, code="RateLimitExceeded.EndpointRPMExceeded", source=_SOURCE),
    Rule(CAPACITY, code="RateLimitExceeded.EndpointTPMExceeded", source=_SOURCE),
    Rule(CAPACITY, code="ModelAccountRpmRateLimitExceeded", source=_SOURCE),
    Rule(CAPACITY, code="ModelAccountTpmRateLimitExceeded", source=_SOURCE),
    Rule(CAPACITY, code="ServerOverloaded", source=_SOURCE),  # 429: the service is busy
    Rule(CLIENT, code="MissingParameter", source=_SOURCE),
    Rule(CLIENT, code="InvalidParameter", source=_SOURCE),
    Rule(CLIENT, code="InvalidEndpointOrModel.NotFound", source=_SOURCE),  # 404
    Rule(CLIENT, code="SensitiveContentDetected", source=_SOURCE),
    Rule(CLIENT, code="InputTextSensitiveContentDetected", source=_SOURCE),
    Rule(CLIENT, code="InputImageSensitiveContentDetected", source=_SOURCE),
    Rule(UPSTREAM, code="InternalServiceError", source=_SOURCE),  # 500
], codes=ark_code)
