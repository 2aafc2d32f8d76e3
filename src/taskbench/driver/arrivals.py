"""The open model's arrivals: one schedule across every stage, shared out between the driver processes.

Arrival ``n`` (0, 1, 2, ...) is due when the offered load so far, the integral of the rate over time,
reaches ``n``. Stage boundaries do not restart the count: ten stages ``0.5 s @ 1/s`` offer five
arrivals (at 0, 1, 2, 3 and 4 s), as one stage ``5 s @ 1/s`` does, and a stage of 0.01 s at 10/s sends
nothing unless the count crosses an integer in it. A stage at rate 0 sends nothing and holds the count.
The count is kept exactly (fractions of the decimal values given), so the number of arrivals in a stage
never depends on rounding: it is ``ceil(L1) - ceil(L0)`` for the load ``L0`` offered before the stage
and ``L1`` after it.

A driver process takes every ``count``-th arrival of the whole schedule, starting at its ``index``
(:attr:`~taskbench.driver.load_spec.LoadSpec.share`): the processes together send exactly the
schedule's arrivals, where dividing the rate would let each of them round up on its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

__all__ = ["Rated", "Stretch", "stretches", "total"]


class Rated(Protocol):
    """A stretch of the rate: a :class:`~taskbench.driver.load_spec.Stage`, or a whole load at one rate."""

    @property
    def duration(self) -> float: ...
    @property
    def rate(self) -> float: ...
    @property
    def id_prefix(self) -> str: ...


def _exact(value: float) -> Fraction:
    """The decimal a user typed (``0.1``), not its binary neighbour: ``str`` of a float is its shortest repr."""
    return Fraction(str(value))


@dataclass(frozen=True)
class Stretch:
    """One stage's arrivals for one share: ``first``, ``first + step``, ... below ``end`` (global numbers)."""

    stage: int  # its index in the schedule
    begin: float  # seconds from the load's start
    until: float
    rate: float  # arrivals per second of the whole schedule (0: none)
    id_prefix: str
    first: int
    end: int
    step: int
    #: seconds from ``begin`` to arrival ``first``
    offset: float

    @property
    def count(self) -> int:
        return max(0, -(-(self.end - self.first) // self.step))

    def due(self, n: int) -> float:
        """Seconds from the load's start at which arrival ``n`` of this stretch is due."""
        return self.begin + self.offset + (n - self.first) / self.rate


def stretches(schedule: Sequence[Rated], share: tuple[int, int] = (0, 1)) -> list[Stretch]:
    """Each stage's arrivals, in order, for the share ``(index, count)`` of the driver processes."""
    index, count = share
    out, offered, at = [], Fraction(0), 0.0
    for number, stage in enumerate(schedule):
        rate = _exact(stage.rate)
        after = offered + rate * _exact(stage.duration)
        first, end = math.ceil(offered), math.ceil(after)
        first += (index - first) % count
        offset = float((first - offered) / rate) if rate else 0.0
        out.append(Stretch(stage=number, begin=at, until=at + stage.duration, rate=stage.rate,
                           id_prefix=stage.id_prefix, first=first, end=end if rate else first, step=count,
                           offset=offset))
        offered, at = after, at + stage.duration
    return out


def total(schedule: Sequence[Rated], share: tuple[int, int] = (0, 1)) -> int:
    """How many arrivals the schedule offers (to the share): what a load on it sends unless a bound cuts it."""
    return sum(s.count for s in stretches(schedule, share))
