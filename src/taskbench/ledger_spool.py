"""The ledger's records from a library's threads, spooled to a file the harness keeps (issue 33).

Where a record's reply protects nothing (:func:`taskbench.backends._worker.blocking_execute`: Huey, which
acknowledges nothing once a task returns, and Celery's threads pool, Dramatiq and Huey whenever the
ledger's Redis is not their broker), :mod:`taskbench.ledger_thread` wrote each record to Redis before the
task returned and read the reply later. On a machine where a write that wakes a sleeping Redis costs the
writer 30-40 µs of CPU, that one wake-up a task was still 7-11 % of a no-op drain (docs/benchmarks.md).

Here a record is one ``write`` of a line to a file of the worker's own (``O_APPEND``, under the folder the
harness names with ``TASKBENCH_LEDGER_SPOOL``), about 1 µs that wakes no one, and a thread of the worker
(:class:`SpoolRecords`) forwards the lines written since its last batch to Redis a few milliseconds later,
all in one ``EVALSHA`` of :data:`BATCH`. Why no execution the library acknowledged goes unrecorded, and
none is counted twice:

* **A worker killed at any moment.** The line is in the kernel's page cache once ``write`` returned, before
  the task returns and so before the library acknowledges it; a SIGKILL does not take it back. The worker
  holds an exclusive ``flock`` on its file while it lives; the kernel drops it with the process, and the
  harness (:class:`SpoolKeeper`, a thread of the process that started the worker) forwards what a file whose
  lock is free still holds, every :data:`KEEP_INTERVAL` s and once more when the stack stops, before any
  audit reads the ledger for good. A line cut short by the kill (no newline) was never a record: its task
  had not returned.
* **Each line once.** :data:`BATCH` runs every record of a batch and moves the file's offset
  (``P ledger:spool``, by file name) in one script, so Redis holds both or neither; it runs only if the offset
  in Redis is the one the batch starts from (else it answers ``SPOOLAT <offset>`` and the sender goes on from
  there). A reply lost with the connection, the harness and a worker: whoever forwards a line second finds
  it forwarded.
* **The same order as before.** A record reaches Redis a few milliseconds after its task returned, as with
  replies confirmed later; where the library's acknowledgement goes to the ledger's own Redis and matters
  (a Redis that is both, with Celery or Dramatiq) nothing is spooled: each reply is waited for.

A worker that the harness did not start (no ``TASKBENCH_LEDGER_SPOOL``: a user's own deployment, another
node) has nobody to recover its file after a kill, and records as :mod:`taskbench.ledger_thread` does.
With the ledger off nothing is spooled: ``io/simple``'s INCRBY is the task's effect, not a record.

The file's first line says where its records go (the ledger's Redis URL and keys) so that the harness can
forward it without knowing the run; the folder is the harness's own (mode 0700, removed with the stack). A
forwarded stretch is given back to the memory (``FALLOC_FL_PUNCH_HOLE``) every :data:`PUNCH` bytes, so a
soak's file does not grow in RAM.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import NoScriptError, ResponseError

from taskbench.ledger_thread import BlockingConnection, ThreadRecords
from taskbench.ledger_writer import CONNECT_TIMEOUT
from taskbench.redis_pipe import address_of, pack, where

if TYPE_CHECKING:
    from taskbench.ledger import Ledger

log = logging.getLogger("taskbench.ledger")

#: the variable that names the spool folder (set by the harness: :func:`spool_env`)
SPOOL_ENV: Final = "TASKBENCH_LEDGER_SPOOL"
#: KEYS: count hash, times hash, offsets hash, the tasks' counter; ARGV: the file's name, the offset the batch
#: starts at, the offset after it, then per record its task id, times, and increment ('' for none)
BATCH: Final = """
local at = redis.call('HGET', KEYS[3], ARGV[1]) or '0'
if at ~= ARGV[2] then return redis.error_reply('SPOOLAT ' .. at) end
local runs = {}
for i = 4, #ARGV, 3 do
  if ARGV[i + 2] ~= '' then redis.call('INCRBY', KEYS[4], ARGV[i + 2]) end
  runs[#runs + 1] = redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return runs
"""
BATCH_SHA: Final = hashlib.sha1(BATCH.encode(), usedforsecurity=False).hexdigest()
#: seconds a worker's first record waits for others before the batch leaves (one wake-up of Redis for all)
HOLD: Final = 0.004
#: most records in one script (a long file, recovered, goes in several)
MOST: Final = 2000
#: seconds between two looks of the harness at the folder for files whose worker is gone
KEEP_INTERVAL: Final = 0.2
#: forwarded bytes given back to the memory at once
PUNCH: Final = 8 << 20
_SUFFIX: Final = ".spool"
_READ: Final = 1 << 20
#: characters a task id may not hold to be spooled (the line's separators)
_SEPARATORS: Final = frozenset("\t\n\r")


class SpoolError(RuntimeError):
    """A spool file that cannot be read or forwarded."""


class _Target:
    """Where a spool file's records go: the ledger's Redis and keys (the file's first line)."""

    def __init__(self, redis_url: str, count_key: str, times_key: str, counter_key: str, prefix: str) -> None:
        self.redis_url = redis_url
        self.count_key = count_key
        self.times_key = times_key
        self.counter_key = counter_key
        self.offsets_key = f"{prefix}ledger:spool"
        self.prefix = prefix

    def header(self) -> bytes:
        return json.dumps({"spool": 1, "redis_url": self.redis_url, "prefix": self.prefix,
                           "count": self.count_key, "times": self.times_key,
                           "counter": self.counter_key}).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> _Target:
        try:
            found = json.loads(line)
            return cls(str(found["redis_url"]), str(found["count"]), str(found["times"]), str(found["counter"]),
                       str(found["prefix"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SpoolError(f"not a spool header: {line[:200]!r}") from exc


class _Forwarder:
    """Sends a spool file's lines to Redis in :data:`BATCH` scripts, on a blocking connection of its own."""

    def __init__(self, target: _Target, name: str) -> None:
        self.target = target
        self.name = name
        self._connection: BlockingConnection | None = None
        # the command's arguments that are the same for every batch of the file (its count is the batch's)
        self._args = pack("EVALSHA", BATCH_SHA, 4, target.count_key, target.times_key, target.offsets_key,
                          target.counter_key, name, count=0)[len(b"*0\r\n"):]

    def forward(self, lines: list[bytes], start: int, end: int) -> list[tuple[int, bytes]]:
        """Run ``lines`` (the file's bytes ``start`` to ``end``) as one batch: each record's count and its
        workload mark. Raises :class:`_MovedError` when Redis's offset for the file is not ``start``."""
        fields: list[bytes] = []
        marks: list[bytes] = []
        for line in lines:
            parts = line.split(b"\t")
            if len(parts) != 4:
                raise SpoolError(f"{self.name}: a line that is not a record: {line[:200]!r}")
            fields += parts[:3]
            marks.append(parts[3])
        tail = (b"%d" % start, b"%d" % end, *fields)
        command = b"".join((b"*%d\r\n" % (8 + len(tail)), self._args,
                            *(b"$%d\r\n%s\r\n" % (len(item), item) for item in tail)))
        try:
            reply = self._call(command)
        except NoScriptError:  # flushed or a Redis restarted empty: it did not run
            self._call(pack("SCRIPT", "LOAD", BATCH))
            reply = self._call(command)
        except ResponseError as exc:
            text = str(exc)
            if text.startswith("SPOOLAT "):
                raise _MovedError(int(text.split()[1])) from None
            raise
        return list(zip((int(count) for count in reply), marks, strict=True))

    def _call(self, command: bytes) -> Any:
        connection = self._connection
        if connection is None:
            address = address_of(self.target.redis_url)
            if address is None:
                raise SpoolError(f"the spool cannot speak to {self.target.redis_url!r}")
            connection = self._connection = BlockingConnection(address, CONNECT_TIMEOUT)
            connection.call(pack("SCRIPT", "LOAD", BATCH))
        try:
            return connection.call(command)
        except (OSError, ConnectionError):
            self.close()
            raise

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class _MovedError(Exception):
    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class _File:
    """A spool file read from its last forwarded record on (the worker's own, or one the harness recovers). Its
    offsets count the bytes of records, its header line left out (0: none forwarded, as for Redis)."""

    def __init__(self, path: Path, fd: int, target: _Target, base: int) -> None:
        self.path = path
        self.fd = fd
        self.target = target
        self.base = base  # the header line's length
        self.offset = 0  # bytes of records forwarded
        self.forwarder = _Forwarder(target, path.name)
        #: a descriptor that may write the file (the worker's): forwarded bytes are given back through it
        self.punch_fd: int | None = None
        self._punched = 0

    def pending(self) -> int:
        return os.fstat(self.fd).st_size - self.base - self.offset

    def step(self, on_runs: Callable[[list[tuple[int, bytes]]], None] | None = None) -> int | None:
        """Forward up to :data:`MOST` whole lines past the offset: the records sent, or None when there is
        no whole line left."""
        data = os.pread(self.fd, _READ, self.base + self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return None
        lines = data[:end].split(b"\n")[:MOST]
        size = sum(len(line) + 1 for line in lines)
        try:
            runs = self.forwarder.forward(lines, self.offset, self.offset + size)
        except _MovedError as moved:  # forwarded already (a reply lost, or the harness did it): go on from there
            if moved.offset < self.offset:
                log.error("ledger spool %s: Redis holds offset %d, behind %d: its records were lost there; sent "
                          "again", self.path.name, moved.offset, self.offset)
            self.offset = max(0, min(moved.offset, os.fstat(self.fd).st_size - self.base))
            return 0
        self.offset += size
        if on_runs is not None:
            on_runs(runs)
        if self.punch_fd is not None and self.base + self.offset - self._punched >= PUNCH:
            self._punched = _punch(self.punch_fd, self._punched, (self.base + self.offset) & ~4095)
        return len(lines)

    def forward_all(self, on_runs: Callable[[list[tuple[int, bytes]]], None] | None = None,
                    deadline: float | None = None) -> int:
        """Forward every whole line (until ``deadline``, a monotonic time, if given): the records sent."""
        sent = 0
        while (step := self.step(on_runs)) is not None:
            sent += step
            if deadline is not None and time.monotonic() > deadline:
                break
        return sent

    def close(self) -> None:
        self.forwarder.close()
        os.close(self.fd)


def _open(path: Path) -> _File:
    """A spool file whose header is whole, read from its first record (Redis's offset corrects that)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 65536, 0)
        end = head.find(b"\n")
        if end < 0:
            raise SpoolError(f"{path.name}: a spool file without its header line")
        return _File(path, fd, _Target.parse(head[:end]), end + 1)
    except BaseException:
        os.close(fd)
        raise


class SpoolRecords:
    """A worker's records from its library's threads, each one line written to its spool file and forwarded
    by a thread of its own (see the module's docstring): the interface of
    :class:`taskbench.ledger_thread.ThreadRecords` (whose ``fallback`` takes what is not spooled: the ledger
    off's INCRBY, a task id holding a separator)."""

    def __init__(self, ledger: Ledger, redis_url: str, counter_key: str, folder: Path, *, fallback: ThreadRecords,
                 repeated: Callable[[str], None] = lambda workload: None) -> None:
        self._fallback = fallback
        self._repeated = repeated
        name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}{_SUFFIX}"
        self.path = folder / name
        fresh = folder / f".{name}.new"  # out of the harness's sight until its header is whole and locked
        target = _Target(redis_url, ledger.count_key, ledger.times_key, counter_key, ledger.prefix)
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the harness leaves a locked file alone
            os.write(fd, target.header())
            os.rename(fresh, self.path)
        except BaseException:
            os.close(fd)
            fresh.unlink(missing_ok=True)
            raise
        self._fd = fd
        self._file = _open(self.path)
        self._file.punch_fd = fd
        self._wake = threading.Event()
        self._pending = False
        self._stopping = False
        self._thread = threading.Thread(target=self._relay, name="ledger-spool", daemon=True)
        self._thread.start()

    def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
               incr: tuple[str, int] | None = None, workload: str = "") -> int | None:
        """Write the record's line; None (its count is read later: above one, ``repeated(workload)``)."""
        if not _SEPARATORS.isdisjoint(task_id) or not _SEPARATORS.isdisjoint(workload):
            result: int | None = self._fallback.record(task_id, enqueued_at, started_at, finished_at, incr=incr,
                                                       workload=workload)
            return result
        os.write(self._fd, b"%s\t%.6f %.6f %.6f\t%s\t%s\n" % (
            task_id.encode(), enqueued_at, started_at, finished_at, b"%d" % incr[1] if incr else b"",
            workload.encode()))
        if not self._pending:
            self._pending = True
            self._wake.set()
        return None

    def incrby(self, key: str, amount: int) -> None:
        self._fallback.incrby(key, amount)

    def close(self) -> None:
        """Forward every line (the library's threads are done by now), stop the thread, remove the file; one
        not forwarded (Redis unreachable) is left for the harness, with a log line."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=2 * CONNECT_TIMEOUT + 5)
        with contextlib.suppress(Exception):
            self._file.forward_all(self._runs, time.monotonic() + CONNECT_TIMEOUT)
        if self._file.pending() == 0:
            self.path.unlink(missing_ok=True)
        else:
            log.error("ledger spool %s: records not forwarded at exit; the harness forwards them", self.path)
        self._file.close()
        os.close(self._fd)  # the lock goes with it
        self._fallback.close()

    def _relay(self) -> None:
        spool = self._file
        delay = 0.05
        while True:
            self._wake.wait()
            if not self._stopping:
                time.sleep(HOLD)
            # cleared before the flag: a record written after the flag went down wakes the next round
            self._wake.clear()
            self._pending = False
            try:
                spool.forward_all(self._runs)
                delay = 0.05
            except Exception as exc:  # the lines stay in the file: sent again once Redis answers
                log.error("ledger spool %s: forwarding to the ledger's Redis at %s failed (%r); trying again",
                          self.path.name, where(address_of(spool.target.redis_url) or {}), exc)
                if self._stopping:
                    return
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                self._wake.set()
                continue
            if self._stopping:
                return

    def _runs(self, runs: list[tuple[int, bytes]]) -> None:
        for count, mark in runs:
            if count > 1:
                self._repeated(mark.decode())


class SpoolKeeper:
    """The harness's side: a folder for its workers' spool files (:func:`spool_env` names it to them), and a
    thread that forwards what the file of a worker gone (its lock free) still holds. :meth:`close` (once the
    workers are stopped) forwards the rest and removes the folder."""

    def __init__(self, parent: str | None = None) -> None:
        # a private folder (0700) under the temporary one (TMPDIR): a line is a page-cache write, never synced
        self.folder = Path(tempfile.mkdtemp(prefix="taskbench-spool-", dir=parent))
        self.forwarded = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._keep, name="ledger-spool-keeper", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        return {SPOOL_ENV: str(self.folder)}

    def sweep(self, *, final: bool = False) -> int:
        """Forward the whole lines of every file whose worker is gone; the records forwarded."""
        sent = 0
        with self._lock:
            for path in sorted(self.folder.glob(f"*{_SUFFIX}")):
                try:
                    sent += self._recover(path, final=final)
                except FileNotFoundError:  # its worker removed it, done
                    continue
                except Exception as exc:  # kept for the next sweep; the audit then counts its tasks lost
                    log.error("ledger spool %s: cannot forward (%r)", path.name, exc)
            self.forwarded += sent
        return sent

    def _recover(self, path: Path, *, final: bool) -> int:
        lock = os.open(path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # its worker lives and forwards it
            try:
                spool = _open(path)
            except SpoolError:  # killed before its header was whole: it holds no record
                path.unlink(missing_ok=True)
                return 0
            try:
                sent = spool.forward_all()
                if spool.pending() and final:
                    log.warning("ledger spool %s: %d bytes of a line cut by the worker's end (no record: its task "
                                "had not returned)", path.name, spool.pending())
                if not spool.pending() or final:
                    path.unlink(missing_ok=True)
                if sent:
                    log.info("ledger spool %s: %d records of a stopped worker forwarded", path.name, sent)
                return sent
            finally:
                spool.close()
        finally:
            os.close(lock)

    def _keep(self) -> None:
        while not self._stop.wait(KEEP_INTERVAL):
            self.sweep()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * CONNECT_TIMEOUT + 5)
        try:
            self.sweep(final=True)
        finally:
            left = list(self.folder.glob(f"*{_SUFFIX}"))
            if left:
                log.error("ledger spool: %s not forwarded, kept in %s", ", ".join(p.name for p in left), self.folder)
            else:
                with contextlib.suppress(OSError):
                    self.folder.rmdir()


_libc: Any = None


def _punch(fd: int, start: int, end: int) -> int:
    """Give the bytes ``start`` to ``end`` of the file open for writing as ``fd`` back to the memory (their
    offsets stay); where the next punch starts."""
    global _libc
    if end <= start:
        return start
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        if _libc.fallocate(fd, 0x02 | 0x01, ctypes.c_long(start), ctypes.c_long(end - start)) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
            log.warning("ledger spool: could not give forwarded bytes back (%r)", exc)
        return end  # not again for the next PUNCH bytes
    return end


def spool_records(ledger: Ledger, redis_url: str, counter_key: str, folder: str, *, fallback: ThreadRecords,
                  repeated: Callable[[str], None]) -> SpoolRecords | ThreadRecords:
    """Spooled records in ``folder`` (the harness's, from ``TASKBENCH_LEDGER_SPOOL``), or ``fallback`` when the
    folder cannot take a file (logged)."""
    try:
        return SpoolRecords(ledger, redis_url, counter_key, Path(folder), fallback=fallback, repeated=repeated)
    except OSError as exc:
        log.warning("ledger spool: cannot write in %s (%r): records are sent from the threads", folder, exc)
        return fallback


__all__ = ["BATCH", "BATCH_SHA", "SPOOL_ENV", "SpoolError", "SpoolKeeper", "SpoolRecords", "spool_records"]
