"""The thread that injects a fault (:class:`~.kinds.Fault`) while the load runs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from taskbench.harness.faults.context import Broker, FaultContext
from taskbench.harness.faults.kinds import Fault
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.procgroup import Managed
from taskbench.results import FaultRecord

__all__ = ["Injector"]


class Injector:
    """Carries out one fault on a thread of its own while the load runs on the main thread."""

    def __init__(self, fault: Fault, procs: ProcessSet, *, ready: Callable[[Managed], bool],
                 restarted: Callable[[Managed], None], ready_timeout: float, broker: Broker | None = None) -> None:
        self.fault = fault
        self.record = FaultRecord(fault=fault.describe(), target=fault.target)
        self.ctx = FaultContext(fault=fault, procs=procs, record=self.record, ready=ready, restarted=restarted,
                                ready_timeout=ready_timeout, broker=broker)
        self._started = threading.Event()
        self._run_done = threading.Event()

    def started(self) -> None:
        """The load's first requests leave now (the driver's processes are up): T counts from here."""
        self.record.load_start = time.time()
        self._started.set()

    @contextlib.contextmanager
    def armed(self, load_start: float) -> Iterator[None]:
        """Inject T seconds after :meth:`started` (else after ``load_start``: a load that never said
        it started) unless the block (the load and its drain) ends first; join on exit.

        T counts from the load's start, and a fault due after a short load's end is injected during
        the drain, while the backlog is being worked off (a broker restarted with thousands of tasks
        queued); only a run that has drained by then ends without it (the runner fails the case: the
        fault asked for never happened). Call :meth:`load_ended` between the two: a repeated fault
        stops with the load. A fault that lasts (a pause) is waited for on exit.
        """
        self.record.load_start = load_start
        thread = threading.Thread(target=self._run, name="taskbench-fault", daemon=True)
        thread.start()
        try:
            yield
        except BaseException:
            self.ctx.cancel.set()
            raise
        finally:
            self.ctx.load_done.set()
            self._run_done.set()
            thread.join(timeout=self.fault.join_timeout(self.ctx.ready_timeout))
            if thread.is_alive():  # never past the run: stop it, undo what it froze
                self.ctx.cancel.set()
                thread.join(timeout=10)
                self.record.error = self.record.error or "the fault outlasted the run and was cancelled"

    def load_ended(self) -> None:
        """The load is over (the drain begins): a repeated fault stops; one not yet due still comes."""
        self.ctx.load_done.set()

    def _run(self) -> None:
        while not self._started.wait(0.05):
            if self.ctx.load_done.is_set() or self.ctx.cancel.is_set():
                break
        start = self.record.load_start or time.time()
        if self._run_done.wait(max(0.0, start + self.fault.at - time.time())) or self.ctx.cancel.is_set():
            if self.ctx.cancel.is_set():
                self.record.note = "the run was interrupted before the fault was due: nothing was injected"
                return
            self.record.note = (f"the run (its load and drain) was over {time.time() - start:.1f} s after the "
                                f"load's start, before the fault was due at {self.fault.at:g} s: nothing was "
                                "injected (an earlier T, more --requests or a --duration)")
            return
        self.record.during_drain = self.ctx.load_done.is_set()
        try:
            self.fault.spec.action(self.ctx)
        except Exception as exc:  # reported in the result; the run goes on and says so
            self.record.error = f"{type(exc).__name__}: {exc}"
