"""A worker's records, each one slot of a spool file it maps, forwarded by a thread of its own
(:mod:`taskbench.ledger.recording.spool`)."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import mmap
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from taskbench.ledger.pipe import address_of, where
from taskbench.ledger.recording.spool.format import (
    FIELDS,
    HEAD,
    HEADER,
    HOLD,
    READY,
    SLOT,
    SLOTS,
    SUFFIX,
    SpoolError,
    Target,
)
from taskbench.ledger.recording.spool.forward import Link, Segment
from taskbench.ledger.writer import CONNECT_TIMEOUT

if TYPE_CHECKING:
    from taskbench.ledger.core import Ledger
    from taskbench.ledger.recording.threads import ThreadRecords

log = logging.getLogger("taskbench.ledger")


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
    :class:`taskbench.ledger.recording.threads.ThreadRecords`, whose ``fallback`` takes what is not spooled (the ledger
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
        # started by the first record: a process that forks and never records (a forking library's, whose work horses
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


__all__ = ["SpoolRecords", "spool_records"]
