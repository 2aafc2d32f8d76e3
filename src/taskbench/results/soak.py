"""The result vocabulary of a soak (``taskbench run --soak``): the series over time at bounded resolution,
the fitted growth of each, and the drift verdict.

A soak runs one steady open load for a long time (30 min by default, hours if asked) and asks whether
anything grows that should not: the memory of the processes that run the tasks, the broker's memory and
key count, the backlog, the end-to-end latency. Each series is kept at most :attr:`SoakRecord.max_points`
points (pairs of points are merged, and the interval doubled, as the run grows), so a 6 h run's record is
as small as a 30 min one's.
"""

from __future__ import annotations

from taskbench.results.model import Model


class Growth(Model):
    """The fitted growth of one series over the steady part of the load: a Theil–Sen slope (the median of
    the slopes between every pair of points: a few outliers, a GC pause or a restart, do not move it) with
    its 95 % confidence interval (Sen's, from the ranks of those slopes), in the series' unit per hour."""

    unit: str
    slope_per_h: float
    low_per_h: float
    high_per_h: float
    #: the series' median over the fitted part: what a relative bound is a share of
    level: float
    #: the first and last second (from the load's start) of the fitted part, and its points
    from_s: float
    to_s: float
    points: int
    #: the bound the slope is judged by (None: the series is shown, not judged)
    bound_per_h: float | None = None
    #: how the bound was made ("20 MB/h", "50 % of 12.3 ms per hour, at least 50 ms/h")
    bound_text: str = ""
    drift: bool = False


class SoakRecord(Model):
    """A soak case's series, their growth and the verdict."""

    duration_s: float
    #: the offered rate (req/s) and where it came from ("--rate", "0.5 × the sustainable 240/s")
    rate: float
    rate_source: str = ""
    #: seconds between two points now (grows as pairs are merged) and the most points a series keeps
    interval_s: float = 1.0
    max_points: int = 720
    #: seconds from the load's start of each point (the mean of the samples merged into it)
    t_s: list[float] = []
    #: name -> values, one per point of :attr:`t_s` (None: no sample there)
    series: dict[str, list[float | None]] = {}
    units: dict[str, str] = {}
    #: the processes (their names) whose memory and CPU are series ``mem:<name>``, ``cpu:<name>``
    processes: list[str] = []
    #: where the broker's figures come from ("redis INFO used_memory and DBSIZE", "PostgreSQL: the run's
    #: schema"), or why there are none
    broker_source: str = ""
    #: the load's end, seconds from its start: the fits stop there (the drain empties the backlog)
    load_s: float = 0.0
    growth: dict[str, Growth] = {}
    #: one line per series that drifted beyond its bound (empty: nothing drifted)
    drift: list[str] = []
