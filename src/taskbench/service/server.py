"""uvicorn's HTTP protocol with a deadline for a request's headers.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``, 5 s) but not a request whose
headers never complete: a client that opens a connection and sends nothing, or trickles a header a
byte at a time (slowloris), holds its connection for as long as it likes. Here the request line and
headers must be complete ``TASKBENCH_HEADER_TIMEOUT`` seconds (default 10) after the connection
opened, or after the next request began on a keep-alive connection, else the connection is closed.
The body's pace stays unbounded (the body size is; see ``limits.py``): that, a cap on connections
and per-client rates belong to a reverse proxy in front of the API (README, "In production").
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """Each connection notes when the headers it waits for began, and which request cycle it had then:
    uvicorn makes a new one when the headers are complete (plain attributes, no timer per request: a
    timer armed and cancelled for every request cost the API about 1 % of its CPU). One sweep per
    server, every ``timeout / 4`` seconds (at most 1 s), closes the connections whose headers are
    overdue; so a connection is closed between the deadline and a quarter of it later."""

    #: read from Settings once per process (uvicorn's worker processes each read it themselves)
    header_timeout: ClassVar[float | None] = None
    #: loop time at which this connection began to wait for the current request's headers
    _header_since: float = 0.0
    #: uvicorn's request cycle at that moment: while it is still the current one, the headers are pending
    _cycle_before: object = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_since = self.loop.time()
        self._cycle_before = self.cycle
        _sweep_started(self.loop, self.connections, _timeout())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_since = self.loop.time()
        self._cycle_before = self.cycle

    def expire_headers(self, now: float, timeout: float) -> None:
        if self.cycle is self._cycle_before and now - self._header_since >= timeout \
                and not self.transport.is_closing():
            self.transport.close()


def _timeout() -> float:
    timeout = HeaderDeadlineProtocol.header_timeout
    if timeout is None:
        from taskbench.settings import Settings

        timeout = HeaderDeadlineProtocol.header_timeout = Settings().header_timeout
    return timeout


#: the servers' connection sets a sweep already runs for (one per uvicorn server)
_swept: set[int] = set()


def _sweep_started(loop: asyncio.AbstractEventLoop, connections: set[Any], timeout: float) -> None:
    if id(connections) in _swept:
        return
    _swept.add(id(connections))
    every = min(1.0, timeout / 4)

    def sweep() -> None:
        now = loop.time()
        for conn in list(connections):
            if isinstance(conn, HeaderDeadlineProtocol):
                conn.expire_headers(now, timeout)
        loop.call_later(every, sweep)

    loop.call_later(every, sweep)
