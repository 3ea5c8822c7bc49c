"""Alpha's (Kling's) errors as it means them: its own numeric `code`, whose fault each is.

Source: Kling's API reference, "General Information" -> "Error Code" (the table of HTTP status,
service code and meaning; klingai.com/document-api/apiReference/commonInfo). The account codes
come with a **429** (1100 account exception, 1101 arrears, 1102 resource pack depleted or
expired): by status alone they would look like a rate limit, a short cooldown, and the unpaid
channel would be tried again every few seconds.
"""

from __future__ import annotations

from typing import Any

from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, UPSTREAM, ErrorTable, Rule

_SOURCE = "Kling API reference, General Information: Error Code"

#: code -> (HTTP status Kling documents with it, whose fault, its meaning)
CODES: dict[int, tuple[int, str, str]] = {
    1000: (401, ACCOUNT, "Authentication failed"),
    1001: (401, ACCOUNT, "Authorization is empty"),
    1002: (401, ACCOUNT, "Authorization is invalid"),
    1003: (401, ACCOUNT, "Authorization is not yet valid"),
    1004: (401, ACCOUNT, "Authorization has expired"),
    1100: (429, ACCOUNT, "Account exception"),
    1101: (429, ACCOUNT, "Account in arrears (postpaid)"),
    1102: (429, ACCOUNT, "Resource pack depleted or expired (prepaid)"),
    1103: (403, ACCOUNT, "Unauthorized access to requested resource, such as API/model"),
    1200: (400, CLIENT, "Invalid request parameters"),
    1201: (400, CLIENT, "Invalid parameters"),
    1202: (404, CLIENT, "The requested method is invalid"),
    1203: (404, CLIENT, "The requested resource does not exist"),
    1300: (400, CLIENT, "Trigger platform strategy"),
    1301: (400, CLIENT, "Trigger content security policy"),
    1302: (429, CAPACITY, "API request too fast (rate limit)"),
    1303: (429, CAPACITY, "Concurrency or QPS exceeds the prepaid resource package limit"),
    1304: (403, ACCOUNT, "Trigger IP whitelisting policy"),
    5000: (500, UPSTREAM, "Server internal error"),
    5001: (503, UPSTREAM, "Server temporarily unavailable (maintenance)"),
    5002: (504, UPSTREAM, "Server internal timeout"),
}


def kling_code(body: Any) -> list[str]:
    code = body.get("code") if isinstance(body, dict) else None
    return [str(code)] if isinstance(code, int) and not isinstance(code, bool) else []


ERRORS = ErrorTable("alpha", [Rule(fault, code=str(code), source=_SOURCE) for code, (_, fault, _) in CODES.items()],
                    codes=kling_code)


def documented_status(code: Any) -> int:
    """The HTTP status Kling documents for `code` (for a non-zero code inside a 200), else 502."""
    return CODES[code][0] if isinstance(code, int) and code in CODES else 502
