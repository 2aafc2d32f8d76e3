"""The harness's side of the ledger's spool (:mod:`taskbench.ledger_spool`): a folder for the spool files of the
workers a :class:`taskbench.harness.processes.stack.Stack` starts, and the forwarding of what the file of a
worker gone still holds."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import threading
from pathlib import Path

from taskbench.ledger_spool import HEADER, SLOT, SPOOL_ENV, SUFFIX, Link, Segment, Target
from taskbench.ledger_writer import CONNECT_TIMEOUT
from taskbench.redaction import redact

__all__ = ["KEEP_INTERVAL", "SpoolKeeper"]

log = logging.getLogger("taskbench.ledger")

#: seconds between two looks of the harness at the folder for files whose worker is gone
KEEP_INTERVAL = 0.2


class SpoolKeeper:
    """The harness's side: a folder for its workers' spool files (:meth:`env` names it to them), and a thread
    that forwards what the file of a worker gone (its lock free) still holds. :meth:`close` (once the workers
    are stopped) forwards the rest and removes the folder."""

    def __init__(self, parent: str | None = None, *, interval: float | None = KEEP_INTERVAL) -> None:
        """``parent``: where the folder is made (``/dev/shm`` where there is one); ``interval``: seconds between two
        sweeps of the keeper's thread (None: no thread, :meth:`sweep` when called)."""
        if parent is None and os.access("/dev/shm", os.W_OK):  # noqa: S108 -- a private folder (mkdtemp: 0700)
            parent = "/dev/shm"  # noqa: S108 -- memory the kernel never writes back to a disk
        self.folder = Path(tempfile.mkdtemp(prefix="taskbench-spool-", dir=parent))
        self._urls: dict[str, str] = {}  # the ledger URLs the harness gave, by their form without secrets
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if interval is not None:
            self._thread = threading.Thread(target=self._keep, args=(interval,), name="ledger-spool-keeper",
                                            daemon=True)
            self._thread.start()

    def env(self) -> dict[str, str]:
        return {SPOOL_ENV: str(self.folder)}

    def know(self, redis_url: str | None) -> None:
        """A ledger URL given to a process: a file's header names it without its password."""
        if redis_url:
            self._urls[redact(redis_url)] = redis_url

    def sweep(self) -> int:
        """Forward the ready slots of every file whose worker is gone, and remove those files; the records
        forwarded."""
        sent = 0
        with self._lock:
            for path in sorted(self.folder.glob(f"*{SUFFIX}")):
                try:
                    sent += self._recover(path)
                except FileNotFoundError:  # its worker removed it, done
                    continue
                except Exception as exc:  # kept for the next sweep; the audit then counts its tasks lost
                    log.error("ledger spool %s: cannot forward (%r)", path.name, exc)
        return sent

    def _recover(self, path: Path) -> int:
        fd = os.open(path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # its worker lives and forwards it
            target = Target.parse(os.pread(fd, HEADER, 0))
            target.redis_url = self._urls.get(target.redis_url, target.redis_url)
            link = Link(target)
            try:
                segment = Segment(path, lambda first, count: os.pread(fd, count * SLOT, HEADER + first * SLOT), link)
                sent = segment.forward(None, holes=True)
            finally:
                link.close()
            path.unlink(missing_ok=True)
            if sent:
                log.info("ledger spool %s: %d records of a stopped worker forwarded", path.name, sent)
            return sent
        finally:
            os.close(fd)

    def _keep(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.sweep()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * CONNECT_TIMEOUT + 5)
        try:
            self.sweep()
        finally:
            left = list(self.folder.glob(f"*{SUFFIX}"))
            if left:
                log.error("ledger spool: %s not forwarded, kept in %s", ", ".join(p.name for p in left), self.folder)
            else:
                with contextlib.suppress(OSError):
                    for fresh in self.folder.glob(".*.new"):  # a worker killed while making a file: no record
                        fresh.unlink()
                    self.folder.rmdir()
