"""Small synthetic results: a queue run whose figures are drawn from known distributions (no processes)."""

from __future__ import annotations

import random

from taskbench.histogram import Histogram
from taskbench.results import AuditResult, FaultRecord, Load, QueueCase, Result, Summary


def queue_run(*, rps: int = 500, latency_ms: float = 20.0, e2e_ms: float = 40.0, seconds: int = 8,
              lost: int = 0, seed: int = 1, fault: bool = False, run_id: str = "r") -> Result:
    rng = random.Random(seed)
    latency, e2e = Histogram(), Histogram()
    per_second = []
    for t in range(seconds):
        n = max(1, round(rng.gauss(rps, rps * 0.03)))
        per_second.append({"t": t, "completed": n, "ok": n, "errors": 0, "users": 50})
        for _ in range(n):
            latency.record(round(rng.expovariate(1 / (latency_ms * 1000))))
            e2e.record(round(rng.expovariate(1 / (e2e_ms * 1000))))
    requests = sum(row["completed"] for row in per_second)
    lat = latency.summary()
    load = Load.model_validate({
        "requests": requests, "completed": requests, "ok": requests, "elapsed_s": float(seconds),
        "rps": requests / seconds, "latency": latency.to_dict(), "latency_ms": lat, "per_second": per_second,
        "cpu": [{"cpu_s": 1.0, "wall_s": 8.0, "utilization": 0.3}]})
    executed = [row["ok"] for row in per_second] + [rps // 3]
    audit = AuditResult.model_validate({
        "accepted": requests, "executed": requests - lost, "lost": lost, "duplicated": 0,
        "end_to_end_ms": e2e.summary(), "end_to_end_histogram": e2e.to_dict(),
        "executed_per_second": executed, "start": 1000.0, "first_start": 1000.1, "last_finish": 1000.0 + seconds})
    summary = Summary(requests=requests, rps=requests / seconds, p50_ms=lat["p50"], p95_ms=lat["p95"],
                      p99_ms=lat["p99"], errors_pct=0.0, time_to_run_all_s=seconds + 0.5, accepted=requests,
                      executed=requests - lost, lost=lost, duplicated=0, e2e_p95_ms=e2e.summary()["p95"],
                      driver_cpu_pct=30.0)
    record = None
    if fault:
        record = FaultRecord(fault="kill-worker@2", target="worker-0", injected=True, at=1002.0, killed_pid=1,
                             restarted_pid=2, ready_after_s=1.2, accepting_again_s=0.4, executing_again_s=2.5)
    case = QueueCase(backend="arq", load=load, audit=audit, summary=summary, status="ok" if not lost else "failed",
                     fault=record)
    return Result(kind="run", run_id=run_id, created="2026-11-23T12:00:00+00:00", command=["taskbench", "run"],
                  config={"workload": "io/simple", "io_delay": 0.0, "load": {"model": "closed", "users": 50}},
                  environments={"arq": {"python": "3.11.7", "packages": {"arq": "0.26.3", "redis": "5.2.1"}}},
                  cases=[case])
