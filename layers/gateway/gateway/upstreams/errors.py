"""The one failure every upstream client and task adapter raises, and the rules that make it.

An adapter or client never raises a client-facing `GatewayError`: it raises `UpstreamError`
saying what happened (the status, a message without the upstream key, whether another channel
may be tried, whose fault it is): `gateway.upstreams.verdict` alone decides what the client is
answered (`final_error`), and `gateway.routing.failover` what follows for the channel.

**Whose fault** (`UpstreamError.fault`), one of four words:

- `client`: the request itself (a bad field, a refused prompt): relayed, never failed over,
  never counted against the channel;
- `account`: the channel's own credentials or account (a revoked key, an unpaid bill, a model
  the account may not use): failed over (nothing was done upstream), the channel cooled down for
  the maximum, an operator alert (`routing/health.py`); the client is never told its key is bad;
- `capacity`: the upstream is busy or rate limited: failed over, the channel cooled down for the
  upstream's `Retry-After`;
- `upstream`: the upstream's own transient failure (5xx, no answer): failed over, counted.

A status alone says it for most providers (`default_fault`), but not for all: Gemini answers a
revoked key with a 400, DashScope an account in arrears with a 400, Kling an unpaid account with a
429. So each protocol and task family keeps an `ErrorTable` beside its adapter, written from the
provider's own error reference, that reads the provider's own code in the body first.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # channel health imports this module: no HTTP client on its cold start
    import httpx

CLIENT, ACCOUNT, CAPACITY, UPSTREAM = "client", "account", "capacity", "upstream"
FAULTS = (CLIENT, ACCOUNT, CAPACITY, UPSTREAM)
#: Statuses that, with no code saying otherwise, are about the channel's own account.
ACCOUNT_STATUSES = (401, 402, 403, 407)


def retryable_status(status: int) -> bool:
    """Whether an upstream status may be asked again, of another channel: a timeout (408), a
    conflict (409), a rate limit (429) or the upstream's own fault (5xx)."""
    return status in (408, 409, 429) or status >= 500


def default_fault(status: int | None) -> str:
    """Whose fault a status is when the provider's body says nothing more."""
    if status is None:
        return UPSTREAM
    if status in ACCOUNT_STATUSES:
        return ACCOUNT
    if status == 429:
        return CAPACITY
    return UPSTREAM if retryable_status(status) else CLIENT


def is_account(exc: Any) -> bool:
    """Whether a failure is about the channel's own credentials or account."""
    fault = getattr(exc, "fault", None)
    return (fault or default_fault(getattr(exc, "status", None))) == ACCOUNT


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    if value := headers.get("retry-after-ms"):
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


class UpstreamError(Exception):
    """The upstream did not give a usable answer.

    `status`: the upstream's HTTP status, None when no answer came. `retryable`: another channel
    may be tried (by default, from the status by `retryable_status`). `timed_out`: sent but not
    answered in time (by default, a 504), so the verdict is a 504 rather than a 502. `body`: the
    upstream's error object, redacted, for a dialect that relays it. `fault`: whose fault it is
    (module docstring; by default from the status, `default_fault`). The message never holds
    the upstream key.
    """

    def __init__(self, status: int | None, message: str, retryable: bool | None = None,
                 retry_after: float | None = None, body: dict[str, Any] | None = None, *,
                 timed_out: bool | None = None, fault: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.fault = fault or default_fault(status)
        if retryable is None:
            retryable = self.fault in (CAPACITY, UPSTREAM) if fault else (status is None or retryable_status(status))
        self.retryable = retryable
        self.retry_after = retry_after
        self.body = body
        self.timed_out = (status == 504) if timed_out is None else timed_out

    def __repr__(self) -> str:
        return (f"UpstreamError(status={self.status!r}, message={self.message!r}, retryable={self.retryable!r}, "
                f"fault={self.fault!r})")

    @property
    def shown(self) -> str:
        """What a client may read of it: never the upstream's words about the channel's own key
        ("API key not valid" would send the client to check a key that is fine)."""
        if self.fault == ACCOUNT:
            return (f"the upstream refused the gateway's own credentials or account (upstream status "
                    f"{self.status}); this is not a problem with your key")
        return self.message


# ---- the providers' own error tables -----------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """One line of a provider's error table: answers matching `status` (None: any) and `code`
    (one of the provider's own codes in the body: a type, a reason, a number; None: any) or
    `message` (a case-insensitive piece of its message, for a provider that says it in words
    only) are `fault`. `source`: where the provider documents it (or where its users met it)."""

    fault: str
    status: int | None = None
    code: str | None = None
    message: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}")

    def matches(self, status: int | None, codes: Sequence[str], message: str) -> bool:
        return ((self.status is None or self.status == status)
                and (self.code is None or self.code in codes)
                and (self.message is None or self.message.lower() in message.lower()))


def _no_codes(body: Any) -> list[str]:
    return []


class ErrorTable:
    """A protocol's or family's errors as its provider means them: the first matching rule
    decides; an answer no rule names is judged by its status (`default_fault`).

    `codes(body)`: the provider's own codes in an error body (strings: a numeric code as its
    digits). `message(body)`: its message."""

    def __init__(self, name: str, rules: Iterable[Rule], *, codes: Callable[[Any], Iterable[str]] = _no_codes,
                 message: Callable[[Any], str | None] = lambda body: None):
        self.name = name
        self.rules = tuple(rules)
        self._codes = codes
        self._message = message

    def codes(self, body: Any) -> list[str]:
        try:
            return [str(c) for c in self._codes(body) if c is not None and c != ""]
        except (AttributeError, TypeError, KeyError):  # a body of a shape the provider never sends
            return []

    def fault(self, status: int | None, body: Any) -> str:
        codes = self.codes(body)
        try:
            message = self._message(body) or ""
        except (AttributeError, TypeError, KeyError):
            message = ""
        for rule in self.rules:
            if rule.matches(status, codes, message):
                return rule.fault
        return default_fault(status)

    def error(self, status: int | None, message: str, body: Any = None, *, retry_after: float | None = None,
              relayed: dict[str, Any] | None = None) -> UpstreamError:
        """The `UpstreamError` of one refused answer: whose fault the table says, retryable when
        it is capacity or the upstream's own (failed over as well when it is the account's)."""
        return UpstreamError(status, message, retry_after=retry_after, body=relayed, fault=self.fault(status, body))


def google_codes(body: Any) -> list[str]:
    """Google's codes in an error body (`google.rpc.Status`): its canonical `status`
    (INVALID_ARGUMENT...) and each `details[].reason` (ErrorInfo: API_KEY_INVALID...)."""
    if isinstance(body, list) and body:
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return []
    found = [error.get("status")]
    found += [d.get("reason") for d in error.get("details") or [] if isinstance(d, dict)]
    return [str(c) for c in found if isinstance(c, str) and c]


def google_message(body: Any) -> str | None:
    if isinstance(body, list) and body:
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("message") if isinstance(error, dict) and isinstance(error.get("message"), str) else None
