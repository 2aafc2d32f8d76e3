"""Which faults a ``--target`` run can inject, and the one line that says why not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from taskbench.harness.faults.kinds import Fault
from taskbench.harness.faults.on_target import TargetFault, target_fault


def _on(text: str, *, worker_cmd: str | None = None, worker_pid: int | None = None, broker_url: str | None = None,
        allowed: bool = False, api_cmd: str | None = None) -> TargetFault:
    return target_fault(Fault.parse(text), worker_cmd=worker_cmd, worker_pid=worker_pid, broker_url=broker_url,
                        allowed=allowed, api_cmd=api_cmd)


def test_a_worker_fault_needs_a_worker_the_harness_can_reach() -> None:
    with pytest.raises(ValueError, match="needs --worker-cmd"):
        _on("kill-worker@3")
    with pytest.raises(ValueError, match="needs --worker-cmd"):
        _on("pause-worker@3+2", worker_pid=123)
    with pytest.raises(ValueError, match="killed once"):
        _on("kill-worker@3/2", worker_pid=123)
    assert _on("kill-worker@3/2", worker_cmd="arq worker.WorkerSettings").spec.action.__name__ == "kill_and_restart"
    assert _on("kill-worker@3", worker_pid=123).spec.action.__name__ == "kill_worker_pid"


def test_a_fault_on_the_users_redis_needs_its_url_and_the_users_leave() -> None:
    with pytest.raises(ValueError, match="needs --broker-url"):
        _on("stall-broker@2+1")
    with pytest.raises(ValueError, match="--allow-fault-on-target"):
        _on("restart-broker@2", broker_url="redis://127.0.0.1:6379/0")
    fault = _on("restart-broker@2", broker_url="redis://127.0.0.1:6379/0", allowed=True)
    assert fault.spec.action.__name__ == "restart_target_redis"
    assert _on("stall-broker@2+1", broker_url="redis://127.0.0.1:6379/0", allowed=True).spec.check is not None


def test_the_api_is_killed_only_when_the_harness_started_it() -> None:
    with pytest.raises(ValueError, match="needs --api-cmd"):
        _on("kill-api@3")
    assert _on("kill-api@3", api_cmd="uvicorn app:app").describe() == "kill-api@3"


def test_a_count_bounded_load_on_a_target_is_paced_past_its_fault(tmp_path: Path) -> None:
    # as on the reference stack: a fast service's 3000 requests would be over before a kill at 2 s
    from taskbench.driver import LoadSpec
    from taskbench.harness.commands.target import TargetConfig, TargetRunner

    fault = _on("kill-worker@2", worker_cmd="python -m my_worker")
    config = TargetConfig(url="http://127.0.0.1:8000/tasks", load=LoadSpec(users=100, requests=3000), fault=fault,
                          worker_cmd="python -m my_worker", output=tmp_path)
    runner = TargetRunner(config, say=lambda _: None)
    assert runner.config.load.pace == pytest.approx(4 * 100 / 3000) and runner.config.fault == fault
    assert runner.pace_line is not None and "spread over at least 4 s" in runner.pace_line
    own = TargetRunner(dataclasses.replace(config, load=LoadSpec(users=100, requests=3000, duration=6)))
    assert own.config.load.pace is None and own.pace_line is None
