"""Each of the five workloads runs, touches the counter once and writes the ledger once."""

from __future__ import annotations

import asyncio

import pytest
import redis

from taskbench.ledger import Ledger
from taskbench.messages import WORKLOADS, TaskMessage
from taskbench.settings import Settings
from taskbench.workloads import Workloads, crunch


def test_crunch_is_deterministic() -> None:
    assert crunch(1000) == crunch(1000)
    assert crunch(0) == 0


@pytest.mark.parametrize("workload", WORKLOADS)
def test_workload_runs_and_records(workload: str, redis_url: str, client: redis.Redis, run_id: str) -> None:
    settings = Settings(redis_url=redis_url, run_id=run_id, io_delay=0.01, cpu_iterations=20_000)

    async def go() -> None:
        async with Workloads(settings) as workloads:
            tasks = [
                TaskMessage(task_id=f"t{i}", workload=workload, value=2, enqueued_at=0.0)
                for i in range(6)
            ]
            await asyncio.gather(*(workloads.run(t) for t in tasks))

    asyncio.run(go())
    assert int(client.get(f"{settings.prefix}counter") or 0) == 12
    counts, times = Ledger(settings.prefix).read(client)
    assert counts == {f"t{i}": 1 for i in range(6)}
    assert all(start <= fin for _, start, fin in times.values())


def test_pools_are_created_once_and_shut_down(redis_url: str, client: redis.Redis, run_id: str) -> None:
    settings = Settings(redis_url=redis_url, run_id=run_id, cpu_iterations=1000, threads=2, processes=2)

    async def go() -> tuple[object, object, Workloads]:
        async with Workloads(settings) as workloads:
            await workloads.run(TaskMessage(task_id="a", workload="io/thread", value=1, enqueued_at=0))
            await workloads.run(TaskMessage(task_id="b", workload="cpu/process", value=1, enqueued_at=0))
            pools = (workloads._threads, workloads._processes)
            await workloads.run(TaskMessage(task_id="c", workload="io/thread", value=1, enqueued_at=0))
            await workloads.run(TaskMessage(task_id="d", workload="cpu/process", value=1, enqueued_at=0))
            assert (workloads._threads, workloads._processes) == pools
            return pools[0], pools[1], workloads

    threads, processes, workloads = asyncio.run(go())
    assert threads is not None and processes is not None
    assert workloads._threads is None and workloads._processes is None


def test_unknown_workload_is_refused(redis_url: str, run_id: str) -> None:
    settings = Settings(redis_url=redis_url, run_id=run_id)

    async def go() -> None:
        async with Workloads(settings) as workloads:
            await workloads.run(TaskMessage(task_id="a", workload="io/nope", value=1, enqueued_at=0))

    with pytest.raises(ValueError, match="unknown workload"):
        asyncio.run(go())
