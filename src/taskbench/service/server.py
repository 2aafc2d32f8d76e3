"""uvicorn's HTTP protocol (httptools) with every resource one client can hold bounded.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``, 5 s) and nothing else a client
sends: httptools has no limit on a request's headers (it appends each read to the header being
parsed, so a header that never ends is held whole, and copied at every read), a request whose headers
or body never complete holds its connection for as long as the client likes (slowloris), a client that
pipelines requests without reading the answers queues them without end, and there is no cap on
connections (uvicorn's ``limit_concurrency`` counts running tasks too: the ``background`` backend's
tasks run after their answers in the request's task, so a benchmark would get 503s). Here:

- the request line and headers may hold ``TASKBENCH_MAX_HEADER_BYTES`` (16 KiB), else 431 and the
  connection is closed. The bytes are counted as they are read, so a head that never ends is refused
  once it passed the limit, holding at most about three times the limit meanwhile. What a request
  sends after its head besides its body's own bytes (chunk framing, trailers, which httptools keeps
  field by field) is bounded the same way (:attr:`Bounds.max_rest_bytes`, else 413); the body's bytes
  are the app's to bound (``limits.py``);
- a request's headers must be complete ``TASKBENCH_HEADER_TIMEOUT`` seconds (10) after the connection
  opened or the previous answer was sent (else the connection is closed), its body
  ``TASKBENCH_BODY_TIMEOUT`` seconds (10) after its headers (else 408), and an answer the client does not
  read (the writes paused) is dropped with the connection after ``TASKBENCH_WRITE_TIMEOUT`` (10);
- at most :data:`MAX_PIPELINED` requests wait behind the one being answered on a connection; the next
  one gets 503 after the answers before it, and the connection is closed (a pipelining client sends the
  rest again: RFC 9112, 9.3.2);
- at most ``TASKBENCH_MAX_CONNECTIONS`` connections (10,240; never more than the file descriptors the
  process has left beside its Redis pools): one more gets a 503 and is closed at once.

Per-client rates and fairness between clients belong to a reverse proxy in front of the API (docs/getting-started.md,
"Slow clients"). Nothing here runs per request but one check in ``on_headers_complete`` and one in
``data_received`` (an earlier version's timer per request cost the API about 1 % of its CPU).
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

#: seconds between two log lines of one warning a client causes at will (a request refused, one that is
#: not HTTP): the API's log grows at most at this pace, not at the client's
QUIET: Final = 10.0
#: requests that may wait, parsed, behind the one being answered on a connection (uvicorn stops
#: reading while one waits, but a read already in hand is parsed whole: thousands of small requests)
MAX_PIPELINED: Final = 32


@dataclass(frozen=True, kw_only=True)
class Bounds:
    header_timeout: float
    body_timeout: float
    write_timeout: float
    max_header_bytes: int
    max_body_bytes: int
    max_connections: int

    @property
    def max_rest_bytes(self) -> int:
        """What a request may send after its head besides its body's own bytes: the framing of the
        largest body in 1-byte chunks (5 bytes each, and the last chunk's) and trailers as large as a head."""
        return 6 * self.max_body_bytes + self.max_header_bytes

    @property
    def every(self) -> float:
        """Seconds between two sweeps: a deadline fires between itself and a quarter of it later."""
        return min(1.0, self.header_timeout / 4, self.body_timeout / 4, self.write_timeout / 4)


class _RefusedError(Exception):
    """Raised in a parser callback to stop the parse: this request gets ``status`` and the connection closes."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class BoundedHttpProtocol(HttpToolsProtocol):
    """The bounds above on uvicorn's httptools protocol.

    Deadlines come from one sweep per server, every :attr:`Bounds.every` seconds, that looks at each
    connection's state (no timer per request): a connection waits for a request's head when uvicorn has
    no keep-alive timer on it (it has one while idle between requests) and no request in progress; for
    its body while the request in progress has more to come and uvicorn reads; for the client while its
    writes are paused. A connection seen in the same wait, for the same request, for the wait's timeout
    is ended."""

    #: read from Settings once per process (uvicorn's worker processes each read them themselves)
    bounds: ClassVar[Bounds | None] = None
    #: ((what, the request cycle), loop time since when): the wait the sweeps saw last
    _waiting: tuple[tuple[str, object], float] | None = None
    #: bytes counted of a request head that goes on past one read; None when none does
    _head: int | None = None
    #: the connection is refused (an answer sent or due, then the close): nothing more is read
    _refused: bool = False
    #: bytes counted of the rest of a request (after its head: chunk framing, trailers, not the body's
    #: own bytes) that goes on past one read; None when none does
    _rest: int | None = None
    #: the request whose app runs (the one answered now, when requests are pipelined)
    _running: RequestResponseCycle | None = None
    #: ``Bounds.max_header_bytes``, on the connection: read on every read of the socket
    _max_head: int = 16_384
    #: the most a request's rest may take as sent: ``Bounds.max_rest_bytes``
    _max_rest: int = 7 * 16_384

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        bounds = _bounds()
        self._max_head = bounds.max_header_bytes
        self._max_rest = bounds.max_rest_bytes
        if len(self.connections) > bounds.max_connections:
            self._refused = True
            detail = f"the API holds {bounds.max_connections} connections, its limit: try again later"
            warn(self.logger, f"refused with 503: {detail}")
            transport.write(answer(503, detail, self.server_state.default_headers))
            transport.close()
            return
        self._waiting = (("head", None), self.loop.time())  # headers are due from the connection's start
        _sweep_started(self.loop, self.connections, bounds)

    # -- the head's size --------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        limit = self._max_head
        if self._head is None and self._rest is None and len(data) <= limit:
            # the usual read: a whole request, or the start of one
            scope = self.scope
            self._feed(data)
            if self.scope is not scope and not self._refused:  # a request began in this read
                cycle = self.cycle
                if cycle is None or cycle.scope is not self.scope or cycle.more_body:
                    self._began()  # and goes on: counted from the next read
            return
        # a request already going on, or a read larger than the limit: fed in pieces no larger than the
        # limit, so that the bytes of a request in the piece where it began (not counted) are within it
        view = memoryview(data)
        for start in range(0, len(data), limit):
            piece = view[start:start + limit]
            scope, head, rest, cycle = self.scope, self._head, self._rest, self.cycle
            delivered = len(cycle.body) if cycle is not None else 0
            self._feed(piece)
            if self._refused or self.transport.is_closing():
                return
            if self.scope is not scope:
                self._began()
            elif self._head_open():
                self._head = (head or 0) + len(piece)
                if self._head > limit:
                    self._refuse(_too_large(limit))
                    return
            elif self._rest_open():  # its head complete in this piece (rest is None), or before
                if rest is None or self.cycle is not cycle:
                    self._rest = 0
                else:  # the body's own bytes are the app's to bound (413 past TASKBENCH_MAX_BODY_BYTES)
                    self._rest = rest + len(piece) - (len(self.cycle.body) - delivered)
                if self._rest > self._max_rest:
                    self._drop(413, f"chunk framing and trailers larger than {self._max_rest} bytes")
                    return
            else:
                self._head = self._rest = None

    def _began(self) -> None:
        """A request began in the read just fed: count what comes of it from the next read on."""
        self._head = 0 if self._head_open() else None
        self._rest = 0 if self._head is None and self._rest_open() else None

    def on_headers_complete(self) -> None:
        if self._head is not None:  # a head that took more than one read: measured now that it is whole
            self._head = None
            if head_size(self.url, self.headers) > self._max_head:
                raise _too_large(self._max_head)
        if len(self.pipeline) >= MAX_PIPELINED:
            raise _RefusedError(503, f"more than {MAX_PIPELINED} requests pipelined on one connection: send the "
                                "rest again on another")
        super().on_headers_complete()

    def _rest_open(self) -> bool:
        """The current request's head is complete, the rest of it (body, chunk framing, trailers) not:
        httptools keeps every trailer field (uvicorn adds them to the request's headers), so that is
        no less a place to send without end."""
        cycle = self.cycle
        return cycle is not None and cycle.scope is self.scope and cycle.more_body

    def _head_open(self) -> bool:
        """A request's head has begun and is not complete (uvicorn gives each head a new scope, and a
        request cycle holding that scope once the head is complete)."""
        cycle = self.cycle
        return self.scope is not None and (cycle is None or cycle.scope is not self.scope)

    def _feed(self, data: bytes | memoryview) -> None:
        """uvicorn's ``data_received``, with a request refused by a callback answered as such."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _RefusedError):
                self._refuse(exc.__context__)
                return
            msg = "Invalid HTTP request received."
            warn(self.logger, msg)
            self.send_400_response(msg)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def _unsupported_upgrade_warning(self) -> None:
        warn(self.logger, "Unsupported upgrade request.")

    def _refuse(self, refusal: _RefusedError) -> None:
        """Answer ``refusal`` after every answer still due on this connection, then close it."""
        self._refused = True
        self._head = self._rest = None
        warn(self.logger, f"refused with {refusal.status}: {refusal.detail}")
        body = answer(refusal.status, refusal.detail, self.server_state.default_headers)
        last = self.pipeline[0][0] if self.pipeline else self.cycle
        if last is None or last.response_complete:
            self.transport.write(body)
            self.transport.close()
            return

        def after_the_last() -> None:
            if not self.transport.is_closing():
                self.transport.write(body)
            self.transport.close()

        last.on_response = after_the_last

    # -- deadlines ----------------------------------------------------------------------------------

    def expire(self, now: float, bounds: Bounds) -> None:
        """One sweep's look at this connection: note what it waits for, end it once it waited too long."""
        transport = self.transport
        if self._refused or transport.is_closing():
            self._waiting = None
            return
        cycle = self.cycle
        flow = self.flow
        if flow.write_paused:
            what, timeout = "write", bounds.write_timeout
        elif self.timeout_keep_alive_task is None and (cycle is None or cycle.response_complete):
            what, timeout = "head", bounds.header_timeout
        elif cycle is not None and cycle.more_body and not cycle.response_complete and not flow.read_paused:
            what, timeout = "body", bounds.body_timeout
        else:
            self._waiting = None
            return
        waiting = self._waiting
        if waiting is None or waiting[0][0] != what or waiting[0][1] is not cycle:
            self._waiting = ((what, cycle), now)  # first seen in this wait
        elif now - waiting[1] >= timeout:
            self._waiting = None
            self._expired(what, timeout)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle  # uvicorn keeps no reference to it once a later request is parsed
        super()._start_asgi_task(cycle, app)

    def _expired(self, what: str, timeout: float) -> None:
        if what == "write":  # the client reads nothing: closing would wait to flush what it does not read
            self._refused = True
            # the answer waiting to write must see the client gone, or it writes to the dropped
            # connection (uvicorn tells only the last request parsed, which may be a later one)
            if self._running is not None:
                self._running.disconnected = True
            warn(self.logger, f"dropped: the client read no answer for {timeout:g} s")
            self.transport.abort()
        elif what == "body":
            self._drop(408, f"the request body was not complete {timeout:g} s after its headers")
        else:
            self._refused = True
            self.transport.close()

    def _drop(self, status: int, detail: str) -> None:
        """End the request being sent, and its connection: answered ``status`` when its answer has not
        begun (the app reading its body gets a disconnect), else closed without more."""
        self._refused = True
        warn(self.logger, f"dropped with {status}: {detail}")
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and not self.pipeline:
            cycle.keep_alive = False
            self.transport.write(answer(status, detail, self.server_state.default_headers))
        self.transport.close()


#: message -> (when it was last logged, how many times it came since)
_said: dict[str, tuple[float, int]] = {}


def warn(logger: logging.Logger, message: str) -> None:
    """``logger.warning(message)``, at most once every :data:`QUIET` seconds for the same message; the
    next line says how many were held back meanwhile."""
    now = time.monotonic()
    last, held = _said.get(message, (now - QUIET, 0))
    if now - last < QUIET:
        _said[message] = (last, held + 1)
        return
    if len(_said) > 64:  # messages name sizes and limits, so they are few; never a client's text
        _said.clear()
    _said[message] = (now, 0)
    logger.warning("%s%s", message, f" ({held} more in the last {now - last:.0f} s)" if held else "")


def head_size(url: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """The bytes of a request head as parsed: request line and header lines (optional spaces left out)."""
    return len(url) + 20 + sum(len(name) + len(value) + 4 for name, value in headers)


def _too_large(limit: int) -> _RefusedError:
    return _RefusedError(431, f"request line and headers larger than {limit} bytes")


def answer(status: int, detail: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole response written by the protocol itself: the API's JSON ``{"detail"}``, then the close."""
    body = json.dumps({"detail": detail}).encode()
    phrase = http.HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {phrase}".encode()]
    lines += [name + b": " + value for name, value in default_headers]
    lines += [b"content-type: application/json", b"content-length: " + str(len(body)).encode(),
              b"connection: close", b"", body]
    return b"\r\n".join(lines)


def connection_cap(wanted: int, redis_connections: int) -> int:
    """``wanted``, or fewer when the process's file descriptors would run out first: the soft limit is
    raised to the hard one (as Go's runtime does), and the Redis pools (the ledger's and the broker's)
    and a margin keep theirs. A connection refused by the cap is answered; one refused by the kernel
    (EMFILE) is not, and the broker's next connection fails with it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, soft - 2 * redis_connections - 64))


def _bounds() -> Bounds:
    bounds = BoundedHttpProtocol.bounds
    if bounds is None:
        from taskbench.settings import Settings

        found = Settings()
        bounds = BoundedHttpProtocol.bounds = Bounds(
            header_timeout=found.header_timeout, body_timeout=found.body_timeout,
            write_timeout=found.write_timeout, max_header_bytes=found.max_header_bytes,
            max_body_bytes=found.max_body_bytes,
            max_connections=connection_cap(found.max_connections, found.redis_max_connections))
    return bounds


#: the servers' connection sets a sweep already runs for (one per uvicorn server)
_swept: set[int] = set()


def _sweep_started(loop: asyncio.AbstractEventLoop, connections: set[Any], bounds: Bounds) -> None:
    if id(connections) in _swept:
        return
    _swept.add(id(connections))
    every = bounds.every

    def sweep() -> None:
        now = loop.time()
        for conn in list(connections):
            if isinstance(conn, BoundedHttpProtocol):
                conn.expire(now, bounds)
        loop.call_later(every, sweep)

    loop.call_later(every, sweep)
