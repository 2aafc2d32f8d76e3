"""The published no-op drain benchmarks that ``taskbench parity`` mirrors: where each comes from (repository,
paths, the commit read), what it published, and per library the shape its script runs (task count,
concurrency, how it enqueues, how it times the drain, the library settings the published script sets).

Read from the repositories' snapshots of these commits; the scripts in this package rewrite the shape,
not the code. The published figures are seconds for the whole drain on the author's hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Shape:
    """One library's run in a published benchmark, as its script (``published.py`` of its backend package)
    takes it; ``library`` is also the taskbench backend that ``taskbench drain`` runs beside it."""

    library: str
    tasks: int
    concurrency: int
    enqueue: str  # serial | gather | bulk
    timing: str  # burst | poll | last-finish
    mirrors: str  # the published script's path (or command) this shape is read from
    parallel: int = 0  # gather: at most this many enqueues at once (0: all of them)
    options: dict[str, str] = field(default_factory=dict)  # the published script's library settings
    published_s: float | None = None  # the published drain time, seconds
    note: str = ""  # where the shape here departs from the published run, and why
    source: str = ""  # the name of the published benchmark (a Source) this run belongs to

    @property
    def published_per_s(self) -> float | None:
        return self.tasks / self.published_s if self.published_s else None


@dataclass(frozen=True)
class Source:
    name: str
    repo: str
    commit: str
    results: str  # the file the published figures are read from
    setup: str  # the published run's hardware and conditions, as it states them

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """The libraries' runs in this benchmark, as their backend packages declare them (``SHAPES``)."""
        from taskbench import backends

        return tuple(shape for shape in backends.declared("SHAPES") if shape.source == self.name)

    def shape(self, library: str) -> Shape:
        return next(s for s in self.shapes if s.library == library)



SOURCES: tuple[Source, ...] = (
    Source(
        name="streaq",
        repo="tastyware/streaq",
        commit="56567dc3797e89ac4470ac3998b432024b527c90",
        results="benchmarks/README.md (Benchmark 1: No-op, the '1 worker' column)",
        setup="streaQ 6.0.0, M4 Mac Mini, asyncio + uvloop; 20,000 tasks, concurrency 32, 1 worker",
    ),
    Source(
        name="saq",
        repo="tobymao/saq",
        commit="fe86758c5063612d6f94e0d6028aacaac45fcfed",
        results="benchmarks/README.md (N = 1000, the 'noop' row)",
        setup="hardware not stated; 1,000 tasks, worker concurrency 10 (a forking library: one worker)",
    ),
    Source(
        name="python_queue_benchmark",
        repo="steventen/python_queue_benchmark",
        commit="6f50a1243989ed4a96c2637d207d5aac1e0469ad",
        results="README.md (Results of each library: 'finished in')",
        setup="MacBook Pro M2 Pro, 16 GB; 20,000 jobs enqueued one by one, 10 workers, timed by hand from "
              "the start time to the last job's finish",
    ),
)


def source(name: str) -> Source:
    """A source by name; a ValueError naming the known ones otherwise."""
    for found in SOURCES:
        if found.name == name:
            return found
    raise ValueError(f"unknown published benchmark {name!r}; known: {', '.join(s.name for s in SOURCES)}")


def folded(n: int) -> str:
    """The note of a published run of ``n`` worker processes, here one."""
    return f"its {n} worker processes folded into one worker of concurrency 10: `taskbench drain` measures one process"
