"""A spool file's ready slots forwarded to the ledger's Redis, each once: by the worker that wrote them, or by the
harness once that worker is gone (:mod:`taskbench.ledger.recording.spool`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from taskbench.ledger.pipe import address_of, pack
from taskbench.ledger.recording.spool.format import (
    BATCH,
    BATCH_SHA,
    FIRST_READ,
    MOST,
    READY,
    SLOT,
    SLOTS,
    SpoolError,
    Target,
)
from taskbench.ledger.recording.threads import BlockingConnection
from taskbench.ledger.writer import CONNECT_TIMEOUT

log = logging.getLogger("taskbench.ledger")


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
