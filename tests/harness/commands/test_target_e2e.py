"""``taskbench run --target`` against the example service (examples/service/), started as a user starts it.

Real processes throughout: a private Redis (the example's broker and taskbench's ledger), the example's
API under uvicorn and its arq worker from the arq environment with the probe importable, and the
harness as a command. The figures checked are the audit's, read back from result.json.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port, listening
from taskbench.wait import wait_until
from tests.helpers import harness_cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "service"
PROBE = ROOT / "probe" / "src"

pytestmark = pytest.mark.slow

#: the fault runs' offered rate (open model): above what the example's worker runs (~200 tasks/s here), so
#: it always holds max_jobs at the fault and a backlog waits behind them, and the drain is seconds, not the
#: minute that 10 closed-loop users' ~15,000 tasks took
RATE = 300


@pytest.fixture(scope="module")
def arq_bin() -> Path:
    return ensure_env("arq").parent  # the environment's bin folder (ensure_env gives its python)


def _env(redis_url: str, extra_path: Path | None = None) -> dict[str, str]:
    path = os.pathsep.join(str(p) for p in (extra_path, PROBE) if p is not None)
    return {"REDIS_URL": redis_url, "TASKBENCH_LEDGER_URL": redis_url, "PYTHONPATH": path,
            "ARQ_QUEUE": f"arq:queue:{free_port()}"}


def _user_cmd(env: dict[str, str], argv: str) -> str:
    """A command as a user types it in the example's folder (what --worker-cmd and --api-cmd take)."""
    assigned = " ".join(f"{k}={v}" for k, v in env.items())
    return f"cd {EXAMPLE} && {assigned} exec {argv}"


@pytest.fixture
def service(tmp_path: Path, broker_redis_url: str, arq_bin: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """The example's API (``uvicorn app:app``), run by the "user": the test, not taskbench."""
    port = free_port()
    env = _env(broker_redis_url)
    with Stack({**os.environ, **env}, name=f"example-api-{port}", stop_timeout=5) as stack:
        stack.start("api", ["/bin/sh", "-c", _user_cmd(env, f"{arq_bin}/uvicorn app:app --host 127.0.0.1 "
                                                              f"--port {port} --log-level warning")],
                    tmp_path / "api.log")
        stack.wait_ready(lambda: listening(port), timeout=60, what=f"the example API (log {tmp_path / 'api.log'})")
        yield port, env


def _run(args: list[str], out: Path) -> tuple[int, str, dict[str, Any] | None]:
    with harness_cli(["run", *args, "--output", str(out)], cwd=ROOT) as proc:
        output, _ = proc.communicate(timeout=280)
    results = list(out.glob("*/result.json"))
    return proc.returncode, output, json.loads(results[0].read_text()) if results else None


def test_the_example_keeps_arqs_promise_when_its_worker_is_killed_mid_load(
        service: tuple[int, dict[str, str]], broker_redis_url: str, arq_bin: Path, tmp_path: Path) -> None:
    port, env = service
    code, output, result = _run([
        "--target", f"http://127.0.0.1:{port}/orders", "--payload", str(EXAMPLE / "payload.json"),
        "--redis-url", broker_redis_url, "--backend", "arq",
        "--worker-cmd", _user_cmd(env, f"{arq_bin}/arq worker.WorkerSettings"),
        "--fault", "kill-worker@3", "--duration", "6", "--rate", str(RATE), "--users", "10"], tmp_path / "results")
    assert result is not None, output
    (case,) = result["cases"]
    assert code == 0, output
    assert case["fault"]["injected"] and case["fault"]["killed_pid"], output
    assert "at-least-once" in case["fault"]["promise"]["text"]
    audit = case["audit"]
    assert audit["accepted"] > 0 and audit["lost"] == 0, output  # arq keeps an enqueued task across a kill
    assert audit["executed"] == audit["accepted"]
    assert audit["categories"]["ok"] + audit["duplicated"] >= audit["accepted"]  # a re-run is arq's right
    assert case["summary"]["lost"] == 0 and case["status"] in ("ok", "errors")


def test_the_after_response_variant_loses_answered_tasks_when_its_api_dies(
        broker_redis_url: str, arq_bin: Path, tmp_path: Path) -> None:
    port, env = free_port(), _env(broker_redis_url)
    code, output, result = _run([
        "--target", f"http://127.0.0.1:{port}/orders", "--payload", str(EXAMPLE / "payload.json"),
        "--redis-url", broker_redis_url, "--backend", "arq",
        "--worker-cmd", _user_cmd(env, f"{arq_bin}/arq worker.WorkerSettings"),
        "--api-cmd", _user_cmd(env, f"{arq_bin}/uvicorn app_after_response:app --host 127.0.0.1 --port {port} "
                                    "--log-level warning"),
        "--fault", "kill-api@1.5", "--duration", "3", "--users", "10", "--drain-stall", "15"], tmp_path / "results")
    assert result is not None, output
    (case,) = result["cases"]
    assert code == 1, output  # the service answered 202 for tasks arq never got: arq's promise is not kept
    audit = case["audit"]
    assert audit["lost"] > 0, output
    assert case["summary"]["lost"] == audit["lost"]
    assert audit["executed"] + audit["lost"] == audit["accepted"]
    assert any("lost, which arq on redis" in line for line in case["failures"]), case["failures"]


def test_a_service_whose_task_is_not_decorated_stops_the_run_early(
        service: tuple[int, dict[str, str]], broker_redis_url: str, arq_bin: Path, tmp_path: Path) -> None:
    port, env = service
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "plain_worker.py").write_text(
        "from worker import WorkerSettings, process_order\n\n\n"
        "class PlainSettings(WorkerSettings):\n"
        "    functions = [process_order.__wrapped__]  # the decorator forgotten\n")
    worker_env = _env(broker_redis_url, plain)
    worker_env["ARQ_QUEUE"] = env["ARQ_QUEUE"]
    code, output, result = _run([
        "--target", f"http://127.0.0.1:{port}/orders", "--payload", str(EXAMPLE / "payload.json"),
        "--redis-url", broker_redis_url, "--worker-cmd", _user_cmd(worker_env, f"{arq_bin}/arq plain_worker.PlainSettings"),
        "--duration", "200", "--users", "4"], tmp_path / "results")
    assert code != 0, output
    assert "no execution reached the ledger" in output and "instrumentation is missing" in output, output
    assert "Traceback" not in output
    # the result says so as well: no audit (nothing to judge), the one failure, the load's own figures
    assert result is not None, "a result.json is written"
    (case,) = result["cases"]
    assert case["status"] == "failed" and case["audit"] is None
    assert len(case["failures"]) == 1 and "instrumentation is missing" in case["failures"][0]
    assert case["summary"]["requests"] > 0 and case["summary"]["lost"] is None


