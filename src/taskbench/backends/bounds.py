"""The known windows of a backend's promise, as data: what a fault may cost it and still be a kept promise.

A guarantee (at-least-once, at-most-once) says what a fault case fails on; the libraries keep it only up
to windows that their own code opens, and a verdict that ignores them depends on where a kill lands
(Celery's BRPOP window failed one fault run in three). So each window is a :class:`Bound` of the
backend's registry entry (``Delivery.bounds``): which figure it allows (tasks lost, tasks run twice,
executions that never come back), under which faults, how many, and where it comes from (the library's
source, an issue, docs/faults.md). The guarantee itself is a bound too (at-least-once: "duplicates
allowed"), so that ``taskbench backends``, docs/backends.md and every fault result list the whole
promise in one form, and the verdict (``harness/faults/verdict.py``) reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

LOST: Final = "lost"
DUPLICATED: Final = "duplicated"
#: executions never come back to half their pre-fault rate before the drain ends
NO_RECOVERY: Final = "no recovery"
FIGURES: Final = (LOST, DUPLICATED, NO_RECOVERY)

#: the multipliers of a bound's ``tasks``: each kill of the fault (``kill-worker@T/P`` kills several
#: times), each worker process of the case (``--workers``), each task slot of a worker (``--concurrency``)
PER_KILL: Final = "kill"
PER_WORKER: Final = "worker"
PER_SLOT: Final = "slot"
_PER = (PER_KILL, PER_WORKER, PER_SLOT)

KILL_WORKER: Final = ("kill-worker",)
RESTART_BROKER: Final = ("restart-broker", "restart-broker-term")


@dataclass(frozen=True, kw_only=True)
class Bound:
    """Up to ``tasks`` × the ``per`` multipliers tasks may show ``figure`` under one of ``faults`` (none
    named: any fault), and the promise is still kept; ``tasks`` None: any number."""

    figure: str
    text: str
    #: where the window comes from: the library's source file and function, an issue, docs/faults.md
    source: str
    faults: tuple[str, ...] = ()
    tasks: int | None = None
    per: tuple[str, ...] = ()
    #: applies only when the fault emptied the broker (a restart of a broker without persistence)
    data_lost: bool = False

    def __post_init__(self) -> None:
        if self.figure not in FIGURES:
            raise ValueError(f"unknown bound figure {self.figure!r}")
        if not self.text.strip() or not self.source.strip():
            raise ValueError(f"a bound states what it allows and its source: {self}")
        unknown = set(self.per) - set(_PER)
        if unknown:
            raise ValueError(f"unknown bound multiplier(s) {sorted(unknown)}")

    def applies(self, fault: str | None, *, data_lost: bool = False) -> bool:
        """Whether the bound covers a case with ``fault`` (a fault kind; None: a worker that died on its
        own, judged as a kill) on a broker that kept (``data_lost`` False) or lost its data."""
        if self.data_lost and not data_lost:
            return False
        return not self.faults or (fault or KILL_WORKER[0]) in self.faults

    def limit(self, *, workers: int = 1, concurrency: int = 1) -> int | None:
        """``tasks`` times the case's workers and slots where ``per`` names them (the kills come later:
        how many there were is known only once the fault ran)."""
        if self.tasks is None:
            return None
        return (self.tasks * (workers if PER_WORKER in self.per else 1)
                * (concurrency if PER_SLOT in self.per else 1))

    def describe(self) -> str:
        """The bound in one line: what, how many, under which faults."""
        unit = {PER_KILL: "kill", PER_WORKER: "worker", PER_SLOT: "slot (--concurrency)"}
        many = "any number" if self.tasks is None else \
            f"up to {self.tasks}" + "".join(f" per {unit[p]}" for p in self.per)
        where = f"under {', '.join(self.faults)}" if self.faults else "under any fault"
        empty = " of a broker that lost its data" if self.data_lost else ""
        what = f"{where}{empty}" if self.figure == NO_RECOVERY else f"{many}, {where}{empty}"
        return f"{self.figure} ({what}): {self.text}"


def data_lost_bound() -> Bound:
    """A restart of a broker without persistence empties it: whatever it held is the loss."""
    return Bound(figure=LOST, faults=RESTART_BROKER, data_lost=True,
                 text="the broker restarted without persistence: every task it held is gone",
                 source="docs/backends.md, Durability (taskbench/durability.py)")


def nothing_kept_bounds(why: str) -> tuple[Bound, ...]:
    """A 2xx that comes before the task is safe (``background``, an after-response enqueue, a broker
    whose persistence does not keep it): nothing is promised."""
    source = "docs/backends.md, Durability (taskbench/durability.py)"
    return (Bound(figure=LOST, text=f"nothing is promised: {why}", source=source),
            Bound(figure=DUPLICATED, text=f"nothing is promised: {why}", source=source))
