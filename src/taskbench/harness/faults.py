"""Fault injection under load: kill a component mid-run, restart it, measure what it cost.

``kill-worker@T`` SIGKILLs the first worker's process group T seconds into the load (an OOM kill,
a node lost) and starts a new worker at once, as a supervisor with ``restart: always`` would.
``kill-api@T`` does the same to the API: on the same port, so the load generator's users reconnect
to it. ``restart-broker@T`` and ``restart-broker-term@T`` restart the embedded broker Redis
(:mod:`.broker_restart`). The audit then says what the kill cost (lost and duplicated tasks), and the ledger's times say
how long the run took to recover.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from taskbench.harness import broker_restart
from taskbench.harness.processes import Managed, ProcessSet
from taskbench.harness.redis_server import EmbeddedRedis
from taskbench.results import FaultRecord
from taskbench.wait import WaitTimeoutError, wait_until

KINDS = {
    "kill-worker": "SIGKILL the first worker's process group, then start a new worker",
    "kill-api": "SIGKILL the API's process group, then start a new API on the same port",
    **broker_restart.KINDS,
}
RECOVERED_SHARE = 0.5  # recovered: back to half the rate of the seconds before the fault
_WINDOW_S = 1.0
_BEFORE_S = 3.0


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float  # seconds after the load started

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``KIND@SECONDS``, e.g. ``kill-worker@5``."""
        kind, sep, at = text.strip().partition("@")
        if kind not in KINDS:
            raise ValueError(f"--fault: unknown fault {kind!r}; known: {', '.join(KINDS)}")
        if not sep:
            raise ValueError(f"--fault: say when, in seconds after the load starts: {kind}@5")
        try:
            seconds = float(at)
        except ValueError:
            raise ValueError(f"--fault: {at!r} is not a number of seconds") from None
        if not 0 < seconds <= 3600:
            raise ValueError("--fault: the time must be in (0, 3600] seconds after the load starts")
        return cls(kind, seconds)

    @property
    def target(self) -> str:
        if self.kind in broker_restart.SIGNALS:
            return "broker"
        return "api" if self.kind == "kill-api" else "worker-0"

    def describe(self) -> str:
        return f"{self.kind}@{self.at:g}"


class Injector:
    """Carries out one fault on a thread of its own while the load runs on the main thread."""

    def __init__(self, fault: Fault, procs: ProcessSet, *, ready: Callable[[Managed], bool],
                 restarted: Callable[[Managed], None], ready_timeout: float,
                 broker: EmbeddedRedis | None = None) -> None:
        self.fault = fault
        self.broker = broker  # the embedded broker server, for restart-broker
        self.procs = procs
        self.ready = ready
        self.restarted = restarted
        self.ready_timeout = ready_timeout
        self.record = FaultRecord(fault=fault.describe(), target=fault.target)
        self._done = threading.Event()  # the load ended: too late to inject
        self._cancel = threading.Event()  # the run is being interrupted: stop waiting at once

    @contextlib.contextmanager
    def armed(self, load_start: float) -> Iterator[None]:
        """Inject at ``load_start + at`` unless the block (the load) ends first; join on exit."""
        thread = threading.Thread(target=self._run, args=(load_start,), name="taskbench-fault",
                                  daemon=True)
        thread.start()
        try:
            yield
        except BaseException:
            self._cancel.set()
            raise
        finally:
            self._done.set()
            thread.join(timeout=self.ready_timeout + 30)

    def _run(self, load_start: float) -> None:
        if self._done.wait(max(0.0, load_start + self.fault.at - time.time())):
            self.record.note = "the load ended before the fault was due: nothing was killed"
            return
        try:
            self._inject()
        except Exception as exc:  # reported in the result; the run goes on and says so
            self.record.error = f"{type(exc).__name__}: {exc}"

    def _inject(self) -> None:
        if self.fault.kind in broker_restart.SIGNALS:
            if self.broker is None:
                raise RuntimeError(f"{self.fault.kind}: no embedded broker Redis to restart")
            broker_restart.restart(self.fault.kind, self.broker, self.record, timeout=self.ready_timeout)
            return
        killed_at = time.time()
        old_pid, code = self.procs.kill(self.fault.target)
        self.record.injected, self.record.at = True, killed_at
        self.record.killed_pid, self.record.killed_exit_code = old_pid, code
        new = self.procs.restart(self.fault.target)
        self.record.restarted_pid = new.pid
        self.restarted(new)

        def gone() -> str | None:
            if self._cancel.is_set():
                return "cancelled"
            if not new.alive():
                return (f"the restarted {new.name} exited with code {new.exit_code()}; "
                        f"its log ({new.log_path}) ends:\n{new.tail()}")
            return None

        try:
            wait_until(lambda: self.ready(new), self.ready_timeout, interval=0.02, abort=gone,
                       what=f"the restarted {new.name} being ready")
        except WaitTimeoutError as exc:
            if not self._cancel.is_set():
                raise RuntimeError(str(exc)) from None
            return
        self.record.ready_after_s = time.time() - killed_at


def recovery(events: list[float], fault_at: float) -> float | None:
    """Seconds from the fault until ``events`` (timestamps) come at half their earlier rate again.

    The earlier rate is the mean over the seconds before the fault (up to three). None when there
    was no rate to recover to, or it never came back.
    """
    events = sorted(events)
    before_from = max(fault_at - _BEFORE_S, events[0]) if events else fault_at
    span = fault_at - before_from
    if span < 0.5:
        return None
    before = sum(1 for t in events if before_from <= t < fault_at) / span
    need = RECOVERED_SHARE * before * _WINDOW_S
    if need <= 0:
        return None
    after = [t for t in events if t >= fault_at]
    # the first one-second window, starting at an event, that holds enough events: its start
    hi = 0
    for lo, start in enumerate(after):
        while hi < len(after) and after[hi] < start + _WINDOW_S:
            hi += 1
        if hi - lo >= need:
            return start - fault_at
    return None


def summarize(record: FaultRecord, times: Mapping[str, tuple[float, ...]]) -> FaultRecord:
    """The record with the recovery figures, from the ledger's (enqueued, started, finished) times."""
    if not record.injected or record.at is None:
        return record
    rows = list(times.values())
    return record.model_copy(update={"accepting_again_s": recovery([r[0] for r in rows], record.at),
                                     "executing_again_s": recovery([r[2] for r in rows], record.at)})
