"""The Procrastinate backend's own parts: its schema and queue names, its refusal of a waiting id.

Runs in the procrastinate environment (the base one has no procrastinate): short scripts against the
tests' PostgreSQL (``broker_servers``), each in a schema of this test's run that ``purge`` drops.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from taskbench import backends
from taskbench.harness.processes.envs import ensure_env
from tests.conftest import BrokerServers

NAMES = textwrap.dedent("""
    import json
    from taskbench.backends._postgres import schema
    from taskbench.backends.procrastinate.backend import queue_name, retry_cron, heartbeat_interval
    from taskbench.backends.procrastinate.floor import _queue, _schema
    from taskbench.settings import Settings

    out = []
    for run in ["t-1", "a" * 64, "A.b-c_" * 9, "x" * 31 + "-y"]:
        s = Settings(run_id=run)
        out.append({"run": run, "schema": schema(s), "queue": queue_name(s),
                    "floor": [_schema(run), _queue(run)]})
    timing = {t: [retry_cron(Settings(task_timeout=t)), heartbeat_interval(Settings(task_timeout=t))]
              for t in (1, 5, 60, 600)}
    print(json.dumps({"names": out, "timing": timing}))
""")

BROKER = textwrap.dedent("""
    import asyncio, json
    from fastapi import BackgroundTasks
    from taskbench.backends.base import DuplicateTask, ServiceContext
    from taskbench.backends.procrastinate.backend import backend
    from taskbench.messages import TaskMessage
    from taskbench.settings import Settings

    async def main():
        s = Settings()
        out = {}
        await backend.prepare_broker(s)
        await backend.prepare_broker(s)  # idempotent
        try:
            async with backend.producer(ServiceContext(settings=s, workloads=None)) as producer:
                await producer.check_broker()
                task = TaskMessage(task_id="one", workload="io/simple", value=1, enqueued_at=0.0)
                await producer.enqueue(task, BackgroundTasks())
                try:
                    await producer.enqueue(task, BackgroundTasks())
                    out["second"] = "accepted"
                except DuplicateTask as exc:
                    out["second"] = f"refused {exc.task_id}"
            off = s.model_copy(update={"idempotency": False})
            async with backend.producer(ServiceContext(settings=off, workloads=None)) as producer:
                await producer.enqueue(task, BackgroundTasks())
                out["idempotency off"] = "accepted"
            out["depth"] = await backend.queue_depth(s, None)
        finally:
            await backend.purge(s)
        print(json.dumps(out))

    asyncio.run(main())
""")


def _in_env(script: str, env: dict[str, str]) -> dict[str, object]:
    python = str(ensure_env(backends.info("procrastinate").extra, quiet=True))
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "TASKBENCH_BACKEND": "procrastinate", **env})
    assert out.returncode == 0, out.stdout + out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_names_fit_postgres_and_the_floor_agrees() -> None:
    result = _in_env(NAMES, {})
    names = result["names"]
    assert isinstance(names, list)
    queues = set()
    for row in names:
        assert len(row["schema"]) <= 63, row
        assert len(row["queue"]) <= 40, row  # a NOTIFY channel: 63 bytes with procrastinate_queue_v1#
        assert row["floor"] == [row["schema"], row["queue"]], row
        queues.add(row["queue"])
    assert len(queues) == len(names)
    assert result["timing"] == {"1": ["* * * * * */1", 0.2], "5": ["* * * * * */1", 1.0],
                                "60": ["* * * * * */15", 10.0], "600": ["* * * * *", 10.0]}


@pytest.mark.slow
def test_a_waiting_id_is_refused(broker_servers: BrokerServers, run_id: str) -> None:
    url = broker_servers.url("postgres")
    result = _in_env(BROKER, {"TASKBENCH_BROKER": "postgres", "TASKBENCH_BROKER_URL": url,
                              "TASKBENCH_RUN_ID": run_id})
    assert result == {"second": "refused one", "idempotency off": "accepted", "depth": 2}
