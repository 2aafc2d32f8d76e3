"""The ledger's records from a library's threads, spooled to memory the harness can read (issue 33).

Where a record's reply protects nothing (:func:`taskbench.backends._worker.blocking_execute`: Huey, which
acknowledges nothing once a task returns, and Celery's threads pool, Dramatiq and Huey whenever the
ledger's Redis is not their broker), :mod:`taskbench.ledger_thread` wrote each record to Redis before the
task returned and read the reply later. That write cost a no-op task 25-40 µs of its worker's CPU, 7-11 %
of its drain (docs/benchmarks.md): less for the system call itself than for the interpreter's lock, which a
system call gives up and which the library's other threads then take in turn.

Here a record is a store into a shared memory map of a file of the worker's own (under the folder the
harness names with ``TASKBENCH_LEDGER_SPOOL``): one slot of :data:`SLOT` bytes, its fields (the times and the
increment as doubles, :data:`FIELDS`), task id and workload first and its ready mark last, about 1.5 µs with
no system call and the lock kept. A thread of the worker (:class:`SpoolRecords`) forwards the ready slots
every :data:`HOLD` s while records come, all in one ``EVALSHA`` of :data:`BATCH`, which is given the slots'
bytes as they are and reads each record itself (Redis's Lua ``struct``): the worker's reader finds the ready
slots from their marks, every :data:`SLOT`-th byte, and never looks at a record (0.3 µs a record). Why no
execution the library acknowledged goes unrecorded, and none is counted twice:

* **A worker killed at any moment.** The slot is in the kernel's page cache once stored, before the task
  returns and so before the library acknowledges it; a SIGKILL does not take it back. The worker holds an
  exclusive ``flock`` on each of its files while it lives; the kernel drops it with the process, and the
  harness (:class:`taskbench.harness.processes.spool_keeper.SpoolKeeper`, in the process that started the
  worker) forwards the ready slots of a file whose lock is free, at once when it stops or kills a process,
  every 0.2 s, and once more when the stack stops. A slot without its mark (a kill between the record and
  the mark) was never a record: its task had not returned.
* **Each record once.** :data:`BATCH` runs every record of a batch and moves the file's offset
  (``P ledger:spool``, by file name) in one script, so Redis holds both or neither; it runs only if the offset
  in Redis is the one the batch starts from (else it answers ``SPOOLAT <offset>`` and the sender goes on from
  there). A reply lost with the connection, the harness and a worker: whoever forwards a slot second finds
  it forwarded.
* **The same order as before.** A record reaches Redis a few milliseconds after its task returned, as with
  replies confirmed later; where the library's acknowledgement goes to the ledger's own Redis and matters
  (a Redis that is both, with Celery or Dramatiq) nothing is spooled: each reply is waited for.

A worker that the harness did not start (no ``TASKBENCH_LEDGER_SPOOL``: a user's own deployment, another
node) has nobody to recover its file after a kill, and records as :mod:`taskbench.ledger_thread` does.
With the ledger off nothing is spooled: ``io/simple``'s INCRBY is the task's effect, not a record.

A file holds :data:`SLOTS` records after a header page that says where they go (the ledger's Redis URL and
keys), so that the harness forwards it without knowing the run; a full one is removed once forwarded and the
next one made. The folder is the harness's own (mode 0700, in ``/dev/shm`` where there is one: memory the
kernel never writes back to a disk; removed with the stack).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import mmap
import os
import struct
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import NoScriptError, ResponseError

from taskbench.ledger_thread import BlockingConnection, ThreadRecords
from taskbench.ledger_writer import CONNECT_TIMEOUT
from taskbench.redaction import redact
from taskbench.redis_pipe import address_of, pack, where

if TYPE_CHECKING:
    from taskbench.ledger import Ledger

log = logging.getLogger("taskbench.ledger")

#: the variable that names the spool folder (set by the harness: ``harness.processes.spool_keeper``)
SPOOL_ENV: Final = "TASKBENCH_LEDGER_SPOOL"
#: bytes of a record's slot: its ready mark, then its fields (:data:`FIELDS`), task id and workload
SLOT: Final = 256
#: a slot's fixed fields after its mark: the three times and the increment (doubles), whether there is an
#: increment, the lengths of the task id and of the workload
FIELDS: Final = struct.Struct("<ddddBBB")
#: where a slot's task id starts
HEAD: Final = 1 + FIELDS.size
#: the mark a slot's writer stores last ("R")
READY: Final = 0x52
#: KEYS: count hash, times hash, offsets hash, the tasks' counter; ARGV: the file's name, the slot the batch
#: starts at, the slot after it, then the slots' bytes as they are in the file. The script reads each slot
#: (Redis's Lua ``struct``), so the worker's reader sends a slice of its map without a look at a record; a slot
#: without its mark is skipped (a hole the harness forwards past). Returns the workload of each record whose
#: count went above one.
BATCH: Final = """
local at = redis.call('HGET', KEYS[3], ARGV[1]) or '0'
if at ~= ARGV[2] then return redis.error_reply('SPOOLAT ' .. at) end
local slots = ARGV[4]
local repeats = {}
for base = 1, #slots, {slot} do
  if string.byte(slots, base) == {ready} then
    local enqueued, started, finished, amount, has, idlen, wlen, p = struct.unpack('<ddddBBB', slots, base + 1)
    local id = string.sub(slots, p, p + idlen - 1)
    if has == 1 then redis.call('INCRBY', KEYS[4], string.format('%d', amount)) end
    local runs = redis.call('HINCRBY', KEYS[1], id, 1)
    redis.call('HSET', KEYS[2], id, string.format('%.6f %.6f %.6f', enqueued, started, finished))
    if runs > 1 then repeats[#repeats + 1] = string.sub(slots, p + idlen, p + idlen + wlen - 1) end
  end
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return repeats
""".replace("{slot}", str(SLOT)).replace("{ready}", str(READY))
BATCH_SHA: Final = hashlib.sha1(BATCH.encode(), usedforsecurity=False).hexdigest()
#: bytes of a file's header (its first line says where its records go)
HEADER: Final = 4096
#: records a file holds (16 MiB)
SLOTS: Final = 65536
#: seconds between two batches of a worker while records come: each round costs the worker a wake-up of its
#: thread, the interpreter's lock taken from the library's threads and given back, and a round trip (at
#: 5 ms, 7 % of a no-op Huey worker's samples; at 50 ms, 3.7 %: docs/benchmarks.md). A record still reaches
#: Redis within about this long of its task's end; its times are the task's own.
HOLD: Final = 0.05
#: most records in one script
MOST: Final = 2000
#: slots a reader reads first (twice as many each time all were ready)
FIRST_READ: Final = 32
SUFFIX: Final = ".spool"


class SpoolError(RuntimeError):
    """A spool file that cannot be read or forwarded."""


class Target:
    """Where a spool file's records go: the ledger's Redis and keys (the file's first line)."""

    def __init__(self, redis_url: str, count_key: str, times_key: str, counter_key: str, prefix: str) -> None:
        self.redis_url = redis_url
        self.count_key = count_key
        self.times_key = times_key
        self.counter_key = counter_key
        self.offsets_key = f"{prefix}ledger:spool"
        self.prefix = prefix

    def header(self) -> bytes:
        """The file's first line: the URL without its secrets (the harness knows the URLs it gave)."""
        line = json.dumps({"spool": 1, "redis_url": redact(self.redis_url), "prefix": self.prefix,
                           "count": self.count_key, "times": self.times_key,
                           "counter": self.counter_key}).encode() + b"\n"
        if len(line) > HEADER:
            raise SpoolError("the ledger's URL and keys do not fit a spool file's header")
        return line

    @classmethod
    def parse(cls, data: bytes) -> Target:
        try:
            found = json.loads(data[:data.index(b"\n")])
            return cls(str(found["redis_url"]), str(found["count"]), str(found["times"]), str(found["counter"]),
                       str(found["prefix"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SpoolError(f"not a spool header: {data[:200]!r}") from exc


class _MovedError(Exception):
    """Redis's offset for a file is not where the batch started: the file goes on from ``offset``."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class Link:
    """A blocking connection to the ledger's Redis with :data:`BATCH` loaded, made when first needed."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._connection: BlockingConnection | None = None
        # the arguments that are the same for every batch, but the file's name (the count is the batch's)
        self._keys = pack(BATCH_SHA, 4, target.count_key, target.times_key, target.offsets_key, target.counter_key,
                          count=0)[len(b"*0\r\n"):]

    def batch(self, name: str, slots: bytes, start: int, end: int) -> list[str]:
        """Run the records of ``slots`` (the file's slots ``start`` to ``end``, as they are in the file) in one
        script: the workloads of those that ran before. :class:`_MovedError` when Redis's offset for ``name``
        is not ``start``."""
        tail = (name.encode(), b"%d" % start, b"%d" % end, slots)
        command = b"".join((b"*11\r\n$7\r\nEVALSHA\r\n", self._keys,
                            *(b"$%d\r\n%s\r\n" % (len(item), item) for item in tail)))
        try:
            reply = self._run(command)
        except NoScriptError:  # flushed, or a Redis restarted empty: it did not run
            self._call(pack("SCRIPT", "LOAD", BATCH))
            reply = self._run(command)
        return [workload.decode() for workload in reply]

    def _run(self, command: bytes) -> Any:
        """The batch's reply; ``SPOOLAT`` raised as :class:`_MovedError`."""
        try:
            return self._call(command)
        except NoScriptError:
            raise
        except ResponseError as exc:
            text = str(exc)
            if text.startswith("SPOOLAT "):
                raise _MovedError(int(text.split()[1])) from None
            raise

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


def _span(data: bytes, *, holes: bool) -> tuple[int, int]:
    """The ready slots in ``data`` (whole slots from a file's offset) and the slots they span: up to the first
    slot not ready (a writer's record under way), or past such slots with ``holes`` (a worker gone: they stay
    empty). The marks are every :data:`SLOT`-th byte: read in C, not slot by slot."""
    marks = data[::SLOT]
    if holes:
        return marks.count(READY), marks.rfind(READY) + 1
    ready = len(marks) - len(marks.lstrip(bytes((READY,))))
    return ready, ready


class Segment:
    """One spool file as its reader sees it: the slots forwarded so far (Redis's offset corrects a reader that
    starts at 0) and the slots' bytes."""

    def __init__(self, path: Path, read: Callable[[int, int], bytes], link: Link) -> None:
        self.path = path
        self.name = path.name
        self.read = read  # (first slot, slots) -> their bytes
        self.link = link
        self.offset = 0

    def forward(self, on_repeats: Callable[[list[str]], None] | None, *, holes: bool) -> int:
        """Forward the ready slots past the offset (see :func:`_span`): the records sent."""
        sent = 0
        while self.offset < SLOTS:
            slots, records, span = self._collect(holes)
            if not records:
                break
            try:
                repeats = self.link.batch(self.name, slots, self.offset, self.offset + span)
            except _MovedError as moved:  # forwarded already (a reply lost, or the other reader did it)
                if moved.offset < self.offset:
                    log.error("ledger spool %s: Redis holds offset %d, behind %d: records lost there; sent again",
                              self.name, moved.offset, self.offset)
                self.offset = max(0, min(moved.offset, SLOTS))
                continue
            self.offset += span
            sent += records
            if repeats and on_repeats is not None:
                on_repeats(repeats)
        return sent

    def _collect(self, holes: bool) -> tuple[bytes, int, int]:
        """The bytes of up to :data:`MOST` slots past the offset that hold ready records, the records and the
        slots spanned, read :data:`FIRST_READ` slots first and twice as many each time all were ready (a
        worker's reader reads a few pages a round, not a whole batch's worth of slots not yet written);
        ``holes``: to the first stretch with none."""
        pieces: list[bytes] = []
        records = span = read = 0  # ready records, slots spanned by them, slots read (from the offset)
        chunk = FIRST_READ
        while read < MOST:
            first = self.offset + read
            count = min(chunk, SLOTS - first, MOST - read)
            if count <= 0:
                break
            data = self.read(first, count)
            ready, used = _span(data, holes=holes)
            if ready:
                pieces.append(data)
                records += ready
                span = read + used
            if (holes and not ready) or (not holes and used < count):
                break
            read += count
            chunk = min(2 * chunk, MOST)
        return b"".join(pieces)[:span * SLOT], records, span

class _Own:
    """One of a worker's spool files: its descriptor (holding the lock), its map, its reader's state."""

    def __init__(self, path: Path, fd: int, mapped: mmap.mmap, link: Link) -> None:
        self.fd = fd
        self.map = mapped
        self.segment = Segment(path, self._read, link)

    def _read(self, first: int, count: int) -> bytes:
        at = HEADER + first * SLOT
        return self.map[at:at + count * SLOT]

    def idle(self) -> bool:
        """Nothing ready past the offset (and, once its writers are done, nothing more to come)."""
        offset = self.segment.offset
        return offset >= SLOTS or self.map[HEADER + offset * SLOT] != READY

    def remove(self) -> None:
        self.segment.path.unlink(missing_ok=True)
        self.map.close()
        os.close(self.fd)  # the lock goes with the last descriptor


class SpoolRecords:
    """A worker's records from its library's threads, each one slot of a shared memory map, forwarded by a
    thread of its own (see the module's docstring): the interface of
    :class:`taskbench.ledger_thread.ThreadRecords`, whose ``fallback`` takes what is not spooled (the ledger
    off's INCRBY, a task id holding a separator or too long for a slot)."""

    def __init__(self, ledger: Ledger, redis_url: str, counter_key: str, folder: Path, *,
                 fallback: ThreadRecords | None = None,
                 repeated: Callable[[str], None] = lambda workload: None) -> None:
        self._fallback = fallback
        self._forked = False
        self._repeated = repeated
        self._folder = folder
        self._stem = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._target = Target(redis_url, ledger.count_key, ledger.times_key, counter_key, ledger.prefix)
        self._header = self._target.header()
        self._link = Link(self._target)
        self._workloads: dict[str, bytes] = {}
        self._slots = itertools.count()  # next() is one step of the interpreter: no two threads get one slot
        self._maps: dict[int, mmap.mmap] = {}
        self._files: dict[int, _Own] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending = False
        self._stopping = False
        self._map(0)  # a folder that cannot take a file fails here, not in a task
        # started by the first record: a process that forks and never records (RQ's, whose forked work horses
        # record) runs no thread of ours
        self._thread: threading.Thread | None = None
        me = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forked_child(me))

    @property
    def paths(self) -> list[Path]:
        return [own.segment.path for _, own in sorted(self._files.items())]

    def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
               incr: tuple[str, int] | None = None, workload: str = "") -> int | None:
        """Store the record in its slot; None (its count is read later: above one, ``repeated(workload)``). One
        that does not fit a slot goes to the ``fallback``."""
        if self.store(task_id, enqueued_at, started_at, finished_at, incr=incr, workload=workload):
            return None
        if self._fallback is None:
            raise SpoolError(f"the record of task {task_id!r} does not fit a spool slot")
        result: int | None = self._fallback.record(task_id, enqueued_at, started_at, finished_at, incr=incr,
                                                   workload=workload)
        return result

    def store(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
              incr: tuple[str, int] | None = None, workload: str = "") -> bool:
        """Store the record in its slot; False, nothing stored, when it does not fit one (a task id and workload
        longer than a slot holds, an increment of another key than the spool's counter), or in a process forked
        from the spool's (its thread and its files are the parent's)."""
        name = task_id.encode()
        kind = self._workloads.get(workload) or self._workload(workload)
        if (len(name) + len(kind) > SLOT - HEAD or (incr is not None and incr[0] != self._target.counter_key)
                or self._forked):
            return False
        number, slot = divmod(next(self._slots), SLOTS)
        mapped = self._maps.get(number) or self._map(number)
        at = HEADER + slot * SLOT
        FIELDS.pack_into(mapped, at + 1, enqueued_at, started_at, finished_at, incr[1] if incr else 0.0,
                         incr is not None, len(name), len(kind))
        mapped[at + HEAD:at + HEAD + len(name) + len(kind)] = name + kind
        mapped[at] = READY  # last: a slot marked ready holds its whole record
        if not self._pending:
            self._pending = True
            if self._thread is None:
                self._start()
            self._wake.set()
        return True

    def _workload(self, workload: str) -> bytes:
        """A workload's name as a slot holds it (a few names a run: kept)."""
        kind = self._workloads[workload] = workload.encode()[:255]
        return kind

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(target=self._relay, name="ledger-spool", daemon=True)
                self._thread.start()

    def incrby(self, key: str, amount: int) -> None:
        if self._fallback is None:
            raise SpoolError("the spool has no connection for a task's INCRBY")
        self._fallback.incrby(key, amount)

    def close(self) -> None:
        """Forward every record (the library's threads are done by now), stop the thread, remove the files; one
        not forwarded (Redis unreachable) is left for the harness, with a log line."""
        self._stopping = True
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=2 * CONNECT_TIMEOUT + 5)
        stuck = thread is not None and thread.is_alive()  # on a Redis that does not answer: not our connection
        if not stuck:
            with contextlib.suppress(Exception):
                self._forward()
        for number, own in sorted(self._files.items()):
            if not stuck and own.idle():
                own.remove()
            else:
                log.error("ledger spool %s: records not forwarded at exit; the harness forwards them",
                          own.segment.path)
                own.map.close()
                os.close(own.fd)
            del self._files[number]
        self._link.close()
        if self._fallback is not None:
            self._fallback.close()

    def _map(self, number: int) -> mmap.mmap:
        """The map of file ``number``, made by the first record that needs it."""
        with self._lock:
            mapped = self._maps.get(number)
            if mapped is not None:
                return mapped
            name = f"{self._stem}-{number:06d}{SUFFIX}"
            path = self._folder / name
            fresh = self._folder / f".{name}.new"  # out of the harness's sight until its header is in, and locked
            fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the harness leaves a locked file alone
                os.ftruncate(fd, HEADER + SLOTS * SLOT)  # sparse: memory is taken as slots are written
                os.pwrite(fd, self._header, 0)
                mapped = mmap.mmap(fd, HEADER + SLOTS * SLOT)
                os.rename(fresh, path)
            except BaseException:
                os.close(fd)
                fresh.unlink(missing_ok=True)
                raise
            self._files[number] = _Own(path, fd, mapped, self._link)
            self._maps[number] = mapped
            return mapped

    def _forward(self) -> int:
        """Forward the ready slots of every file; a full file forwarded is removed. The records sent."""
        sent = 0
        for number, own in sorted(self._files.items()):
            sent += own.segment.forward(self._repeats, holes=False)
            if own.segment.offset >= SLOTS:
                with self._lock:
                    del self._files[number]
                    del self._maps[number]
                own.remove()
        return sent

    def _relay(self) -> None:
        delay = 0.05
        while True:
            self._wake.wait()
            while True:  # every HOLD s while records come; back to the wait once a round finds none
                if not self._stopping:
                    time.sleep(HOLD)
                try:
                    sent = self._forward()
                    if not sent and not self._stopping:
                        # cleared before the flag: a record stored after the flag went down wakes the next round
                        self._wake.clear()
                        self._pending = False
                        sent = self._forward()  # what came between the round and the flag
                    delay = 0.05
                except Exception as exc:  # the records stay in the file: sent again once Redis answers
                    log.error("ledger spool %s: forwarding to the ledger's Redis at %s failed (%r); trying again",
                              self._stem, where(address_of(self._target.redis_url) or {}), exc)
                    if self._stopping:
                        return
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                if self._stopping:
                    return
                if not sent:
                    break

    def _repeats(self, workloads: list[str]) -> None:
        for workload in workloads:
            self._repeated(workload)


def _forked_child(spool: weakref.ref[SpoolRecords]) -> None:
    """In a process forked from a spool's: its records go elsewhere (the spool's thread did not fork)."""
    found = spool()
    if found is not None:
        found._forked = True


def spool_records(ledger: Ledger, redis_url: str, counter_key: str, folder: str, *, fallback: ThreadRecords,
                  repeated: Callable[[str], None]) -> SpoolRecords | ThreadRecords:
    """Spooled records in ``folder`` (the harness's, from ``TASKBENCH_LEDGER_SPOOL``), or ``fallback`` when the
    folder cannot take a file (logged)."""
    try:
        return SpoolRecords(ledger, redis_url, counter_key, Path(folder), fallback=fallback, repeated=repeated)
    except OSError as exc:
        log.warning("ledger spool: cannot write in %s (%r): records are sent from the threads", folder, exc)
        return fallback


__all__ = ["BATCH", "BATCH_SHA", "FIELDS", "HEAD", "HEADER", "READY", "SLOT", "SLOTS", "SPOOL_ENV", "SUFFIX", "Link",
           "Segment", "SpoolError", "SpoolRecords", "Target", "spool_records"]
