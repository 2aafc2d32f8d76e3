"""The runs of this machine: a record per live run, so a run names a concurrent one and stops a dead one's leftovers.

A run writes ``<pid>.json`` in :func:`runs_dir` (``$TMPDIR/taskbench-<uid>/runs``, machine-wide like the
cores the runs pin; ``TASKBENCH_RUNS_DIR`` moves it): its pid and that pid's start time (a reused pid is
not the run), its output folder, and a token that every process it starts carries in its environment
(:data:`taskbench.procgroup.OWNER_ENV`). A run that starts:

- names every other live run: their measurements interfere (both pin the same cores);
- finds the record of a run whose harness is dead, looks for its processes by the marker in
  ``/proc/<pid>/environ`` (never by name), reports them by pid and stops them (SIGTERM, then
  SIGKILL), and deletes the record.

Normally nothing is left: each process group dies with the harness (the reaper of
:mod:`taskbench.procgroup`); this is for what that could not reach (a reaper killed with the harness). A run
that ends sweeps its own marker the same way (:func:`sweep`): a process that left its group (a task that
forked twice and called ``setsid``) is found by its environment and stopped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from taskbench.files import write_atomic
from taskbench.procgroup import OWNER_ENV, reaper_pid

__all__ = ["RunRecord", "leftovers", "registered", "runs_dir", "sweep"]

Say = Callable[[str], None]
#: how long leftovers get between SIGTERM and SIGKILL
LEFTOVER_GRACE = 3.0


def runs_dir() -> Path:
    given = os.environ.get("TASKBENCH_RUNS_DIR")
    return Path(given) if given else Path(tempfile.gettempdir()) / f"taskbench-{os.getuid()}" / "runs"


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot, /proc/<pid>/stat): None for no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name in parentheses may hold spaces


@dataclass(frozen=True)
class RunRecord:
    pid: int
    ticks: int | None
    token: str
    output: str
    command: str
    started: str

    @property
    def marker(self) -> str:
        return f"{self.pid}:{self.token}"

    def alive(self) -> bool:
        return start_ticks(self.pid) == self.ticks

    def describe(self) -> str:
        return f"pid {self.pid}, output {self.output}, started {self.started}"


def _records(folder: Path) -> list[tuple[Path, RunRecord]]:
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            found.append((path, RunRecord(**json.loads(path.read_text()))))
        except (OSError, ValueError, TypeError):
            continue  # half-written or foreign: not a record
    return found


def leftovers(marker: str) -> dict[int, str]:
    """The processes whose environment carries ``marker``: pid -> command line."""
    needle = f"{OWNER_ENV}={marker}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = argv[:120]
    return found


def stop_pids(pids: list[int], grace: float = LEFTOVER_GRACE) -> None:
    """SIGTERM each pid, SIGKILL those still there after ``grace``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if start_ticks(p) is not None and not _zombie(p)]
            time.sleep(0.05)
        if not pids:
            return


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descends(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is a parent, grandparent, ... of ``pid`` (an orphan's parent is 1 or a subreaper)."""
    seen: set[int] = set()
    parent = _parent(pid)
    while parent is not None and parent > 1 and parent not in seen:
        if parent == ancestor:
            return True
        seen.add(parent)
        parent = _parent(parent)
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def check_others(folder: Path, say: Say) -> list[RunRecord]:
    """Name the live runs (returned), stop the processes of dead ones and delete their records."""
    live = []
    for path, record in _records(folder):
        if record.pid == os.getpid():
            continue
        if record.alive():
            say(f"warning: another taskbench run is running ({record.describe()}): both pin the same cores, "
                "so their measurements interfere")
            live.append(record)
            continue
        left = leftovers(record.marker)
        if left:
            say(f"a taskbench run that died ({record.describe()}) left {len(left)} process(es) running; "
                "stopping them: " + "; ".join(f"pid {pid} ({argv})" for pid, argv in sorted(left.items())))
            stop_pids(sorted(left))
        with contextlib.suppress(OSError):
            path.unlink()
    return live


@contextlib.contextmanager
def registered(output: Path, say: Say) -> Iterator[RunRecord]:
    """This run's record for the block (nested blocks share the outer one); its children carry its marker."""
    current = os.environ.get(OWNER_ENV, "")
    if current.split(":", 1)[0] == str(os.getpid()):  # already registered by an outer block
        yield RunRecord(os.getpid(), start_ticks(os.getpid()), current.split(":", 1)[1], str(output), "", "")
        return
    folder = runs_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_others(folder, say)
    record = RunRecord(pid=os.getpid(), ticks=start_ticks(os.getpid()), token=secrets.token_hex(8),
                       output=str(output.resolve()), command=" ".join(Path(a).name for a in sys.argv[:2]),
                       started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    path = folder / f"{record.pid}.json"
    write_atomic(path, json.dumps(asdict(record)))
    saved = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = record.marker
    try:
        yield record
    finally:
        if saved is None:
            os.environ.pop(OWNER_ENV, None)
        else:
            os.environ[OWNER_ENV] = saved
        sweep(record.marker, say)
        with contextlib.suppress(OSError):
            path.unlink()


def sweep(marker: str, say: Say) -> dict[int, str]:
    """Stop what still carries this run's marker once the run ended (returned: pid -> command line).

    Every group the run started is stopped by then; what is left escaped its group (a task that forked
    twice and called ``setsid``), so only its marker finds it, an orphan. This process's own children (the
    reaper of the run's groups, a ``multiprocessing`` helper) are kept: they are no orphans.
    """
    me = os.getpid()
    left = {pid: argv for pid, argv in leftovers(marker).items() if pid != reaper_pid() and not _descends(pid, me)}
    if left:
        say(f"{len(left)} process(es) of this run outlived their process group (a task that forked and left "
            "its session?); stopping them: " + "; ".join(f"pid {pid} ({argv})" for pid, argv in sorted(left.items())))
        stop_pids(sorted(left))
    return left
