"""Fault injection under load: the registry of fault kinds, their spec, and the thread that injects one.

A fault is ``--fault KIND@T`` (T seconds into the load), ``KIND@T+D`` (lasting D seconds) or
``KIND@T/P`` (again every P seconds until the load ends). What each kind does is a function of
:mod:`.fault_actions` (or of another module) that :data:`KINDS` names:

- ``kill-worker@T``: SIGKILL the first worker's process group (an OOM kill, a node lost) and start a
  new worker at once, as a supervisor with ``restart: always`` would; ``kill-worker@T/P`` does it every
  P seconds until the load ends (a crash loop).
- ``kill-api@T``: the same to the API, on the same port, so the load generator's users reconnect.
- ``pause-worker@T+D``: SIGSTOP the first worker's process group for D seconds, then SIGCONT (a
  frozen VM, a long GC pause): with D past the backend's visibility timeout (``--task-timeout``) its
  tasks are redelivered while the first copy is still alive.
- ``stall-broker@T+D``: the broker answers nothing for D seconds (``CLIENT PAUSE <ms> ALL`` on Redis;
  SIGSTOP of a RabbitMQ/NATS server the harness started itself; refused on anyone else's server).
- ``restart-broker@T`` / ``restart-broker-term@T``: SIGKILL / SIGTERM the embedded broker Redis and
  start it again on the same port, password and data (:mod:`.broker_restart`).

A new kind is one entry in :data:`KINDS`: its help, its target, whether it takes ``+D`` or ``/P``,
the action, and optionally a check of the broker made before any case starts. The audit then says
what the fault cost (lost and duplicated tasks) and :mod:`.recovery` how long the run took to recover.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from taskbench.harness import broker_restart
from taskbench.harness.fault_actions import (
    Broker,
    FaultContext,
    kill_and_restart,
    pause_worker,
    stall_broker,
    stall_problem,
)
from taskbench.harness.processes import Managed, ProcessSet
from taskbench.results import FaultRecord

__all__ = ["KINDS", "Broker", "Fault", "FaultKind", "Injector"]


@dataclass(frozen=True)
class FaultKind:
    help: str
    target: str  # worker-0 | api | broker
    action: Callable[[FaultContext], None]
    duration: bool = False  # takes (and needs) +D
    period: bool = False  # may take /P
    #: why the fault cannot be done on this broker (None: it can), asked before any case runs
    check: Callable[[Broker | None], str | None] | None = None


KINDS: dict[str, FaultKind] = {
    "kill-worker": FaultKind("SIGKILL the first worker's process group, then start a new worker "
                             "(@T/P: every P s until the load ends)", "worker-0", kill_and_restart, period=True),
    "kill-api": FaultKind("SIGKILL the API's process group, then start a new API on the same port", "api",
                          kill_and_restart),
    "pause-worker": FaultKind("SIGSTOP the first worker's process group for D s, then SIGCONT", "worker-0",
                              pause_worker, duration=True),
    "stall-broker": FaultKind("the broker answers nothing for D s (Redis: CLIENT PAUSE ALL; a RabbitMQ/NATS "
                              "server the harness started: SIGSTOP)", "broker", stall_broker, duration=True,
                              check=stall_problem),
    **{kind: FaultKind(text, "broker", broker_restart.action(kind), check=broker_restart.check(kind))
       for kind, text in broker_restart.KINDS.items()},
}


def _seconds(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--fault: {text!r} is not a number of seconds") from None
    if not 0 < value <= 3600:
        raise ValueError(f"--fault: {what} must be in (0, 3600] seconds")
    return value


def delay_of(text: str) -> float | None:
    """``delay-broker=Xms`` (the fault-style spelling of ``--broker-delay X``): X; None for any other fault."""
    name, sep, value = text.strip().partition("=")
    if name != "delay-broker":
        return None
    number = value.strip().removesuffix("ms")
    try:
        delay = float(number) if sep else -1.0
    except ValueError:
        delay = -1.0
    if not 0 <= delay <= 1000:
        raise ValueError(f"--fault {text!r}: say the delay in milliseconds, 0 to 1000: delay-broker=5ms")
    return delay


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float  # seconds after the load started
    duration: float | None = None  # +D
    period: float | None = None  # /P

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``KIND@T``, ``KIND@T+D`` or ``KIND@T/P``, e.g. ``kill-worker@5``, ``pause-worker@2+8``."""
        name, sep, when = text.strip().partition("@")
        spec = KINDS.get(name)
        if spec is None:
            raise ValueError(f"--fault: unknown fault {name!r}; known: {', '.join(KINDS)}")
        example = f"{name}@5+3" if spec.duration else f"{name}@5"
        if not sep:
            raise ValueError(f"--fault: say when, in seconds after the load starts: {example}")
        duration = period = None
        if "+" in when:
            when, _, extra = when.partition("+")
            if not spec.duration:
                raise ValueError(f"--fault: {name} takes no duration (+D); e.g. {example}")
            duration = _seconds(extra, "the duration (+D)")
        elif "/" in when:
            when, _, extra = when.partition("/")
            if not spec.period:
                raise ValueError(f"--fault: {name} does not repeat (/P); e.g. {example}")
            period = _seconds(extra, "the period (/P)")
        if spec.duration and duration is None:
            raise ValueError(f"--fault: say how long {name} lasts, in seconds: {example}")
        return cls(name, _seconds(when, "the time"), duration, period)

    @property
    def spec(self) -> FaultKind:
        return KINDS[self.kind]

    @property
    def target(self) -> str:
        return self.spec.target

    def describe(self) -> str:
        extra = f"+{self.duration:g}" if self.duration else f"/{self.period:g}" if self.period else ""
        return f"{self.kind}@{self.at:g}{extra}"

    def problem(self, broker: Broker | None) -> str | None:
        """Why this fault cannot be injected on ``broker`` (None: it can)."""
        return self.spec.check(broker) if self.spec.check else None

    def join_timeout(self, ready_timeout: float) -> float:
        """How long the load's end may wait for the injector: its duration, a restart, a margin."""
        return (self.duration or 0.0) + ready_timeout + 30


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
