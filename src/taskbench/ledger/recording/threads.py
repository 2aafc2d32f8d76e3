"""The ledger's records made in the library's own thread, for the libraries that run tasks in threads .

Celery (threads pool), Dramatiq and a thread-worker consumer call a task function in a thread of their own. A body
that needs an event loop is handed to the worker's loop and waited for
(:func:`taskbench.backends._worker.blocking_execute`);
a body that does not (a no-op, an ``io/simple`` INCRBY with no delay) runs where the library called it,
the way a synchronous task of these libraries is written, and its record is one blocking round trip on
that thread's own Redis connection: the same packed ``EVALSHA`` of :data:`taskbench.ledger.RECORD` as the
loop's :class:`taskbench.ledger.writer.LedgerWriter` (the task's effect and its record together or not at
all), written with one ``sendall`` and read back by hiredis before the task returns, so the library still
acknowledges a task only once its record is in Redis.

Why: handed to the loop, a record cost Celery's no-op task a hop to the loop, a write, a wake-up of the loop
on the reply and a hop back (75-90 µs of its worker's CPU a task, 5-12 % of its drain rate:
docs/benchmarks.md, "The ledger on no-op tasks"); the blocking round trip costs the thread two system
calls, and the GIL is released while it waits.

A lost connection fails the record (the task raises; the library does not count it run, and a record that
did reach Redis shows as a second execution when the task runs again: never a lost one) and the thread's
next record connects again. A URL this does not speak to (TLS) leaves every body on the loop.

**Confirmed later** (``confirm_later``): the record is written before the task returns and its reply read
later (at the latest when :data:`UNCONFIRMED` of the connection's are unread, all in one read; the rest
when the worker closes), so the thread does not sleep on a round trip a task. Used where waiting protects
nothing (:class:`taskbench.ledger.recording.Recorder` decides): a library that acknowledges nothing once a
task returns (a library that takes a task off Redis with ``BRPOP`` before it runs it never retries it), or a
ledger whose Redis is not the library's broker (the default: taskbench starts one Redis for each), where
the library's acknowledgement cannot reach the ledger's server before the record. The bytes are in the
kernel once ``sendall`` returns, and a worker killed after it cannot take them back (its socket still
delivers them; Redis runs the record). A reply lost with the connection is logged with the task's id (if
Redis did not run the record, the audit counts that task lost); a NOSCRIPT is sent again. Where the ledger
shares the broker's Redis and the library acknowledges, each reply is still waited for. What the record
costs each backend: docs/benchmarks.md, "The ledger on no-op tasks".
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import hiredis
from redis.exceptions import NoScriptError, ResponseError

from taskbench.ledger.core import RECORD
from taskbench.ledger.pipe import address_of, pack, reply_error, where
from taskbench.ledger.writer import (
    CONNECT_ATTEMPTS,
    CONNECT_BACKOFF,
    CONNECT_TIMEOUT,
    LedgerConnectionError,
    RecordCommands,
    check_loaded,
)

if TYPE_CHECKING:
    from taskbench.ledger.core import Ledger

log = logging.getLogger("taskbench.ledger")

#: commands a connection may leave unanswered (``confirm_later``): their replies are then read in one go
UNCONFIRMED = 16
#: bytes read at once from the socket (a reply is a few bytes)
_READ = 65536


class BlockingConnection:
    """One blocking Redis connection (a socket and a hiredis reader) with the record script loaded, used by one
    thread at a time; ``timeout`` bounds the connection's making, not its commands."""

    def __init__(self, address: dict[str, Any], timeout: float) -> None:
        if address.get("path"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(address["path"])
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((address.get("host", "localhost"), int(address.get("port", 6379))),
                                            timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._reader = hiredis.Reader()
        #: the commands sent and not yet answered, with what they were for (``confirm_later`` only)
        self.unconfirmed: list[tuple[bytes, tuple[str, str] | None]] = []
        try:
            password = address.get("password")
            if password is not None:
                user = address.get("username")
                self.call(pack(*(("AUTH", user, password) if user else ("AUTH", password))))
            if address.get("db"):
                self.call(pack("SELECT", int(address["db"])))
            check_loaded(self.call(pack("SCRIPT", "LOAD", RECORD)))
        except BaseException:
            self.close()
            raise
        # connected: a command waits as long as Redis takes, as the loop's records do (the caller bounds it)
        sock.settimeout(None)

    def call(self, command: bytes) -> Any:
        """Send one packed command; its reply (a reply error raises as redis-py's)."""
        self.sock.sendall(command)
        return self.reply()

    def reply(self) -> Any:
        """The next reply, waited for (a reply error raises as redis-py's)."""
        reader = self._reader
        while (reply := reader.gets()) is False:
            data = self.sock.recv(_READ)
            if not data:
                raise ConnectionError("Redis closed the connection")
            reader.feed(data)
        if isinstance(reply, hiredis.ReplyError):
            raise reply_error(str(reply))
        return reply

    def close(self) -> None:
        self.sock.close()


class ThreadRecords:
    """Records (and, with the ledger off, the task's INCRBY) from the calling thread, on a connection of that
    thread's own (see the module's docstring), each answered before it returns or, ``confirm_later``, read
    later with others (a count above one then calls ``repeated`` with the task's workload). Thread-safe;
    :meth:`close` reads what is still unanswered and closes every thread's connection."""

    def __init__(self, ledger: Ledger, address: dict[str, Any], *, confirm_later: bool = False,
                 repeated: Callable[[str], None] = lambda workload: None) -> None:
        self._address = address
        self._commands = RecordCommands(ledger)
        self._local = threading.local()
        self._open: set[BlockingConnection] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._confirm_later = confirm_later
        self._repeated = repeated

    def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
               incr: tuple[str, int] | None = None, workload: str = "") -> int | None:
        """As :meth:`taskbench.ledger.Ledger.record`: how many times this task has run, this one included;
        None when its reply is left to be read later (``confirm_later``: a count above one then calls
        ``repeated(workload)``)."""
        command = self._commands.record(task_id, enqueued_at, started_at, finished_at, incr=incr)
        if self._confirm_later:
            self._send(command, (task_id, workload))
            return None
        try:
            reply = self._call(command)
        except NoScriptError:  # the script was flushed meanwhile: it did not run, so sending again is safe
            self._call(pack("SCRIPT", "LOAD", RECORD))
            reply = self._call(command)
        return int(reply)

    def incrby(self, key: str, amount: int) -> None:
        """The task's own INCRBY, with the ledger off (its reply read later too, with ``confirm_later``)."""
        command = pack("INCRBY", key, amount)
        if self._confirm_later:
            self._send(command, None)
        else:
            self._call(command)

    def close(self) -> None:
        """Read the replies still unread (the library's threads are done by now), then close every connection."""
        with self._lock:
            self._closed = True
            connections, self._open = self._open, set()
        for connection in connections:
            if connection.unconfirmed:
                with contextlib.suppress(OSError):
                    connection.sock.settimeout(CONNECT_TIMEOUT)
                self._confirm(connection)
            connection.close()

    def _send(self, command: bytes, what: tuple[str, str] | None) -> None:
        """Write ``command`` and return without its reply. Once :data:`UNCONFIRMED` commands of the connection
        are unanswered, their replies are read first (they came long ago: one read, no wait). A write that
        fails raises, as a record does when its reply is lost."""
        connection: BlockingConnection | None = getattr(self._local, "connection", None)
        if connection is not None and len(connection.unconfirmed) >= UNCONFIRMED:
            self._confirm(connection)
            connection = getattr(self._local, "connection", None)  # None if those replies' connection was lost
        if connection is None:
            connection = self._connect()
        try:
            connection.sock.sendall(command)
        except OSError as exc:
            self._drop(connection)
            raise LedgerConnectionError(f"ledger connection: {exc!r}") from exc
        connection.unconfirmed.append((command, what))

    def _confirm(self, connection: BlockingConnection) -> None:
        """Read the replies of ``connection``'s unanswered commands, in the order sent. A NOSCRIPT (the script
        flushed meanwhile: that record did not run) is sent again once they are read, and waited for; a lost
        connection or another error is logged with the task's id, whose record may then be missing: the audit
        counts that task lost, never more, and the log says why."""
        waiting, connection.unconfirmed = collections.deque(connection.unconfirmed), []
        again: collections.deque[tuple[bytes, tuple[str, str] | None]] = collections.deque()
        runs: list[tuple[Any, tuple[str, str] | None]] = []
        try:
            while waiting:
                try:
                    runs.append((connection.reply(), waiting[0][1]))
                except NoScriptError:
                    again.append(waiting[0])
                waiting.popleft()
            if again:
                connection.call(pack("SCRIPT", "LOAD", RECORD))
            while again:
                runs.append((connection.call(again[0][0]), again[0][1]))
                again.popleft()
        except (OSError, ConnectionError, ResponseError) as exc:
            self._drop(connection)
            for item in (*waiting, *again):
                _unconfirmed(item, exc)
        for reply, what in runs:
            if what is not None and int(reply) > 1:
                self._repeated(what[1])

    def _call(self, command: bytes) -> Any:
        connection: BlockingConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
        try:
            return connection.call(command)
        except (OSError, ConnectionError) as exc:  # the reply is lost with the connection: the caller raises
            self._drop(connection)
            raise LedgerConnectionError(f"ledger connection: {exc!r}") from exc

    def _connect(self) -> BlockingConnection:
        delay = CONNECT_BACKOFF
        for attempt in range(CONNECT_ATTEMPTS):
            if self._closed:
                raise LedgerConnectionError("the ledger's thread connections are closed")
            try:
                connection = BlockingConnection(self._address, CONNECT_TIMEOUT)
                break
            except (OSError, ConnectionError, ResponseError) as exc:  # ResponseError: AUTH or SELECT refused
                if attempt == CONNECT_ATTEMPTS - 1:
                    raise LedgerConnectionError(f"cannot connect to the ledger's Redis at {where(self._address)}: "
                                                f"{exc!r}") from exc
                time.sleep(delay)
                delay *= 2
        with self._lock:
            self._open.add(connection)
        self._local.connection = connection
        return connection

    def _drop(self, connection: BlockingConnection) -> None:
        if getattr(self._local, "connection", None) is connection:
            self._local.connection = None
        with self._lock:
            self._open.discard(connection)
        connection.close()


def _unconfirmed(sent: tuple[bytes, tuple[str, str] | None], exc: BaseException) -> None:
    what = f"the record of task {sent[1][0]}" if sent[1] else "a task's INCRBY"
    log.error("ledger: %s was sent and its reply lost (%r): if Redis did not run it, the audit counts the task "
              "lost", what, exc)


def thread_records_for(ledger: Ledger, redis_url: str, *, confirm_later: bool = False,
                       repeated: Callable[[str], None] = lambda workload: None) -> ThreadRecords | None:
    """Records from threads for the Redis at ``redis_url`` (``confirm_later``: see :class:`ThreadRecords`);
    None for one this does not speak to (TLS)."""
    address = address_of(redis_url)
    return None if address is None else ThreadRecords(ledger, address, confirm_later=confirm_later,
                                                      repeated=repeated)


__all__ = ["BlockingConnection", "ThreadRecords", "thread_records_for"]
