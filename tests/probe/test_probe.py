"""The probe records a user's task executions in taskbench's ledger: real Redis, real calls."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import taskbench_probe
from taskbench_probe import recorded, task_ref


@pytest.fixture
def ledger_env(redis_url: str, run_id: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> str:
    """The probe writes to the test's Redis under the test's run prefix (``client`` deletes it after)."""
    monkeypatch.setenv("TASKBENCH_LEDGER_URL", redis_url)
    return run_id


def _row(client: redis.Redis, run: str, task_id: str) -> tuple[int, list[float], Any, Any]:
    p = f"taskbench:{run}:ledger:"
    count = client.hget(f"{p}n", task_id)
    times = client.hget(f"{p}t", task_id)
    return (int(count) if count else 0, [float(t) for t in times.split()] if times else [],
            client.hget(f"{p}f", task_id), client.hget(f"{p}c", task_id))


def test_an_async_task_is_recorded_once_per_execution_and_never_sees_the_reference(
        ledger_env: str, client: redis.Redis) -> None:
    calls: list[tuple[Any, ...]] = []

    @recorded
    async def process(ctx: dict[str, Any], order: dict[str, Any]) -> str:
        calls.append((ctx, order))
        return "done"

    sent = time.time() - 0.5
    ref = f"{ledger_env}.0-1@{sent:.6f}"
    assert asyncio.run(process({}, {"n": 1}, taskbench=ref)) == "done"
    assert calls == [({}, {"n": 1})]
    count, times, failed, _ = _row(client, ledger_env, f"{ledger_env}.0-1")
    assert count == 1 and failed is None
    assert times[0] == pytest.approx(sent, abs=1e-5) and times[0] <= times[1] <= times[2]
    asyncio.run(process({}, {"n": 1}, taskbench=ref))  # a second execution: the audit's duplicate
    assert _row(client, ledger_env, f"{ledger_env}.0-1")[0] == 2


def test_a_sync_task_that_raises_is_recorded_as_failed_with_its_type_and_the_exception_goes_on(
        ledger_env: str, client: redis.Redis) -> None:
    @recorded
    def send(address: str) -> None:
        raise ConnectionRefusedError(address)

    with pytest.raises(ConnectionRefusedError):
        send("smtp", taskbench=f"{ledger_env}.0-7")
    count, times, failed, cpu = _row(client, ledger_env, f"{ledger_env}.0-7")
    assert count == 1 and failed == b"1 ConnectionRefusedError"
    assert cpu is not None and float(cpu) >= 0
    assert times[0] == times[1]  # no send time in the reference: the task's start stands for it


def test_a_call_without_a_reference_runs_unrecorded(ledger_env: str, client: redis.Redis) -> None:
    @recorded
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert add(2, 3, taskbench="not-a-taskbench-id") == 5  # a reference taskbench never sends
    assert not list(client.scan_iter(match=f"taskbench:{ledger_env}:*"))


def test_the_reference_found_in_a_payload_field(ledger_env: str, client: redis.Redis) -> None:
    @recorded(field="request_id")
    def handle(payload: dict[str, str]) -> str:
        return payload["request_id"]

    ref = f"{ledger_env}.1-2@{time.time():.6f}"
    assert handle({"request_id": ref}) == ref  # a payload field stays where it is
    assert _row(client, ledger_env, f"{ledger_env}.1-2")[0] == 1


def test_task_ref_reads_the_header_from_a_request_a_scope_or_a_mapping() -> None:
    from starlette.requests import Request

    value = "run-1.0-3@1764190000.250000"
    scope = {"type": "http", "headers": [(b"x-taskbench-task", value.encode())]}
    assert task_ref(Request(scope)) == value
    assert task_ref(scope) == value
    assert task_ref({"X-Taskbench-Task": value}) == value
    assert task_ref({"X-Taskbench-Task": "bad value"}) is None
    assert task_ref({}) is None


def test_the_middleware_makes_the_reference_of_the_request_being_served() -> None:
    seen: list[str | None] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(task_ref())

    wrapped = taskbench_probe.TaskbenchMiddleware(app)
    value = "run-2.0-4"
    asyncio.run(wrapped({"type": "http", "headers": [(b"x-taskbench-task", value.encode())]}, None, None))
    assert seen == [value]
    assert task_ref() is None  # outside a request: none


def test_the_probe_writes_what_taskbench_reads_with_the_same_script(ledger_env: str, client: redis.Redis) -> None:
    from taskbench.ledger import RECORD_EXECUTION, Ledger

    assert taskbench_probe.RECORD_EXECUTION == RECORD_EXECUTION  # an execution means the same on both sides

    @recorded
    def flaky(n: int) -> None:
        if n:
            raise KeyError(n)

    flaky(0, taskbench=f"{ledger_env}.0-1@{time.time():.6f}")
    with pytest.raises(KeyError):
        flaky(1, taskbench=f"{ledger_env}.0-2@{time.time():.6f}")
    ledger = Ledger(f"taskbench:{ledger_env}:")
    rows = ledger.rows(client)
    assert set(rows.counts) == {f"{ledger_env}.0-1", f"{ledger_env}.0-2"} and not rows.corrupt
    assert ledger.outcomes(client).failed == {f"{ledger_env}.0-2": (1, "KeyError")}
