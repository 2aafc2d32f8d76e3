"""Metrics: the names and labels of the clean set, and true totals across processes."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.scrape import scrape
from taskbench.ledger import Ledger
from taskbench.metrics import exposition_registry, task_metrics
from taskbench.net import free_port
from taskbench.wait import wait_until
from tests.helpers import request


def test_task_metrics_follow_the_naming_guide() -> None:
    from prometheus_client import generate_latest

    child = task_metrics("unit-test").task("io/simple")
    child.started.inc()
    child.succeeded.inc()
    child.duration.observe(0.02)
    text = generate_latest(exposition_registry()).decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line.startswith("taskbench_")}
    assert {"taskbench_tasks_started_total", "taskbench_tasks_succeeded_total",
            "taskbench_task_duration_seconds_bucket", "taskbench_task_queue_wait_seconds_count",
            "taskbench_task_end_to_end_seconds_sum", "taskbench_tasks_in_progress"} <= names
    # other tests in this process may have counted tasks of other backends: pick this test's series
    lines = [x for x in text.splitlines()
             if x.startswith("taskbench_tasks_started_total{") and 'backend="unit-test"' in x]
    assert len(lines) == 1, text
    assert 'task="io/simple"' in lines[0] and 'queue="default"' in lines[0]
    assert "task_id" not in text
    assert all(n.startswith("taskbench_") and not n.endswith("_ms") for n in names)


@pytest.mark.slow
def test_two_uvicorn_workers_report_true_totals(tmp_path: Path, redis_url: str, run_id: str,
                                                client: redis.Redis) -> None:
    """Each scrape hits one of two uvicorn workers; each must return the sum of both."""
    port = free_port()
    env = {**os.environ, "TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_METRICS_DIR": str(tmp_path / "metrics")}
    with ProcessSet(env, stop_timeout=10) as procs:
        api = procs.start("api", [sys.executable, "-m", "taskbench", "serve", "--port", str(port),
                                  "--api-processes", "2"], tmp_path / "api.log")

        def healthy() -> bool:
            try:
                return request(port, "GET", "/health")[0] == 200
            except OSError:
                return False

        wait_until(healthy, 30, what="the API's /health",
                   abort=lambda: None if api.alive() else f"API exited: {api.tail()}")
        body = '{{"task_id": "{}"}}'
        ids: list[str] = []

        def workers_with_files() -> set[str]:
            return {p.name.split("_")[-1] for p in (tmp_path / "metrics").rglob("*.db")}

        def both_answered() -> bool:
            # batches of new connections, which the kernel spreads over both workers once both accept (on a
            # busy machine the second may start seconds after the first answered /health)
            batch = [f"m{len(ids) + i}" for i in range(20)]
            with ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(lambda t: request(port, "POST", "/api/v1/incr/io/simple/background",
                                                        body.format(t))[0], batch))
            assert codes == [202] * len(batch)
            ids.extend(batch)
            return len(workers_with_files()) >= 2

        wait_until(both_answered, 60, what="requests answered by both uvicorn workers")
        ledger = Ledger(f"taskbench:{run_id}:")
        wait_until(lambda: ledger.executed_count(client) >= len(ids), 30, what=f"{len(ids)} executed tasks")

        def counted() -> dict[str, float] | None:
            # a task's ledger entry comes just before its counters and the request's are updated
            totals = scrape(f"http://127.0.0.1:{port}/metrics")
            done = (totals.get("taskbench_tasks_succeeded_total") == len(ids)
                    and totals.get("http_requests_total") == len(ids))
            return totals if done else None

        wait_until(counted, 10, what="the counters of every task and request")
        for _ in range(6):
            totals = scrape(f"http://127.0.0.1:{port}/metrics")
            assert totals["taskbench_tasks_succeeded_total"] == len(ids), totals
            assert totals["http_requests_total"] == len(ids), totals


def test_worker_metrics_are_loopback_by_default() -> None:
    from taskbench.settings import Settings

    settings = Settings()
    assert (settings.metrics_host, settings.metrics_port) == ("127.0.0.1", 0)


def test_a_scrape_skips_a_metrics_file_still_being_created(tmp_path: Path) -> None:
    """A process's .db file exists empty for a moment; the library's collector raised on it (a 500)."""
    import struct

    from prometheus_client.multiprocess import MultiProcessCollector

    from taskbench.metrics import SettledFilesCollector

    (tmp_path / "counter_4242.db").write_bytes(b"")
    with pytest.raises(struct.error):
        list(MultiProcessCollector(None, path=str(tmp_path)).collect())
    assert list(SettledFilesCollector(str(tmp_path)).collect()) == []
