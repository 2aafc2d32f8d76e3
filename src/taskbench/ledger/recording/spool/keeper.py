"""The harness's side of the ledger's spool (:mod:`taskbench.ledger.recording.spool`): a folder for the spool
files of the workers a :class:`taskbench.harness.processes.stack.Stack` starts, and the forwarding of what the file
of a worker gone still holds."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from taskbench.ledger.recording.spool.format import HEADER, READY, SLOT, SPOOL_ENV, SUFFIX, Target
from taskbench.ledger.recording.spool.forward import Link, Segment
from taskbench.ledger.writer import CONNECT_TIMEOUT
from taskbench.redaction import redact

__all__ = ["KEEP_INTERVAL", "PREFIX", "STALE_AFTER", "SpoolKeeper", "keeper_for", "reap"]

log = logging.getLogger("taskbench.ledger")

#: seconds between two looks of the harness at the folder for files whose worker is gone
KEEP_INTERVAL = 0.2
#: the start of a keeper's folder's name
PREFIX = "taskbench-spool-"
#: seconds a folder must have been left untouched before a keeper removes it as a killed harness's (a keeper
#: of an older taskbench, which held no lock on its folder, touches its folder with every file it forwards)
STALE_AFTER = 600.0


class SpoolKeeper:
    """The harness's side: a folder for its workers' spool files (:meth:`env` names it to them), and a thread
    that forwards what the file of a worker gone (its lock free) still holds. :meth:`close` (once the workers
    are stopped) forwards the rest and removes the folder."""

    def __init__(self, parent: str | None = None, *, interval: float | None = KEEP_INTERVAL) -> None:
        """``parent``: where the folder is made (``/dev/shm`` where there is one); ``interval``: seconds between two
        sweeps of the keeper's thread (None: no thread, :meth:`sweep` when called)."""
        if parent is None and os.access("/dev/shm", os.W_OK):  # noqa: S108 -- a private folder (mkdtemp: 0700)
            parent = "/dev/shm"  # noqa: S108 -- memory the kernel never writes back to a disk
        # made under a name reap() does not look at, locked, then renamed: the lock is held while the keeper
        # lives, and a folder whose lock is free is a killed harness's (reaped here)
        fresh = Path(tempfile.mkdtemp(prefix=f".{PREFIX}", dir=parent))
        self._fd: int | None = os.open(fresh, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.folder = fresh.with_name(fresh.name[1:])
        fresh.rename(self.folder)
        reap(self.folder.parent, keep=self.folder)
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

    def sweep(self, *, last: bool = False) -> int:
        """Forward the ready slots of every file whose worker is gone, and remove those files; the records
        forwarded. ``last`` (the stack stopped): a file that cannot be forwarded (the ledger's Redis gone) is
        removed too, its records counted in the log: nothing would forward it later, and the audit, which reads
        the same Redis, cannot count them either."""
        sent = 0
        with self._lock:
            for path in sorted(self.folder.glob(f"*{SUFFIX}")):
                try:
                    sent += self._recover(path)
                except FileNotFoundError:  # its worker removed it, done
                    continue
                except Exception as exc:  # kept for the next sweep; the audit then counts its tasks lost
                    if last:
                        self._drop(path, exc)
                    else:
                        log.error("ledger spool %s: cannot forward (%r)", path.name, exc)
        return sent

    def _drop(self, path: Path, exc: Exception) -> None:
        """Remove a file of a worker gone that cannot be forwarded, saying how many records it held."""
        with contextlib.suppress(FileNotFoundError):
            ready = _ready_slots(path)
            path.unlink()
            log.error("ledger spool %s: %d records could not be forwarded (%r); removed with the stack",
                      path.name, ready, exc)

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
        """Once the stack's processes are stopped: forward what their files hold, and remove the folder (a file
        whose worker still lives, one the stack could not stop, stays with it: logged). Once: a stack may be
        stopped twice."""
        if self._fd is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * CONNECT_TIMEOUT + 5)
        try:
            self.sweep(last=True)
        finally:
            left = list(self.folder.glob(f"*{SUFFIX}"))
            if left:
                log.error("ledger spool: %s of a worker still running, kept in %s",
                          ", ".join(p.name for p in left), self.folder)
            else:
                with contextlib.suppress(OSError):
                    for fresh in self.folder.glob(".*.new"):  # a worker killed while making a file: no record
                        fresh.unlink()
                    self.folder.rmdir()
            os.close(self._fd)
            self._fd = None


def keeper_for(env: Mapping[str, str]) -> SpoolKeeper | None:
    """The keeper of the spool folder for the processes started with ``env``: None where ``env`` names a folder
    already (another keeper's, or ``""``: none), and its workers then spool there or not at all."""
    return None if SPOOL_ENV in env else SpoolKeeper()


def _ready_slots(path: Path) -> int:
    """The records (ready slots) a spool file holds."""
    with path.open("rb") as file:
        data = file.read()
    return sum(1 for at in range(HEADER, len(data), SLOT) if data[at] == READY)


def reap(parent: Path, *, keep: Path | None = None, stale_after: float = STALE_AFTER) -> list[Path]:
    """Remove the folders under ``parent`` of keepers that are gone (a harness killed before it stopped its
    stack: the folder's lock is free, and it was not touched for ``stale_after`` s), with their files whose
    worker is gone too; the folders removed. Their records are not forwarded: that run's audit is over, and its
    keys may be cleaned up since."""
    removed: list[Path] = []
    now = time.time()
    for folder in sorted(parent.glob(f"{PREFIX}*")):
        if folder == keep:
            continue
        with contextlib.suppress(OSError):
            if now - folder.stat().st_mtime < stale_after:
                continue
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # another user's, or gone
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its keeper lives
            if _reap_files(folder):
                with contextlib.suppress(OSError):
                    folder.rmdir()
                    removed.append(folder)
        finally:
            os.close(fd)
    return removed


def _reap_files(folder: Path) -> bool:
    """Remove the files of a gone keeper's folder whose worker is gone; True: none left."""
    left = False
    for path in sorted(folder.iterdir()):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            left = True
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                left = True  # a worker of that harness still runs
                continue
            ready = _ready_slots(path) if path.name.endswith(SUFFIX) else 0
            path.unlink(missing_ok=True)
            log.warning("ledger spool %s: a killed harness's file removed (%d records not forwarded)", path, ready)
        finally:
            os.close(fd)
    return not left
