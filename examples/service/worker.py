"""The arq worker of the example service: ``arq worker.WorkerSettings``.

``@recorded`` is the probe's second line: each execution of ``process_order`` is recorded in
taskbench's ledger (``TASKBENCH_LEDGER_URL``) with the task reference the API handed it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from arq.connections import RedisSettings
from taskbench_probe import recorded


@recorded  # probe, line 2
async def process_order(ctx: dict[str, Any], order: dict[str, Any]) -> int:
    await asyncio.sleep(0.005)  # the work: a call to another service, say
    return int(order.get("quantity", 1))


class WorkerSettings:
    functions: ClassVar[list[Any]] = [process_order]
    redis_settings = RedisSettings.from_dsn(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    queue_name = os.environ.get("ARQ_QUEUE", "arq:queue")
    max_jobs = 20
    # a job whose worker died runs again once its in-progress key expires: job_timeout + 10 s (arq)
    job_timeout = 5
