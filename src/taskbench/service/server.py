"""uvicorn's HTTP protocol with a deadline for a request's headers.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``, 5 s) but not a request whose
headers never complete: a client that opens a connection and sends nothing, or trickles a header a
byte at a time (slowloris), holds its connection for as long as it likes. Here the request line and
headers must be complete ``TASKBENCH_HEADER_TIMEOUT`` seconds (default 10) after the connection
opened, or after the previous response on a keep-alive connection that has begun to send its next
request, else the connection is closed.
The body's pace stays unbounded (the body size is; see ``limits.py``): that, a cap on connections
and per-client rates belong to a reverse proxy in front of the API (README, "In production").
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """No hook per request (a timer armed and cancelled for every request, then a timestamp taken in
    ``on_message_begin``, each cost the API about 1 % of its CPU): one sweep per server, every
    ``timeout / 4`` seconds (at most 1 s), looks at each connection's state. A connection waits for
    headers when uvicorn has no keep-alive timer on it (it has one while idle between requests) and
    no request in progress (none yet, or the last one answered). Such a connection is closed once the
    sweeps have seen it waiting, after the same request, for ``timeout``: between the deadline and half
    of it later."""

    #: read from Settings once per process (uvicorn's worker processes each read it themselves)
    header_timeout: ClassVar[float | None] = None
    #: (the request cycle it waits after, loop time since when): what the sweeps saw last
    _waiting: tuple[object, float] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._waiting = (None, self.loop.time())  # headers are due from the connection's start
        _sweep_started(self.loop, self.connections, _timeout())

    def expire_headers(self, now: float, timeout: float) -> None:
        cycle = self.cycle
        awaiting = self.timeout_keep_alive_task is None and (cycle is None or cycle.response_complete)
        if not awaiting or self.transport.is_closing():
            self._waiting = None
            return
        if self._waiting is None or self._waiting[0] is not cycle:
            self._waiting = (cycle, now)  # first seen waiting after this request
        elif now - self._waiting[1] >= timeout:
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
