"""What every floor app shares, outside the request path: the run's Redis and key prefix, the body."""

from __future__ import annotations

import os

from pydantic import BaseModel


class Incr(BaseModel):
    """The body the load driver sends (FastAPI's usual body model; extra fields are ignored)."""

    value: int = 1
    task_id: str


def redis_url() -> str:
    return os.environ.get("TASKBENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def run_id() -> str:
    return os.environ.get("TASKBENCH_RUN_ID", "manual")


def prefix() -> str:
    """The run's key prefix, as ``Settings.prefix``: the harness deletes everything under it."""
    return f"taskbench:{run_id()}:"


HEALTH = {"status": "ok"}
ACCEPTED = 202
