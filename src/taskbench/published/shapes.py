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
    """One library's run in a published benchmark, as its script ``taskbench.published.<library>_noop``
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
    shapes: tuple[Shape, ...]

    def shape(self, library: str) -> Shape:
        return next(s for s in self.shapes if s.library == library)


_FOLDED = "its {n} worker processes folded into one worker of concurrency 10: `taskbench drain` measures one process"

SOURCES: tuple[Source, ...] = (
    Source(
        name="streaq",
        repo="tastyware/streaq",
        commit="56567dc3797e89ac4470ac3998b432024b527c90",
        results="benchmarks/README.md (Benchmark 1: No-op, the '1 worker' column)",
        setup="streaQ 6.0.0, M4 Mac Mini, asyncio + uvloop; 20,000 tasks, concurrency 32, 1 worker",
        shapes=(
            Shape("streaq", 20_000, 32, "bulk", "burst", "benchmarks/bench_streaq.py; `streaq run --burst`",
                  options={"uvloop": "1"}, published_s=8.61),
            Shape("saq", 20_000, 32, "gather", "burst", "benchmarks/bench_saq.py; `saq --quiet bench_saq.settings`",
                  parallel=32, options={"dequeue_timeout": "1"}, published_s=9.86),
            Shape("taskiq", 20_000, 32, "gather", "last-finish",
                  "benchmarks/bench_taskiq.py; `taskiq worker --max-async-tasks 32 --max-prefetch 32`",
                  parallel=32, options={"xread_count": "32", "max_prefetch": "32", "result_ex_time": "1"},
                  published_s=6.36, note="taskiq has no burst mode: timed to the last task's finish"),
            Shape("arq", 20_000, 32, "gather", "burst", "benchmarks/bench_arq.py; `arq --burst`", parallel=32,
                  published_s=62.66, note="published with a fork of arq (Graeme22/arq); here arq as released"),
        ),
    ),
    Source(
        name="saq",
        repo="tobymao/saq",
        commit="fe86758c5063612d6f94e0d6028aacaac45fcfed",
        results="benchmarks/README.md (N = 1000, the 'noop' row)",
        setup="hardware not stated; 1,000 tasks, worker concurrency 10 (RQ: one forking worker)",
        shapes=(
            Shape("saq", 1_000, 10, "gather", "poll", "benchmarks/simple.py bench_saq", parallel=20,
                  published_s=0.40511),
            Shape("arq", 1_000, 10, "gather", "burst", "benchmarks/simple.py bench_arq", parallel=20,
                  published_s=5.02181),
            Shape("rq", 1_000, 1, "serial", "burst", "benchmarks/simple.py bench_rq", published_s=15.0959,
                  note="the published RQ time also counts the enqueue (its clock is not reset); here the drain only"),
        ),
    ),
    Source(
        name="python_queue_benchmark",
        repo="steventen/python_queue_benchmark",
        commit="6f50a1243989ed4a96c2637d207d5aac1e0469ad",
        results="README.md (Results of each library: 'finished in')",
        setup="MacBook Pro M2 Pro, 16 GB; 20,000 jobs enqueued one by one, 10 workers, timed by hand from "
              "the start time to the last job's finish",
        shapes=(
            Shape("taskiq", 20_000, 10, "serial", "last-finish", "taskiq/; `taskiq worker --workers 10`",
                  published_s=2.03, note=_FOLDED.format(n=10)),
            Shape("dramatiq", 20_000, 10, "serial", "last-finish", "dramatiq/; `dramatiq tasks -p 1 -t 10`",
                  published_s=4.12),
            Shape("huey", 20_000, 10, "serial", "last-finish", "huey/; `huey_consumer.py -k thread -w 10 -d 0.001 -C`",
                  options={"initial_delay": "0.001", "check_worker_health": "0"}, published_s=4.15),
            Shape("celery", 20_000, 10, "serial", "last-finish", "celery/; `celery worker -c 10 -P threads`",
                  options={"result_backend": "1"}, published_s=11.68),
            Shape("arq", 20_000, 10, "serial", "last-finish", "arq/ (poll_delay 0.01, max_jobs 1000, 10 processes)",
                  options={"poll_delay": "0.01"}, published_s=35.37, note=_FOLDED.format(n=10)),
            Shape("rq", 20_000, 10, "serial", "last-finish", "rq/; `rq worker-pool -n 10`", published_s=51.05),
        ),
    ),
)


def source(name: str) -> Source:
    """A source by name; a ValueError naming the known ones otherwise."""
    for found in SOURCES:
        if found.name == name:
            return found
    raise ValueError(f"unknown published benchmark {name!r}; known: {', '.join(s.name for s in SOURCES)}")
