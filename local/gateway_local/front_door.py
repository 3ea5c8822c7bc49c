"""The local runner's HTTP connections, bounded as a front door must bound them (issue 33).

uvicorn's httptools protocol, with three rules it lacks, each enforced while the request is read:

- a request's header block is bounded while it is parsed: the 101st header, or a header block
  (request line included) past 16 KB, is answered 431 at once, in the route's error envelope,
  and the rest is never parsed (uvicorn would parse 20,000 headers before the app saw any);
- a connection whose request headers are not complete within `header_timeout()` seconds of its
  first byte (or of the connection, or of the previous answer) is closed: a slowloris client
  holds nothing for long (uvicorn's keep-alive timeout covers only the idle time after an answer);
- one address holds at most `max_connections_per_address()` open connections in a serving
  process; the next is answered 429 and closed before anything of it is read.

And two that decide at accept, before any HTTP machinery is made for the connection
(`FrontDoorProtocol`), so that a flood of connections costs as little as a connection can:

- new connections per address are a token bucket (`new_connections_per_second()`, a burst of
  `new_connections_burst()`, twice the rate): a connection past it is refused;
- an address answered 431 `header_strikes()` times within `header_penalty()` seconds (a header
  flood, not a client that once sent one header too many) has its next connections refused for
  `header_penalty()` seconds.

A refused connection is never read: reading is off before the first byte, no parser or request
state is made, and it is held, unread, for `refusal_hold()` seconds (at most `MAX_HELD` at once
per process) and then reset. The hold is what bounds a closed-loop flood: a client that opens
its next connection when the last one ends can open about one per hold per connection it keeps,
instead of spinning through refusals as fast as the runner can refuse; past `MAX_HELD` a refused
connection is reset at once.

nginx has the same (`large_client_header_buffers`, `client_header_timeout`, `limit_conn`,
`limit_req`; fail2ban's strikes for the penalty); API Gateway itself never lets a client hold a
connection open with unfinished headers, and throttles before its backends see a request. The
limits are per serving process (`processes.py`): an address may hold the limit in each, and the
kernel spreads its connections across the processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADERS = 100  # the count bounds a flood of tiny headers
MAX_HEADER_BLOCK_BYTES = 16 * 1024  # the request line and every header line
HEADER_TIMEOUT_SECONDS = 5.0
MAX_CONNECTIONS_PER_ADDRESS = 128
LINGER_SECONDS = 2.0  # a refused request's connection stays this long, unread, so its answer is not lost to a reset
NEW_CONNECTIONS_PER_SECOND = 200.0
HEADER_STRIKES = 10
HEADER_PENALTY_SECONDS = 10.0
REFUSAL_HOLD_SECONDS = 1.0
MAX_HELD = 256  # refused connections held unread at once, per process; past it they are reset at once
MAX_TRACKED_ADDRESSES = 10_000  # past it, the addresses in no bucket debt and no penalty are forgotten


def header_timeout() -> float:
    """`GATEWAY_LOCAL_HEADER_TIMEOUT_SECONDS` (5): how long a request's headers may take."""
    return float(os.environ.get("GATEWAY_LOCAL_HEADER_TIMEOUT_SECONDS") or HEADER_TIMEOUT_SECONDS)


def max_connections_per_address() -> int:
    """`GATEWAY_LOCAL_MAX_CONNECTIONS_PER_ADDRESS` (128): open connections one address may hold."""
    return int(os.environ.get("GATEWAY_LOCAL_MAX_CONNECTIONS_PER_ADDRESS") or MAX_CONNECTIONS_PER_ADDRESS)


def new_connections_per_second() -> float:
    """`GATEWAY_LOCAL_NEW_CONNECTIONS_PER_SECOND` (200): new connections one address may open a
    second in a serving process."""
    return float(os.environ.get("GATEWAY_LOCAL_NEW_CONNECTIONS_PER_SECOND") or NEW_CONNECTIONS_PER_SECOND)


def new_connections_burst() -> float:
    """`GATEWAY_LOCAL_NEW_CONNECTIONS_BURST` (twice the rate): new connections at once, the bucket's size."""
    return float(os.environ.get("GATEWAY_LOCAL_NEW_CONNECTIONS_BURST") or 2 * new_connections_per_second())


