"""What a soak is asked to do: how long, at which rate, and the bounds of its drift verdict.

The defaults, and why:

- **30 min**: long enough that a leak of a few hundred bytes per task at a few tens of tasks per second
  (tens of MB an hour) stands out of a Python worker's noise (a few MB), short enough to run before lunch.
- **50 % of the sustainable rate** (`--soak-share`): a soak asks whether a healthy load stays healthy, not where
  the backend breaks; at half its highest sustainable rate a backend has headroom for the machine's
  other work, so latency that grows is the backend's, not a queue that was already full.
- **memory 20 MB/h** for the task processes: a healthy worker after its warm-up (imports, caches, the
  allocator's arenas) stays within a few MB over 30 min on this machine; a task that keeps 1 KiB at
  10 tasks/s grows 35 MB/h. The broker's memory gets the same bound (its queue empties as fast as it
  fills at a sustainable rate).
- **latency 50 % per hour, and at least 50 ms/h**: end-to-end latency at a sustainable rate is flat
  with noise of tens of percent between windows; a relative bound alone would flag 2 ms becoming 3 ms.
- **backlog 5 % of the rate per hour** (in tasks/h, at least 60 tasks/h): a backlog that grows at all,
  steadily, means executions do not keep up: the rate was not sustainable.
- **warm-up 20 %** of the load left out of every fit: the first minutes hold imports, connection pools
  and caches filling, which are growth that stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from taskbench import units

DEFAULT_DURATION = "30m"
#: a soak's longest duration (a day): the driver's bound on a load
MAX_SOAK_S = 86_400.0


def parse_duration(text: str) -> float:
    """A soak's duration, 10 s to 24 h: ``90s``, ``30m``, ``1.5h`` or a number of seconds, as every duration
    of the command line (:func:`taskbench.units.parse_duration`); a ValueError in one line otherwise."""
    try:
        seconds = units.parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"--soak: {exc}") from None
    if not 10 <= seconds <= MAX_SOAK_S:
        raise ValueError(f"--soak: the duration must be between 10 s and 24 h, got {text!r}")
    return seconds


@dataclass(frozen=True, kw_only=True)
class SoakSpec:
    duration_s: float = 1800.0
    #: share of the sustainable rate offered when no --rate is given
    fraction: float = 0.5
    #: where the run's rate came from ("--rate", "0.5 × the sustainable 240/s of arq")
    rate_source: str = "--rate"
    memory_mb_per_h: float = 20.0
    latency_share_per_h: float = 0.5
    latency_floor_ms_per_h: float = 50.0
    backlog_share_per_h: float = 0.05
    backlog_floor_per_h: float = 60.0
    warmup_share: float = 0.2
    interval_s: float = 1.0
    max_points: int = 720

    def __post_init__(self) -> None:
        if not 10 <= self.duration_s <= MAX_SOAK_S:
            raise ValueError("--soak: the duration must be between 10 s and 24 h")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"--soak-share must be more than 0% and at most 100%, got {100 * self.fraction:g}%")
        bounds = (self.memory_mb_per_h, self.latency_share_per_h, self.backlog_share_per_h)
        if not all(0 < bound < math.inf for bound in bounds):  # NaN too: every drift would pass it
            raise ValueError("--soak-memory-bound, --soak-latency-bound and the backlog's bound must be finite "
                             "and > 0")
        if not 0 <= self.warmup_share < 1:
            raise ValueError(f"the soak's warm-up share must be in [0, 1), got {self.warmup_share}")
        if self.max_points < 8 or self.max_points % 2:
            raise ValueError("a soak keeps an even number of at least 8 points")