def test_a_target_that_is_down_is_one_line(broker_redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    code, output, result = _run(["--target", f"http://127.0.0.1:{port}/orders", "--redis-url", broker_redis_url,
                                 "--requests", "10"], tmp_path / "results")
    assert code == 2 and result is None
    assert f"the target http://127.0.0.1:{port}/orders is down" in output and "refused" in output, output
    assert "Traceback" not in output


def test_a_worker_given_by_pid_is_killed_and_the_other_keeps_arqs_promise(
        service: tuple[int, dict[str, str]], broker_redis_url: str, arq_bin: Path, tmp_path: Path) -> None:
    # the user's own two workers, started and supervised by them (here: the test); taskbench gets one's pid
    import psutil

    port, env = service
    worker = _user_cmd(env, f"{arq_bin}/arq worker.WorkerSettings")
    with Stack({**os.environ, **env}, name=f"example-workers-{port}", stop_timeout=5) as stack:
        doomed = stack.start("worker-a", ["/bin/sh", "-c", worker], tmp_path / "worker-a.log")
        stack.start("worker-b", ["/bin/sh", "-c", worker], tmp_path / "worker-b.log")
        # sh execs the worker (the pid is the worker's own), a moment after it started on a busy machine
        wait_until(lambda: psutil.Process(doomed.pid).name() != "sh", 10, what="sh exec'ing the worker")
        code, output, result = _run([
            "--target", f"http://127.0.0.1:{port}/orders", "--payload", str(EXAMPLE / "payload.json"),
            "--redis-url", broker_redis_url, "--backend", "arq", "--worker-pid", str(doomed.pid),
            # twice the rate: above what both workers run, so the doomed one holds max_jobs at the kill
            "--fault", "kill-worker@3", "--duration", "6", "--rate", str(2 * RATE), "--users", "10"],
            tmp_path / "results")
        assert not doomed.alive(), "the process of --worker-pid was killed"
        assert stack.procs.procs[1].alive(), "the other worker was left alone"
    assert result is not None, output
    (case,) = result["cases"]
    assert code == 0, output
    fault = case["fault"]
    assert fault["injected"] and fault["killed_pid"] == doomed.pid, fault
    assert any(f"pid {doomed.pid}" in line and "SIGKILL" in line for line in fault["proof"]), fault["proof"]
    audit = case["audit"]
    # what the killed worker held comes back after arq's job timeout + 10 s, on the worker left
    assert audit["accepted"] > 0 and audit["lost"] == 0 and audit["executed"] == audit["accepted"], output


def test_a_stall_of_the_users_redis_is_injected_only_when_allowed_and_audited(
        service: tuple[int, dict[str, str]], broker_redis_url: str, arq_bin: Path, tmp_path: Path) -> None:
    # CLIENT PAUSE on the example's own broker, which the user allows: the service stalls, nothing is lost
    import redis

    port, env = service
    args = ["--target", f"http://127.0.0.1:{port}/orders", "--payload", str(EXAMPLE / "payload.json"),
            "--redis-url", broker_redis_url, "--backend", "arq", "--broker-url", broker_redis_url,
            "--worker-cmd", _user_cmd(env, f"{arq_bin}/arq worker.WorkerSettings"),
            "--fault", "stall-broker@2+2", "--duration", "6", "--rate", str(RATE), "--users", "10"]
    code, output, _ = _run(args, tmp_path / "refused")
    assert code != 0 and "--allow-fault-on-target" in output and "Traceback" not in output, output
    code, output, result = _run([*args, "--allow-fault-on-target"], tmp_path / "results")
    assert result is not None, output
    (case,) = result["cases"]
    assert code == 0, output
    fault = case["fault"]
    assert fault["injected"] and fault["target"] == "broker", fault
    answered = [row["completed"] for row in case["load"]["per_second"]]
    assert min(answered[1:-1]) < max(answered) / 2, f"a second of the pause answered less: {answered}"
    audit = case["audit"]
    assert audit["accepted"] > 0 and audit["lost"] == 0 and audit["executed"] == audit["accepted"], output
    assert redis.Redis.from_url(broker_redis_url).ping(), "the pause ended"
