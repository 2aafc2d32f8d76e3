"""Outcome of a load run (:class:`LoadResult`) and merging of per-process results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from taskbench.histogram import Histogram
from taskbench.results.model import REFUSED, Load

# A driver process using this share of one core is treated as the bottleneck.
SATURATION_CPU = 0.9
# In the open model, more than this share of arrivals dispatched late means the
# driver could not keep its own schedule.
SATURATION_LATE = 0.1


@dataclass(kw_only=True)
class StageResult:
    """One stage of a rate schedule (:class:`~taskbench.driver.load_spec.Stage`): its arrivals and answers.

    A request belongs to the stage of its intended send time; ``errors`` counts every request of it that
    got no 2xx (a 409 included), ``latency`` its requests' latencies.
    """

    intended: int = 0
    late: int = 0
    completed: int = 0
    ok: int = 0
    errors: int = 0
    latency: Histogram = field(default_factory=Histogram)

    def to_dict(self) -> dict[str, Any]:
        return {"intended": self.intended, "late": self.late, "completed": self.completed, "ok": self.ok,
                "errors": self.errors, "latency": self.latency.to_dict(), "latency_ms": self.latency.summary()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageResult:
        return cls(intended=int(data["intended"]), late=int(data["late"]), completed=int(data["completed"]),
                   ok=int(data["ok"]), errors=int(data["errors"]), latency=Histogram.from_dict(data["latency"]))

    def add(self, other: StageResult) -> None:
        self.intended += other.intended
        self.late += other.late
        self.completed += other.completed
        self.ok += other.ok
        self.errors += other.errors
        self.latency.merge(other.latency)


@dataclass(kw_only=True)
class LoadResult:
    """Counts, ids, latency and driver CPU of one run (merged over processes).

    ``completed`` counts requests that got an HTTP response (any status);
    ``errors`` counts failures by kind (``http_<status>``, ``timeout``,
    ``connect``, ``reset``, ``protocol``); ``requests`` counts every request
    issued, including those that failed before reaching the server.
    ``per_second`` entries are ``{"t", "completed", "ok", "errors", "users"}``.
    ``cpu`` has one ``{"cpu_s", "wall_s", "utilization"}`` entry per process.
    """

    model: str = "closed"
    requests: int = 0
    completed: int = 0
    ok: int = 0
    accepted_ids: list[str] = field(default_factory=list)
    failed_ids: dict[str, str] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    rps: float = 0.0
    latency: Histogram = field(default_factory=Histogram)
    per_second: list[dict[str, int]] = field(default_factory=list)
    cpu: list[dict[str, float]] = field(default_factory=list)
    max_utilization: float = 0.0
    saturated: bool = False
    saturation_reason: str | None = None
    # Open model only: arrivals dispatched >10 ms after their intended time
    # because the driver's loop was busy, and arrivals never sent (still queued
    # for a free connection when the run ended).
    intended: int = 0
    late: int = 0
    unsent: int = 0
    # perf_counter() stamps (system-wide monotonic clock on Linux, so they can be
    # compared across the driver's processes); kept for merging.
    first_send: float = 0.0
    last_response: float = 0.0
    #: a rate schedule's stages, in order (none without one)
    stages: list[StageResult] = field(default_factory=list)

    def refused_ids(self) -> list[str]:
        """Ids answered 409: already submitted in the run, so not enqueued again by this request."""
        return [tid for tid, kind in self.failed_ids.items() if kind == REFUSED]

    def finalize(self) -> LoadResult:
        """Recompute derived fields (rps, max_utilization, saturation)."""
        self.elapsed_s = max(0.0, self.last_response - self.first_send)
        self.rps = self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0
        self.max_utilization = max((c["utilization"] for c in self.cpu), default=0.0)
        reasons: list[str] = []
        if self.max_utilization >= SATURATION_CPU:
            reasons.append(
                f"a driver process used {self.max_utilization:.0%} of a core "
                f"(>= {SATURATION_CPU:.0%}); add processes"
            )
        if self.model == "open" and self.intended and self.late > SATURATION_LATE * self.intended:
            reasons.append(
                f"{self.late} of {self.intended} arrivals were dispatched late "
                f"(> {SATURATION_LATE:.0%}); the driver fell behind its schedule"
            )
        self.saturated = bool(reasons)
        self.saturation_reason = "; ".join(reasons) or None
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types only."""
        return {
            "model": self.model,
            "requests": self.requests,
            "completed": self.completed,
            "ok": self.ok,
            "accepted_ids": list(self.accepted_ids),
            "failed_ids": dict(self.failed_ids),
            "errors": dict(self.errors),
            "elapsed_s": self.elapsed_s,
            "rps": self.rps,
            "latency": self.latency.to_dict(),
            "latency_ms": self.latency.summary(),
            "per_second": [dict(p) for p in self.per_second],
            "cpu": [dict(c) for c in self.cpu],
            "max_utilization": self.max_utilization,
            "saturated": self.saturated,
            "saturation_reason": self.saturation_reason,
            "intended": self.intended,
            "late": self.late,
            "unsent": self.unsent,
            "first_send": self.first_send,
            "last_response": self.last_response,
            "stages": [stage.to_dict() for stage in self.stages],
        }

    def to_model(self, failed_sample: int = 20) -> Load:
        """The typed record for a result file: everything but the ids (a sample of the failed ones)."""
        data = self.to_dict()
        data.pop("accepted_ids")
        data["failed_ids_sample"] = dict(list(data.pop("failed_ids").items())[:failed_sample])
        return Load.model_validate(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadResult:
        """Inverse of :meth:`to_dict` (``latency_ms`` is derived and ignored)."""
        return cls(
            model=str(data.get("model", "closed")),
            requests=int(data["requests"]),
            completed=int(data.get("completed", 0)),
            ok=int(data["ok"]),
            accepted_ids=[str(i) for i in data["accepted_ids"]],
            failed_ids={str(k): str(v) for k, v in data["failed_ids"].items()},
            errors={str(k): int(v) for k, v in data["errors"].items()},
            elapsed_s=float(data["elapsed_s"]),
            rps=float(data["rps"]),
            latency=Histogram.from_dict(data["latency"]),
            per_second=[{str(k): int(v) for k, v in p.items()} for p in data["per_second"]],
            cpu=[{str(k): float(v) for k, v in c.items()} for c in data["cpu"]],
            max_utilization=float(data.get("max_utilization", 0.0)),
            saturated=bool(data.get("saturated", False)),
            saturation_reason=data.get("saturation_reason"),
            intended=int(data.get("intended", 0)),
            late=int(data.get("late", 0)),
            unsent=int(data.get("unsent", 0)),
            first_send=float(data.get("first_send", 0.0)),
            last_response=float(data.get("last_response", 0.0)),
            stages=[StageResult.from_dict(d) for d in data.get("stages", [])],
        )


def merge_results(parts: list[LoadResult]) -> LoadResult:
    """Combine per-process results; per-second rows are summed by second index."""
    if not parts:
        raise ValueError("nothing to merge")
    out = LoadResult(model=parts[0].model)
    sent = [p for p in parts if p.first_send > 0]
    out.first_send = min((p.first_send for p in sent), default=0.0)
    out.last_response = max((p.last_response for p in sent), default=0.0)
    rows: dict[int, dict[str, int]] = {}
    for p in parts:
        out.requests += p.requests
        out.completed += p.completed
        out.ok += p.ok
        out.accepted_ids.extend(p.accepted_ids)
        out.failed_ids.update(p.failed_ids)
        for kind, n in p.errors.items():
            out.errors[kind] = out.errors.get(kind, 0) + n
        out.latency.merge(p.latency)
        out.cpu.extend(p.cpu)
        out.intended += p.intended
        out.late += p.late
        out.unsent += p.unsent
        for i, stage in enumerate(p.stages):
            if i == len(out.stages):
                out.stages.append(StageResult())
            out.stages[i].add(stage)
        for row in p.per_second:
            acc = rows.setdefault(
                row["t"], {"t": row["t"], "completed": 0, "ok": 0, "errors": 0, "users": 0}
            )
            for k in ("completed", "ok", "errors", "users"):
                acc[k] += row[k]
    out.per_second = [rows[t] for t in sorted(rows)]
    return out.finalize()
