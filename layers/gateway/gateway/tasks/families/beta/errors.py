"""Beta's (Black Forest Labs') errors as it means them.

BFL's answers carry no code of their own, only FastAPI's `{"detail": ...}`, so its statuses
decide (docs.bfl.ai, "Errors" and "Rate limits"): 402 "Insufficient credits" and 403 are the
channel's account; 422 a request that fails validation; 429 "too many active tasks" (24 at
once per account) is capacity; 5xx its own.
"""

from __future__ import annotations

from gateway.upstreams.errors import ACCOUNT, CAPACITY, CLIENT, ErrorTable, Rule

_SOURCE = "docs.bfl.ai (API reference: errors, rate limits)"

ERRORS = ErrorTable("beta", [
    Rule(ACCOUNT, status=401, source=_SOURCE),
    Rule(ACCOUNT, status=402, source=_SOURCE),  # Insufficient credits
    Rule(ACCOUNT, status=403, source=_SOURCE),
    Rule(CLIENT, status=422, source=_SOURCE),  # validation: {"detail": [{"loc", "msg", "type"}]}
    Rule(CAPACITY, status=429, source=_SOURCE),  # active tasks over the account's limit
])
