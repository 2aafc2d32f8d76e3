"""What every floor app shares, outside the request path: the run's Redis and key prefix, the body."""

from __future__ import annotations

import hashlib
import os
import re

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


def broker_url() -> str:
    """The PostgreSQL queues' broker (``TASKBENCH_BROKER_URL``)."""
    return os.environ.get("TASKBENCH_BROKER_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def postgres_schema(run: str) -> str:
    """The run's schema, as ``taskbench.backends._postgres.schema`` names it (a floor imports no backend):
    ``taskbench_`` and the run id, other characters as ``_``, cut and hashed when anything was replaced
    or it is too long; tests/backends check that the two agree."""
    name = "taskbench_" + re.sub(r"[^a-z0-9_]", "_", run.lower())
    if len(name) > 63 or name != "taskbench_" + run:
        name = f"{name[:54]}_{hashlib.sha256(run.encode()).hexdigest()[:8]}"
    return name


HEALTH = {"status": "ok"}
ACCEPTED = 202
