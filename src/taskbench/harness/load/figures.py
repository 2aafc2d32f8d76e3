"""A phased load's figures: a row per phase, from the driver's stages and the ledger's times.

- offered: the phase's rate; achieved: its requests answered 2xx per second of the phase (a request
  belongs to the phase of its intended send); errors: its requests without a 2xx;
- executions/s: tasks (any phase's) that finished inside the phase, per second;
- backlog at its end: accepted minus executed, at the end of its last second (:mod:`.backlog`); its
  growth: the least-squares slope of the backlog over the phase's seconds (tasks per second);
- e2e p50/p95/p99: the tasks enqueued inside it, enqueue to finish;
- recovery: the first second, from the recovery phase's start, at which the backlog is back to its level
  before the disruption: the highest backlog of the last :data:`REFERENCE_S` seconds of the steady (or
  warm-up) phase before it. None when it is not back by the phase's end.

A warm-up's row is kept, marked unmeasured, for the timeline's bands; no table or summary shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from taskbench.harness.load import backlog
from taskbench.harness.load.phases import DISRUPTIONS, WARMUP_IDS, Phase
from taskbench.histogram import Histogram
from taskbench.results import FaultRecord, Load, Percentiles, Summary
from taskbench.results.load import BacklogSecond, PhaseRecord

#: seconds at the end of the phase before a disruption whose highest backlog is the level to return to
REFERENCE_S = 5
#: the ids of a load (and of its warm-up phase); the classic warm-up's ``w`` ids are another load's
_CLASSIC_WARMUP = "w"


def of_load(task_id: str) -> bool:
    return not task_id.startswith(_CLASSIC_WARMUP) or task_id.startswith(WARMUP_IDS)


def records(phases: Sequence[Phase], load: Load, times: Mapping[str, tuple[float, float, float]], origin: float,
            disruptions: Sequence[FaultRecord | None] = ()) -> tuple[list[PhaseRecord], list[BacklogSecond]]:
    """A row per phase and the load's backlog per second (``origin``: its first request, wall clock)."""
    rows = {k: v for k, v in times.items() if of_load(k)}
    total = sum(p.duration for p in phases)
    points = backlog.series(((r.t, r.ok) for r in load.per_second), (t[2] for t in rows.values()), origin,
                            round(total))
    finishes = sorted(t[2] - origin for t in rows.values())
    out: list[PhaseRecord] = []
    start = 0.0
    for i, phase in enumerate(phases):
        end = start + phase.duration
        stage = load.stages[i] if i < len(load.stages) else None
        e2e = [1000 * (f - e) for e, _, f in rows.values() if start <= e - origin < end]
        done = sum(1 for f in finishes if start <= f < end)
        record = PhaseRecord(
            kind=phase.kind, start_s=start, duration_s=phase.duration, offered_rps=phase.rate,
            multiple=phase.multiple, measured=phase.measured, intended=stage.intended if stage else 0,
            achieved_rps=(stage.ok if stage else 0) / phase.duration, executed_per_s=done / phase.duration,
            backlog_end=backlog.at(points, end), errors=stage.errors if stage else 0,
            backlog_slope=backlog.slope([(p.t + 1, p.backlog) for p in points if start < p.t + 1 <= end])[0],
            e2e_ms=backlog.percentiles(e2e), request_ms=stage.latency_ms if stage else Percentiles())
        found = disruptions[i] if i < len(disruptions) else None
        if found is not None:
            record.proof = list(found.proof) + ([found.note] if found.note else [])
            record.error = found.error
        if phase.kind == "recovery":
            record.reference_backlog = _reference(phases, i, points)
            if record.reference_backlog is not None:
                back = [p.t + 1 for p in points if start < p.t + 1 <= end and p.backlog <= record.reference_backlog]
                record.recovered_after_s = (back[0] - start) if back else None
        out.append(record)
        start = end
    return out, points


def _reference(phases: Sequence[Phase], index: int, points: Sequence[BacklogSecond]) -> int | None:
    """The backlog before the disruption that ``phases[index]`` recovers from (None: no calm phase before)."""
    start = sum(p.duration for p in phases[:index])
    for j in range(index - 1, -1, -1):
        start -= phases[j].duration
        if phases[j].kind in DISRUPTIONS or phases[j].kind in ("burst", "recovery"):
            continue
        end = start + phases[j].duration
        window = [p.backlog for p in points if max(start, end - REFERENCE_S) < p.t + 1 <= end]
        return max(window) if window else None
    return None


def summarize(summary: Summary, phases: Sequence[Phase], load: Load) -> Summary:
    """The case's row without the warm-up: requests, rate, request latency and errors of the measured
    phases only (the audit already leaves the warm-up's tasks out)."""
    measured = [(p, s) for p, s in zip(phases, load.stages, strict=False) if p.measured]
    if not measured:
        return summary
    hist = Histogram()
    for _, stage in measured:
        hist.merge(Histogram.from_dict(stage.latency.model_dump()))
    ms = hist.summary()
    sent = sum(s.intended for _, s in measured)
    ok = sum(s.ok for _, s in measured)
    return summary.model_copy(update={
        "requests": sent, "rps": ok / sum(p.duration for p, _ in measured),
        "p50_ms": ms["p50"], "p95_ms": ms["p95"], "p99_ms": ms["p99"],
        "errors_pct": 100.0 * sum(s.errors for _, s in measured) / max(1, sent)})
