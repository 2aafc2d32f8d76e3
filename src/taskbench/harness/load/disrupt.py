"""The disruptions of a phased load (``pause-workers``, ``stall-broker``), injected on a thread while
the driver goes on offering the phase's rate.

Each starts when its phase does (counted from the driver's start, as a fault's ``@T`` is) and lasts the
phase. What it does is the fault kinds' own code: the workers' process groups SIGSTOPped and SIGCONTed
(:func:`~taskbench.harness.faults.actions.workers_paused`), the broker stalled as ``stall-broker`` stalls
it. Whatever it froze is released in a ``finally``, and on exit the thread is cancelled and joined: a run
that ends or is interrupted leaves nothing paused.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence

from taskbench.harness.faults.actions import stall_broker, stall_problem, workers_paused
from taskbench.harness.faults.context import Broker, FaultContext
from taskbench.harness.faults.kinds import Fault
from taskbench.harness.load.phases import DISRUPTIONS, Phase
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.results import FaultRecord

__all__ = ["Disruptions"]


class Disruptions:
    """The disrupting phases of one load; :attr:`records` holds one record per phase (None: not one)."""

    def __init__(self, phases: Sequence[Phase], procs: ProcessSet, broker: Broker | None) -> None:
        self.phases = list(phases)
        self.procs, self.broker = procs, broker
        self.records: list[FaultRecord | None] = [
            FaultRecord(fault=p.kind, target="workers" if p.kind == "pause-workers" else "broker")
            if p.kind in DISRUPTIONS else None for p in self.phases]
        self._started = threading.Event()
        self._cancel = threading.Event()
        self._t0 = 0.0

    @staticmethod
    def problem(phases: Sequence[Phase], broker: Broker | None) -> str | None:
        """Why these phases cannot run on this broker (a stall of a server the harness does not own)."""
        if any(p.kind == "stall-broker" for p in phases):
            found = stall_problem(broker)
            return found.replace("stall-broker:", "the stall-broker phase:", 1) if found else None
        return None

    def started(self) -> None:
        """The driver's processes send now: the phases' offsets count from here."""
        self._t0 = time.time()
        self._started.set()

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        if not any(self.records):
            yield
            return
        thread = threading.Thread(target=self._run, name="taskbench-phases", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._cancel.set()
            thread.join(timeout=30)

    def _sleep_until(self, when: float) -> bool:
        while not self._cancel.is_set():
            left = when - time.time()
            if left <= 0:
                return True
            self._cancel.wait(min(left, 0.05))
        return False

    def _run(self) -> None:
        while not self._started.wait(0.05):
            if self._cancel.is_set():
                return
        offset = 0.0
        for phase, record in zip(self.phases, self.records, strict=True):
            start, offset = offset, offset + phase.duration
            if record is None:
                continue
            if not self._sleep_until(self._t0 + start):
                record.note = "the run ended before the phase began"
                return
            try:
                self._disrupt(phase, record, until=self._t0 + offset)
            except Exception as exc:  # said in the phase's row; the load goes on
                record.error = f"{type(exc).__name__}: {exc}"

    def _disrupt(self, phase: Phase, record: FaultRecord, *, until: float) -> None:
        if phase.kind == "pause-workers":
            with workers_paused(self.procs, record) as names:
                if not names:
                    record.note = "no worker process to pause: the backend runs its tasks in the API"
                    return
                self._sleep_until(until)
            return
        ctx = FaultContext(fault=Fault("stall-broker", at=0.0, duration=max(0.1, until - time.time())),
                           procs=self.procs, record=record, ready=lambda _: True, restarted=lambda _: None,
                           ready_timeout=0.0, broker=self.broker, cancel=self._cancel)
        stall_broker(ctx)
