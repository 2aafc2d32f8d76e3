"""The same service wired as seed 000 wired it: the 202 goes out first, the enqueue runs after it.

``BackgroundTasks`` runs ``enqueue`` in the API process once the response is sent, so the client's 2xx
says nothing about the task: whatever stops that process (a crash, a deploy, an OOM kill) between
the answer and the enqueue loses tasks that were answered as accepted.
"""

from __future__ import annotations

from typing import Any

from arq.connections import ArqRedis
from common import Order, lifespan
from fastapi import BackgroundTasks, FastAPI, Request
from taskbench_probe import task_ref

app = FastAPI(lifespan=lifespan)


async def enqueue(pool: ArqRedis, order: dict[str, Any], ref: str | None) -> None:
    await pool.enqueue_job("process_order", order, taskbench=ref)


@app.post("/orders", status_code=202)
async def create_order(order: Order, request: Request, background: BackgroundTasks) -> dict[str, str]:
    background.add_task(enqueue, request.app.state.arq, order.model_dump(), task_ref(request))  # probe, line 1
    return {"status": "queued"}
