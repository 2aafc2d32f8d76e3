"""A small real run per backend: API, worker processes, load, drain, audit: nothing lost or doubled."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from taskbench import backends
from taskbench.driver import LoadSpec
from taskbench.harness.commands.run import Runner
from taskbench.harness.config import Placement, RunConfig

pytestmark = pytest.mark.slow


def _run(redis_url: str, out_dir: Path, **overrides: object) -> dict:
    params: dict = {
        "backends": ("background", "arq"),
        "load": LoadSpec(users=20, requests=300),
        "redis_url": redis_url,
        "output": out_dir,
        "warmup": 20,
        "drain_timeout": 60,
        "placement": Placement.parse("auto"),
    }
    params.update(overrides)
    return Runner(RunConfig(**params), say=lambda _: None).run().model_dump(mode="json")


def _check_clean(case: dict, requests: int, redis_url: str) -> None:
    s = case["summary"]
    assert case["status"] == "ok", case["failures"]
    assert s["requests"] == requests
    assert s["accepted"] == requests
    assert s["executed"] == requests
    assert (s["lost"], s["duplicated"]) == (0, 0)
    assert s["time_to_run_all_s"] is not None and s["time_to_run_all_s"] > 0
    assert sum(case["audit"]["executed_per_second"]) == requests  # the drain as a curve
    assert case["exit_codes"] and all(code in (0, -15) for code in case["exit_codes"].values())
    assert case["cleanup"]["kept"] is False
    # every process's own counters agree with the ledger (warm-up included)
    metrics = case["metrics"]
    assert metrics["match"], metrics
    assert metrics["totals"]["taskbench_tasks_succeeded_total"] == metrics["ledger_executions"] > requests
    if case["has_worker"]:
        workers = [name for name in metrics["components"] if name.startswith("worker:")]
        assert len(workers) == case["workers"]
        assert all(metrics["components"][w]["taskbench_tasks_succeeded_total"] > 0 for w in workers)
    # the run leaves no keys behind: neither under its prefix nor those its library creates
    client = redis.Redis.from_url(redis_url)
    try:
        patterns = [f"taskbench:{case['run_id']}:*",
                    *backends.info(case["backend"]).owned_key_patterns(case["run_id"])]
        for pattern in patterns:
            assert list(client.scan_iter(match=pattern)) == [], pattern
    finally:
        client.close()


def test_every_backend_runs_every_task_once(redis_url: str, out_dir: Path) -> None:
    result = _run(redis_url, out_dir)
    assert [c["backend"] for c in result["cases"]] == ["background", "arq"]
    for case in result["cases"]:
        _check_clean(case, 300, redis_url)
    assert result["environments"]["arq"]["packages"]["arq"]
    assert result["machine"]["logical_cpus"]
    assert (out_dir / result["run_id"] / "result.json").exists()


@pytest.mark.parametrize("workload", ["io/sync", "io/thread", "cpu/simple", "cpu/process"])
def test_arq_runs_each_workload(redis_url: str, out_dir: Path, workload: str) -> None:
    result = _run(redis_url, out_dir, backends=("arq",), workload=workload,
                  load=LoadSpec(users=10, requests=50), cpu_iterations=10_000)
    _check_clean(result["cases"][0], 50, redis_url)


def test_two_competing_arq_workers_run_each_task_once(redis_url: str, out_dir: Path) -> None:
    result = _run(redis_url, out_dir, backends=("arq",), workers=2,
                  load=LoadSpec(users=20, requests=500))
    _check_clean(result["cases"][0], 500, redis_url)


def _private_postgres_left(logs: Path) -> list[str]:
    """What is left of the case's private PostgreSQL (its port from its log): a process or a data folder
    (``taskbench-pg-<port>-*``). Other tests' servers, running meanwhile, are not this one's."""
    import re
    import tempfile

    import psutil

    log = next(Path(logs, "broker").glob("*.log"))
    found = re.search(r'listening on IPv4 address "127\.0\.0\.1", port (\d+)', log.read_text())
    assert found, log.read_text()[-2000:]
    prefix = f"taskbench-pg-{found[1]}-"
    left = [str(p) for p in Path(tempfile.gettempdir()).glob(f"{prefix}*")]
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info.get("name") == "postgres" and prefix in " ".join(proc.info.get("cmdline") or []):
            left.append(f"pid {proc.pid}")
    return left


def test_a_redis_and_a_postgresql_backend_each_on_its_own_broker(redis_url: str, out_dir: Path) -> None:
    """No --broker: arq on Redis, pgqueuer on a private PostgreSQL the harness starts and removes."""
    result = _run(redis_url, out_dir, backends=("arq", "pgqueuer"))
    cases = {c["backend"]: c for c in result["cases"]}
    assert (cases["arq"]["broker"], cases["pgqueuer"]["broker"]) == ("redis", "postgres")
    for case in cases.values():
        _check_clean(case, 300, redis_url)
    pg = cases["pgqueuer"]
    assert pg["durable"] is True, pg["durability"]
    assert "fsync on, synchronous_commit on" in pg["durability"]
    assert pg["cleanup"]["purge"] == "ok"
    # the private server is gone, its data folder too; its log stays with the case's
    assert _private_postgres_left(Path(pg["logs"])) == []


def test_a_postgresql_restart_is_judged_by_the_registry_promise(redis_url: str, out_dir: Path) -> None:
    """restart-broker@1 on saq-postgres with --option saq.retries=3: the private PostgreSQL is SIGKILLed and started
    again on its data; an at-least-once backend on fsynced commits keeps every accepted task (duplicates are
    figures). The result records the setting and the promise it gave."""
    from taskbench.harness.faults.kinds import Fault

    result = _run(redis_url, out_dir, backends=("saq-postgres",), fault=Fault.parse("restart-broker@1"),
                  load=LoadSpec(users=20, rate=None, duration=3.0, requests=5000), task_timeout=5.0,
                  restart_workers=True, options={"saq": {"retries": 3}})
    case = result["cases"][0]
    assert case["promise_settings"] == {"retries": 3}
    assert case["delivery"].startswith("at-least-once: "), case["delivery"]
    fault = case["fault"]
    assert fault["injected"], fault
    assert fault["promise"]["keeps_accepted"] and not fault["promise"]["no_duplicates"]
    assert "at-least-once" in fault["promise"]["text"]
    restart = fault["broker_restart"]
    assert restart and restart["new_pid"] != restart["old_pid"], restart
    assert case["summary"]["lost"] == 0, case["summary"]
    # how fast executions came back is a figure of the machine's load (a speed, not asserted here): a
    # case failed only for its recovery rate is judged right on the promise
    timing = [f for f in case["failures"] if "never recovered" in f]
    assert case["status"] in ("ok", "errors") or case["failures"] == timing, case["failures"]
