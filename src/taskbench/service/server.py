"""uvicorn's HTTP protocol with a deadline for a request's headers.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``, 5 s) but not a request whose
headers never complete: a client that opens a connection and sends nothing, or trickles a header a
byte at a time (slowloris), holds its connection for as long as it likes. Here the request line and
headers must be complete ``TASKBENCH_HEADER_TIMEOUT`` seconds (default 10) after the connection
opened, or after the previous response on a keep-alive connection, else the connection is closed.
The body's pace stays unbounded (the body size is; see ``limits.py``): that, a cap on connections
and per-client rates belong to a reverse proxy in front of the API (README, "In production").
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    #: read from Settings once per process (uvicorn's worker processes each read it themselves)
    header_timeout: ClassVar[float | None] = None
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:  # a later request on a keep-alive connection
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        timeout = type(self).header_timeout
        if timeout is None:
            from taskbench.settings import Settings

            timeout = type(self).header_timeout = Settings().header_timeout
        self._header_timer = self.loop.call_later(timeout, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()
