"""The collector of a distributed run: wait for every driver's segment, merge them, drain, audit the ledger.

The same pipeline (:class:`CollectCase`) ends a cluster run (the collector Job, ``taskbench collector``) and
``taskbench run --nodes N`` (the harness, in the root network namespace): what the drivers publish under the
run's prefix (:mod:`taskbench.harness.commands.drive`) becomes one :class:`~taskbench.results.QueueCase` whose
load is the exact merge of theirs (:func:`~taskbench.driver.segments.merge_segments`), drained and audited as a
single-driver case is (a case's pipeline, :mod:`taskbench.harness.case.pipeline`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from taskbench import backends
from taskbench.driver.segments import Segment, merge_segments
from taskbench.harness.case.pipeline import Loaded, Pipeline
from taskbench.harness.commands.drive import wait_segments
from taskbench.harness.processes.stack import Stack
from taskbench.ledger import Ledger
from taskbench.results import QueueCase, Result
from taskbench.settings import Settings

Say = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Collect:
    """What the collector needs besides the ledger: the case's identity and its waits."""

    settings: Settings  # backend, broker, run id, enqueue mode, concurrency
    workload: str
    drivers: int
    workers: int
    durable: bool
    durability: str
    segment_timeout: float  # the drivers' load, their start and their barrier
    drain_timeout: float
    drain_stall: float
    warm_accepted: int = 0  # the warm-up's tasks (ids prefixed "w"), executed before the load
    logs: str | None = None


class CollectCase(Pipeline):
    """The collector's pipeline: its load is the drivers' segments, merged; nothing to start or warm up (the
    drivers, the workers and the API are the cluster's), and no worker it could stop before the audit (a
    Deployment's): it audits the ledger as it is then. ``run --nodes`` starts them
    (:class:`taskbench.harness.nodes.cluster.NodesCase`)."""

    stops_executors = False

    def __init__(self, client: Any, spec: Collect, *, say: Say, stack: Stack | None = None) -> None:
        settings = spec.settings
        backend = backends.info(settings.backend)
        case = QueueCase(backend=settings.backend, broker=settings.broker, workload=spec.workload,
                         enqueue_mode=settings.enqueue_mode, durable=spec.durable, durability=spec.durability,
                         has_worker=backend.has_worker, workers=spec.workers if backend.has_worker else 0,
                         concurrency=settings.concurrency, run_id=settings.run_id, unsafe=backend.unsafe,
                         logs=spec.logs)
        delivery = backend.delivery_on(settings.broker, case.promise_settings)
        case.delivery = f"{delivery.guarantee}: {delivery.recovery}"
        super().__init__(case, label=settings.backend, client=client, ledger=Ledger(settings.prefix), say=say,
                         stack=stack, drain_timeout=spec.drain_timeout, drain_stall=spec.drain_stall)
        self.spec = spec
        self.segments: list[Segment] = []

    def warm_up(self) -> int:
        return self.spec.warm_accepted

    def died(self) -> str | None:
        dead = self.procs.dead()
        return ", ".join(f"{p.name} exited with code {p.exit_code()} (log: {p.log_path})" for p in dead) or None

    def load(self) -> Loaded:
        spec = self.spec
        self.segments = wait_segments(self.client, spec.settings.prefix, spec.drivers, timeout=spec.segment_timeout,
                                      abort=self.died)
        load = merge_segments(self.segments)
        self.case.load = load.to_model()
        return Loaded(load, load.first_send, load.last_response)

    def draining_line(self, loaded: Loaded) -> str:
        return f"{self.spec.drivers} driver(s): {super().draining_line(loaded)}"

    def finish(self) -> None:
        """The client is the caller's: it reads the ledger's Redis after the case too."""


def collect_case(client: Any, spec: Collect, *, say: Say) -> tuple[QueueCase, list[Segment]]:
    """One queue case from the drivers' segments and the ledger (a cluster's collector); the segments are
    returned for the result's record."""
    pipeline = CollectCase(client, spec, say=say)
    return pipeline.run(), pipeline.segments


def segments_record(segments: list[Segment]) -> list[dict[str, Any]]:
    """What a result keeps of each driver (its figures, not its ids): which share, where, how it fared."""
    out = []
    for seg in sorted(segments, key=lambda s: s.index):
        load = seg.load
        out.append({"index": seg.index, "node": seg.node, "requests": load.requests, "ok": load.ok,
                    "rps": round(load.rps, 1), "p50_ms": load.latency.percentile(50) / 1000,
                    "p99_ms": load.latency.percentile(99) / 1000, "max_utilization": round(load.max_utilization, 3),
                    "saturated": load.saturated})
    return out


def distributed_result(case: QueueCase, segments: list[Segment], *, header: Mapping[str, Any],
                       config: Mapping[str, Any]) -> Result:
    """The result file of a distributed run: one queue case, the run's parameters with each driver's share."""
    result = Result(kind="run", config={**config, "segments": segments_record(segments)}, **header)
    result.cases.append(case)
    result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return result
