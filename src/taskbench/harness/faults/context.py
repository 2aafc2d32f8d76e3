"""What a fault's action is handed (see :mod:`.kinds`): the case's processes, its broker, the record.

An action gets a :class:`FaultContext`: the fault's timing, the case's processes, the broker, the
fault's record to fill in, and two events (the load ended; the run is being interrupted).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from taskbench import brokers
from taskbench.harness.brokers.base import PrivateServer
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.procgroup import Managed
from taskbench.results import FaultRecord

__all__ = ["Broker", "FaultContext", "FaultTiming"]


class FaultTiming(Protocol):
    """What an action reads of its fault (a :class:`~.kinds.Fault`): whom it hits, how long, how often."""

    @property
    def target(self) -> str: ...

    @property
    def duration(self) -> float | None: ...

    @property
    def period(self) -> float | None: ...


@dataclass
class Broker:
    """The broker of a case: its kind, URL, and its server process when the harness started it."""

    kind: str  # redis | rabbitmq | nats | postgres
    url: str
    proc: Managed | None = None
    #: the broker server the harness started: the embedded broker Redis, or a private RabbitMQ/NATS
    #: (``restart-broker`` restarts it, ``stall-broker`` freezes a RabbitMQ/NATS one)
    server: PrivateServer | None = None

    def owned(self) -> Managed | None:
        """The RabbitMQ/NATS server's process, when the harness started it (its current one, after a restart)."""
        if self.server is not None and not self.facts.pauses_itself:  # a Redis is paused by a command
            return self.server.proc
        return self.proc

    def describe(self) -> str:
        return f"{self.kind} at {self.facts.where(self.url)}"

    @property
    def facts(self) -> brokers.Broker:
        """What the broker is (:mod:`taskbench.brokers`): asked instead of comparing its kind."""
        return brokers.info(self.kind)


@dataclass
class FaultContext:
    fault: FaultTiming
    procs: ProcessSet
    record: FaultRecord
    ready: Callable[[Managed], bool]
    restarted: Callable[[Managed], None]
    ready_timeout: float
    broker: Broker | None = None
    load_done: threading.Event = field(default_factory=threading.Event)
    cancel: threading.Event = field(default_factory=threading.Event)

    def sleep_until(self, when: float, *, until_load_ends: bool = False) -> bool:
        """Wait until ``when`` (wall clock); False when the run was interrupted (or the load ended,
        with ``until_load_ends``) first."""
        while True:
            if self.cancel.is_set() or (until_load_ends and self.load_done.is_set()):
                return False
            left = when - time.time()
            if left <= 0:
                return True
            self.cancel.wait(min(left, 0.05))
