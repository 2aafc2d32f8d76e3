"""Fault injection under load: the registry of fault kinds and a fault's spec (injected by :mod:`.injector`).

A fault is ``--fault KIND@T`` (T seconds into the load), ``KIND@T+D`` (lasting D seconds) or
``KIND@T/P`` (again every P seconds until the load ends). What each kind does is a function of
:mod:`.actions` (or of another module, as :mod:`.broker_restart`) that :data:`KINDS` names:

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

from collections.abc import Callable
from dataclasses import dataclass, replace

from taskbench import units
from taskbench.driver import LoadSpec
from taskbench.harness.faults import broker_restart
from taskbench.harness.faults.actions import kill_and_restart, pause_worker, stall_broker, stall_problem
from taskbench.harness.faults.context import Broker, FaultContext

__all__ = ["KINDS", "Fault", "FaultKind", "delay_of", "paced_for"]


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
        value = units.parse_duration(text)
    except ValueError:
        raise ValueError(f"--fault: {text!r} is not a duration (5, 5s, 2m)") from None
    if not 0 < value <= 3600:
        raise ValueError(f"--fault: {what} must be in (0, 3600] seconds")
    return value


def delay_of(text: str) -> float | None:
    """``delay-broker=Xms`` (the fault-style spelling of ``--broker-delay X``): X; None for any other fault."""
    name, sep, value = text.strip().partition("=")
    if name != "delay-broker":
        return None
    try:
        delay = units.parse_duration(value, unit="ms") if sep else -1.0
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

    @property
    def ends(self) -> float:
        """Seconds after the load's start when the fault is over (a repeating one: its second time)."""
        return self.at + (self.duration or self.period or 0.0)


#: a count-bounded load with a fault lasts at least this many times the fault's end
SPAN_PER_FAULT_END = 2.0


def paced_for(load: LoadSpec, fault: Fault | None) -> tuple[LoadSpec, str] | None:
    """``load`` paced so that its requests last at least twice until ``fault`` is over, and the line that
    says so; None when the load needs no pace.

    A fault is due T seconds into the load. A closed load bounded only by its number of requests ends
    whenever the backend is done with them: a fast one (3000 requests in about a second for the
    fastest here) would be over, backlog and all, before a kill at 2 s, and the case would measure nothing.
    Such a load gets a pace (Locust's ``constant_pacing``, ``LoadSpec.pace``) that spreads its requests
    over ``2 x`` the fault's end: a cap on the rate (``users / pace``) that a backend slower than it never
    meets, so its load is the one asked for. A load with a rate, a duration, a pace or a schedule of its
    own is left as the user gave it.
    """
    if fault is None or load.model == "open" or load.requests is None or load.requests < 1:
        return None
    if load.duration is not None or load.pace is not None or load.schedule:
        return None
    span = SPAN_PER_FAULT_END * fault.ends
    pace = span * load.users / load.requests
    if pace <= 0 or pace > 3600:
        return None
    paced = replace(load, pace=pace)
    line = (f"the fault is due {fault.at:g} s into the load: its {load.requests} requests are spread over at least "
            f"{span:g} s (at most {load.users / pace:.0f} req/s, each user at most one every {pace:.3g} s), so that "
            f"a fast backend is still loaded when the fault comes (--duration sets the load's length instead)")
    return paced, line