def header_strikes() -> int:
    """`GATEWAY_LOCAL_HEADER_STRIKES` (10): the 431s within `header_penalty()` that earn the penalty."""
    return int(os.environ.get("GATEWAY_LOCAL_HEADER_STRIKES") or HEADER_STRIKES)


def header_penalty() -> float:
    """`GATEWAY_LOCAL_HEADER_PENALTY_SECONDS` (10): how long an address that earned it is refused."""
    return float(os.environ.get("GATEWAY_LOCAL_HEADER_PENALTY_SECONDS") or HEADER_PENALTY_SECONDS)


def refusal_hold() -> float:
    """`GATEWAY_LOCAL_REFUSAL_HOLD_SECONDS` (1): how long a refused connection is held unread."""
    return float(os.environ.get("GATEWAY_LOCAL_REFUSAL_HOLD_SECONDS") or REFUSAL_HOLD_SECONDS)


class Admission:
    """Which new connections a serving process takes, by client address: a token bucket of new
    connections each, and the penalty after repeated 431s. One event loop calls it (no lock)."""

    def __init__(self, rate: float, burst: float, strikes: int, penalty: float,
                 clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.strikes, self.penalty, self.clock = rate, burst, strikes, penalty, clock
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, when)
        self._struck: dict[str, list[float]] = {}  # address -> its recent 431s
        self._penalized: dict[str, float] = {}  # address -> refused until

    @classmethod
    def from_environment(cls) -> Admission:
        return cls(new_connections_per_second(), new_connections_burst(), header_strikes(), header_penalty())

    def admit(self, address: str) -> str | None:
        """None: the connection is taken (and counted); else why it is refused."""
        now = self.clock()
        until = self._penalized.get(address)
        if until is not None:
            if now < until:
                return "penalty"
            del self._penalized[address]
        tokens, when = self._buckets.get(address, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        if tokens < 1:
            self._buckets[address] = (tokens, now)
            return "rate"
        self._buckets[address] = (tokens - 1, now)
        if len(self._buckets) > MAX_TRACKED_ADDRESSES:
            self._forget(now)
        return None

    def struck(self, address: str) -> None:
        """The address was answered 431: the strike that completes `strikes` starts its penalty."""
        now = self.clock()
        recent = [at for at in self._struck.get(address, ()) if now - at < self.penalty] + [now]
        if len(recent) >= self.strikes:
            self._penalized[address] = now + self.penalty
            self._struck.pop(address, None)
        else:
            self._struck[address] = recent
        if len(self._struck) > MAX_TRACKED_ADDRESSES or len(self._penalized) > MAX_TRACKED_ADDRESSES:
            self._forget(now)

    def _forget(self, now: float) -> None:
        """Bounds the memory many addresses take: a full bucket, an old strike and an ended
        penalty are the same as none."""
        self._buckets = {a: (t, w) for a, (t, w) in self._buckets.items()
                         if t + (now - w) * self.rate < self.burst}
        self._struck = {a: s for a, s in self._struck.items() if now - s[-1] < self.penalty}
        self._penalized = {a: u for a, u in self._penalized.items() if u > now}


_admission: Admission | None = None
_held = 0  # refused connections held unread now, in this process


def admission() -> Admission:
    """This process's admission (made from the environment at first use)."""
    global _admission
    if _admission is None:
        _admission = Admission.from_environment()
    return _admission


class FrontDoorProtocol(asyncio.Protocol):
    """What a new connection meets first (`uvicorn.Config(http=FrontDoorProtocol)`): the address's
    penalty, its rate of new connections and its open connections are checked before anything
    is read or any HTTP state is made; a connection that passes is handed to a
    `GuardedHttpProtocol` (the transport's protocol from then on), a refused one is held unread
    and reset (`refusal_hold()`)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._args, self._kwargs = args, kwargs
        self._timer: Any = None

    def connection_made(self, transport: Any) -> None:
        global _held
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        refusal = admission().admit(address)
        if refusal is None:
            if _open_by_address[address] >= max_connections_per_address():
                body = json.dumps({"message": "Too Many Requests: too many open connections from this address"})
                transport.write(_raw_answer(429, "Too Many Requests", body.encode()))
                transport.close()
                return
            http = GuardedHttpProtocol(*self._args, **self._kwargs)
            transport.set_protocol(http)
            http.connection_made(transport)
            return
        transport.pause_reading()  # before the first byte is read: reading never starts
        hold = refusal_hold()
        if _held >= MAX_HELD or hold <= 0:
            transport.abort()
            return
        _held += 1
        self._timer = asyncio.get_running_loop().call_later(hold, transport.abort)

    def data_received(self, data: bytes) -> None:
        pass  # never called: a refused connection is not read

    def connection_lost(self, exc: Exception | None) -> None:
        global _held
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            _held -= 1


class _HeadersTooLarge(Exception):
    """Raised from a parser callback: httptools stops parsing at once."""


# Open connections by client address, in this process (one event loop serves them all).
_open_by_address: Counter[str] = Counter()


def _raw_answer(status: int, reason: str, body: bytes) -> bytes:
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the header bounds and the header timeout, counting the
    address's open connections (made by `FrontDoorProtocol` for a connection it admitted)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._address: str | None = None
        self._header_count = 0
        self._header_bytes = 0
        self._reading_headers = True
        self._header_timer: Any = None
        self._refused = False
        self._too_many_headers = False

    # --- the connection ---------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        address = self.client[0] if self.client else ""  # admitted by `FrontDoorProtocol`
        self._address = address
        _open_by_address[address] += 1
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is not None:
            _open_by_address[self._address] -= 1
            if _open_by_address[self._address] <= 0:
                del _open_by_address[self._address]
            self._address = None
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(header_timeout(), self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._reading_headers and not self.transport.is_closing():
            self.transport.close()

    # --- reading ------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # what follows a refused request is never parsed
        if self._reading_headers:
            room = MAX_HEADER_BLOCK_BYTES - self._header_bytes
            if len(data) > room:  # parse no more than the bound allows
                self._feed(data[:room])
                if self._reading_headers and not self._refused:
                    self._refuse_headers(f"the request headers are larger than {MAX_HEADER_BLOCK_BYTES} bytes")
                if self._refused:
                    return
                data = data[room:]
            else:
                self._header_bytes += len(data)
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """uvicorn's `data_received`, but a parse our own bound stopped is a 431, not a 400."""
        if not data:
            return
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._too_many_headers:
                self._refuse_headers(f"more than {MAX_HEADERS} request headers")
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_count = 0
        if self._header_timer is None:  # the next request on a kept-alive connection
            self._arm_header_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            self._too_many_headers = True
            raise _HeadersTooLarge(f"more than {MAX_HEADERS} request headers")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._reading_headers = False
        self._disarm_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading_headers, self._header_bytes = True, 0

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._reading_headers and not self.transport.is_closing():
            self._arm_header_timer()  # the keep-alive wait, then the next request's headers

    # --- refusing -------------------------------------------------------------------------------

    def _refuse_headers(self, message: str) -> None:
        from gateway.errors import PayloadTooLarge, dialect_for_path, render

        self._refused = True
        self._disarm_header_timer()
        if self._address is not None:
            admission().struck(self._address)
        try:  # the envelope of the route asked for, when the request line got that far
            path = httptools.parse_url(getattr(self, "url", b"")).path.decode("latin-1")
        except (httptools.HttpParserInvalidURLError, AttributeError, UnicodeDecodeError):
            path = "/"
        rendered = render(PayloadTooLarge(message, status=431, code="request_header_fields_too_large"),
                          dialect_for_path(path))
        self.transport.write(_raw_answer(431, "Request Header Fields Too Large",
                                         json.dumps(rendered.body).encode()))
        # Half-close, and read nothing more: the answer and a FIN go out at once, and the
        # connection is closed after a moment (or by the client first). Reading what the client
        # still sends would cost as much as parsing it; closing at once, with bytes unread, would
        # reset the connection and could lose the answer. A client that keeps sending blocks
        # meanwhile, so one address refuses at most its connection cap per linger.
        self.transport.pause_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)
