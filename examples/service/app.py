"""A small FastAPI service that hands its work to arq: the enqueue is awaited before the 2xx.

Run it (README.md): ``uvicorn app:app --port 8000`` and ``arq worker.WorkerSettings``. The one line
that taskbench's probe adds here is marked; the other is in worker.py.
"""

from __future__ import annotations

from arq.connections import ArqRedis
from common import Order, lifespan
from fastapi import FastAPI, Request
from taskbench_probe import task_ref

app = FastAPI(lifespan=lifespan)


@app.post("/orders", status_code=202)
async def create_order(order: Order, request: Request) -> dict[str, str]:
    pool: ArqRedis = request.app.state.arq
    # the task is in Redis before the 202 goes out: a worker that dies later loses nothing
    await pool.enqueue_job("process_order", order.model_dump(), taskbench=task_ref(request))  # probe, line 1
    return {"status": "queued"}
