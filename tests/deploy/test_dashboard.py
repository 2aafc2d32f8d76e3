"""Every panel of the Grafana dashboard returns data from a real Prometheus scraping a real stack."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.prometheus import Prometheus, Target, find_prometheus
from taskbench.ledger import Ledger
from taskbench.net import free_port
from taskbench.wait import wait_until
from tests.helpers import request, served

pytestmark = pytest.mark.slow

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "dashboards" / "taskbench.json"


def _queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel["targets"]]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Prometheus]:
    if not find_prometheus():
        pytest.skip("prometheus is not installed (./run-tests installs it where apt-get is available)")
    server = Prometheus(tmp_path / "prometheus", free_port())
    server.start(dict(os.environ))
    try:
        yield server
    finally:
        server.stop()


def test_every_panel_query_returns_data(prometheus: Prometheus, redis_url: str, run_id: str,
                                        client: redis.Redis, tmp_path: Path) -> None:
    python = str(ensure_env("arq", quiet=True))
    env = {"TASKBENCH_BACKEND": "arq", "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_RUN_ID": run_id,
           "TASKBENCH_IO_DELAY": "0.02", "TASKBENCH_METRICS_DIR": str(tmp_path / "metrics")}
    prefix = f"taskbench:{run_id}:"
    with served(tmp_path, env, python=python) as port, \
            ProcessSet({**os.environ, **env}, stop_timeout=10) as procs:
        worker = procs.start("worker", [python, "-m", "taskbench", "worker"], tmp_path / "worker.log")
        wait_until(lambda: client.hlen(f"{prefix}metrics"), 60, what="the worker's metrics URL",
                   abort=lambda: None if worker.alive() else f"worker exited: {worker.tail()}")
        worker_url = next(iter(client.hvals(f"{prefix}metrics"))).decode()
        prometheus.set_targets([Target(url=f"http://127.0.0.1:{port}/metrics", backend="arq", component="api"),
                                Target(url=worker_url, backend="arq", component="worker")])

        def health() -> dict[str, str]:
            return {t["labels"]["component"]: t["health"] for t in prometheus.active_targets()}

        wait_until(lambda: health() == {"api": "up", "worker": "up"}, 30, what="both targets scraped")

        def last_scrape() -> float:
            """When Prometheus last scraped both targets (the older of the two)."""
            found = prometheus.query("min(timestamp(up))")
            return float(found[0]["value"][1]) if found else 0.0

        ids = iter(range(10_000))

        def post() -> int:
            return request(port, "POST", "/api/v1/incr/io/simple/arq", f'{{"task_id": "d{next(ids)}"}}')[0]

        batches, batch = 4, 15
        for _ in range(batches):  # load spread over several scrapes, so that rates have two samples
            with ThreadPoolExecutor(4) as pool:
                assert set(pool.map(lambda _: post(), range(batch))) == {202}
            sent = time.time()
            wait_until(lambda: last_scrape() > sent, 30, what="a scrape after the batch")  # noqa: B023
        ledger = Ledger(prefix)
        wait_until(lambda: ledger.executed_count(client) >= batches * batch, 60, what="every task executed")
        done = time.time()
        # the counters are complete once a scrape of both targets came after the last task
        wait_until(lambda: last_scrape() > done, 30, what="a scrape after the last task")

        def empty_panels() -> list[str]:
            empty = []
            for title, expr in _queries():
                concrete = expr.replace("$backend", ".*").replace("$__rate_interval", "1m")
                if not prometheus.query(concrete):
                    empty.append(f"{title}: {concrete}")
            return empty

        filled = wait_until(lambda: not empty_panels(), 15, what="data in every panel", raise_on_timeout=False)
        assert health() == {"api": "up", "worker": "up"}, prometheus.active_targets()
        assert filled, "panels without data:\n" + "\n".join(empty_panels())
        succeeded = prometheus.query('sum(taskbench_tasks_succeeded_total{backend="arq"})')
        assert float(succeeded[0]["value"][1]) == batches * batch
