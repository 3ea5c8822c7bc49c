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

nginx has the same three (`large_client_header_buffers`, `client_header_timeout`,
`limit_conn`); API Gateway itself never lets a client hold a connection open with unfinished
headers. The limits are per serving process (`processes.py`): an address may hold the limit in
each.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADERS = 100  # the count bounds a flood of tiny headers
MAX_HEADER_BLOCK_BYTES = 16 * 1024  # the request line and every header line
HEADER_TIMEOUT_SECONDS = 5.0
MAX_CONNECTIONS_PER_ADDRESS = 128
LINGER_SECONDS = 2.0  # a refused request's connection stays this long, unread, so its answer is not lost to a reset


def header_timeout() -> float:
    """`GATEWAY_LOCAL_HEADER_TIMEOUT_SECONDS` (5): how long a request's headers may take."""
    return float(os.environ.get("GATEWAY_LOCAL_HEADER_TIMEOUT_SECONDS") or HEADER_TIMEOUT_SECONDS)


def max_connections_per_address() -> int:
    """`GATEWAY_LOCAL_MAX_CONNECTIONS_PER_ADDRESS` (128): open connections one address may hold."""
    return int(os.environ.get("GATEWAY_LOCAL_MAX_CONNECTIONS_PER_ADDRESS") or MAX_CONNECTIONS_PER_ADDRESS)


class _HeadersTooLarge(Exception):
    """Raised from a parser callback: httptools stops parsing at once."""


# Open connections by client address, in this process (one event loop serves them all).
_open_by_address: Counter[str] = Counter()


def _raw_answer(status: int, reason: str, body: bytes) -> bytes:
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the header bounds, the header timeout and the
    per-address connection limit (`uvicorn.Config(http=GuardedHttpProtocol)`)."""

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
        address = self.client[0] if self.client else ""
        if _open_by_address[address] >= max_connections_per_address():
            self._refused = True
            body = json.dumps({"message": "Too Many Requests: too many open connections from this address"})
            transport.write(_raw_answer(429, "Too Many Requests", body.encode()))
            transport.close()
            return
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
