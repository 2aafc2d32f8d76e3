"""The worker's ledger records over a Redis connection of their own, pipelined .

Each record is still one EVALSHA of :data:`taskbench.ledger.RECORD` (the task's effect and its record
together or not at all), and each task still waits for its own record's reply before it returns, so
the library acknowledges a task only once its record is in Redis. What changes is the way there:
redis-py's asyncio client takes a connection from its pool, builds the command and parses the reply in
Python, about 60 µs of a worker's CPU per record, a quarter of a no-op task. Here the command is packed
once per process but for the task's own fields, and the records go on a connection that nobody else
uses, written as a group commit (:mod:`taskbench.ledger.pipe`, which the API's task-id claims use too):
one write serves every record made while the one before was unanswered, and the replies, read in the
order sent, resolve the tasks' futures. A batch waits up to :data:`HOLD_TURNS` turns of the loop for
the records of the worker's other running tasks, and leaves at once when it holds as many records as
the worker runs tasks at once: with no hold, each of Taskiq's and FastStream's no-op tasks paid a write
and a read of its own, 7 % of their drain rate (docs/benchmarks.md, "The ledger on no-op tasks"). A
worker whose library hands each task from a thread of its own to the loop (Celery, Dramatiq, a thread-worker consumer:
:func:`taskbench.backends._worker.blocking_execute`) has no other task on the loop to wait for: its
batches do not wait (:meth:`LedgerWriter.set_hold` 0; a thread-pool worker's no-op drain 0.947 -> 0.957-0.963 paired).
Those libraries' bodies that need no loop do not come here at all: they run and record in the library's
thread (:mod:`taskbench.ledger.recording.threads`).

A lost connection fails the records waiting for a reply (their tasks raise, the library does not
acknowledge them, so a record that did reach Redis shows as a second execution when the task runs
again: never a lost one); the next record connects again. A URL this writer cannot speak to (TLS) is
left to redis-py: :func:`writer_for` returns None.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError

from taskbench.ledger.core import RECORD, RECORD_SHA
from taskbench.ledger.pipe import PipeConnectionError, RedisPipe, Send, address_of, pack

if TYPE_CHECKING:
    from taskbench.ledger.core import Ledger

log = logging.getLogger("taskbench.ledger")

#: connection attempts before a record fails, and the pause after the first failed one (doubling)
CONNECT_ATTEMPTS = 5
CONNECT_BACKOFF = 0.05
#: seconds one attempt (connect, AUTH, SELECT, SCRIPT LOAD) may take
CONNECT_TIMEOUT = 10.0
#: loop turns a batch of records waits for more before it is written (see the module's docstring)
HOLD_TURNS = 10


class LedgerConnectionError(PipeConnectionError):
    """The ledger's connection was lost or could not be made."""


class LedgerWriter:
    """Writes one process's execution records (see the module's docstring) on a
    :class:`taskbench.ledger.pipe.RedisPipe` of its own; an async context manager.

    Use it from the event loop it was opened on only."""

    def __init__(self, ledger: Ledger, address: dict[str, Any], *, concurrency: int = 0) -> None:
        self._pipe = RedisPipe(address, on_connect=_load_script, attempts=CONNECT_ATTEMPTS,
                               timeout=CONNECT_TIMEOUT, backoff=CONNECT_BACKOFF, hold=HOLD_TURNS,
                               batch=concurrency)
        self._commands = RecordCommands(ledger)

    def set_hold(self, turns: int) -> None:
        """The loop turns a batch of records waits for more (:data:`HOLD_TURNS` until changed)."""
        self._pipe.set_hold(turns)

    async def __aenter__(self) -> LedgerWriter:
        try:
            await self._pipe.connect()
        except PipeConnectionError as exc:
            raise LedgerConnectionError(f"cannot connect to the ledger's Redis: {exc}") from exc
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._pipe.aclose()
        commands, writes = self.stats()
        if writes:
            log.info("ledger: %d records in %d writes (%.1f a write)", commands, writes, commands / writes)

    def stats(self) -> tuple[int, int]:
        """Commands sent (the SCRIPT LOADs and the records) and writes made: commands / writes is the
        mean batch."""
        return self._pipe.stats()

    async def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
                     incr: tuple[str, int] | None = None) -> int:
        """As :meth:`taskbench.ledger.Ledger.record`: how many times this task has run, this one included."""
        command = self._commands.record(task_id, enqueued_at, started_at, finished_at, incr=incr)
        try:
            reply = await self._pipe.submit_packed(command)  # a future, not a coroutine: one frame less
        except NoScriptError:
            # the script was flushed meanwhile: NOSCRIPT means it did not run, so sending again is safe
            await _load_script(self._pipe.submit)
            reply = await self._pipe.submit_packed(command)
        except PipeConnectionError as exc:
            raise LedgerConnectionError(f"ledger connection: {exc}") from exc
        return int(reply)


    def submit(self, *args: str) -> asyncio.Future[Any]:
        """One more command on the records' connection (a start record), in their next batch: its reply's future
        (a :class:`PipeConnectionError` when the connection is lost)."""
        return self._pipe.submit(*args)


class RecordCommands:
    """A record's ``EVALSHA`` of :data:`taskbench.ledger.RECORD`, packed: the part that is the same for every
    task once, the task's own fields per call (a few µs a task less than packing it all)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._plain = pack("EVALSHA", RECORD_SHA, 2, ledger.count_key, ledger.times_key, count=7)
        self._with_incr: dict[str, bytes] = {}

    def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
               incr: tuple[str, int] | None = None) -> bytes:
        # the times as Ledger.record writes them ("%.6f" is f"{x:.6f}")
        times = b"%.6f %.6f %.6f" % (enqueued_at, started_at, finished_at)
        key = task_id.encode()
        if incr is None:
            return b"%s$%d\r\n%s\r\n$%d\r\n%s\r\n" % (self._plain, len(key), key, len(times), times)
        head = self._with_incr.get(incr[0])
        if head is None:
            ledger = self.ledger
            head = self._with_incr[incr[0]] = pack("EVALSHA", RECORD_SHA, 3, ledger.count_key, ledger.times_key,
                                                  incr[0], count=9)
        amount = b"%d" % incr[1]
        return b"%s$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
            head, len(key), key, len(times), times, len(amount), amount)


async def _load_script(send: Send) -> None:
    check_loaded(await send("SCRIPT", "LOAD", RECORD))


def check_loaded(sha: bytes | str) -> None:
    """Raise unless ``sha``, the reply to ``SCRIPT LOAD`` of the record script, is its SHA1."""
    if (sha.decode() if isinstance(sha, bytes) else sha) != RECORD_SHA:
        raise LedgerConnectionError(f"SCRIPT LOAD answered {sha!r}, not the record script's SHA1")


def writer_for(ledger: Ledger, redis_url: str, *, concurrency: int = 0) -> LedgerWriter | None:
    """A writer for the Redis at ``redis_url`` for a worker that runs ``concurrency`` tasks at once (a batch
    that big leaves at once; 0: no bound); None for a Redis it does not speak to (TLS), which redis-py
    then serves as before."""
    address = address_of(redis_url)
    return None if address is None else LedgerWriter(ledger, address, concurrency=concurrency)
