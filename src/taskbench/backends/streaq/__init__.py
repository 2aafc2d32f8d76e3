"""streaq: an asyncio worker on a Redis stream consumer group, idle tasks reclaimed."""

from __future__ import annotations

from typing import Final

from taskbench.backends.bounds import NO_RECOVERY, RESTART_BROKER, Bound
from taskbench.backends.declaration import BackendInfo, Delivery
from taskbench.backends.shapes import Shape

#: the window streaq's source opens on Redis (read at the version locked in uv.lock)
REDIS_BOUNDS: Final = (
    Bound(figure=NO_RECOVERY, faults=RESTART_BROKER, data_lost=True,
          text="the restart took streaq's Lua function library, which a worker loads once at its start: "
               "every enqueue fails ('Function not found') until a worker starts again",
          source="streaq 7.2 streaq/worker.py Worker (Streaq(..., code=..., replace=True) at start); "
                 "docs/faults.md"),
)

BACKENDS = (
    BackendInfo(
        name="streaq",
        time_limit="streaq's task timeout",
        port=8004,
        rank=80,
        summary="streaq: asyncio worker on a Redis stream consumer group, JSON, idle tasks reclaimed",
        key_patterns=("streaq:taskbench:{run_id}:*",),
        default_delivery=Delivery(recovery="stream consumer group: an idle task is reclaimed after --task-timeout",
                                  source="streaq 7.2 streaq/worker.py (idle_timeout: idle tasks are reclaimed)",
                                  bounds=REDIS_BOUNDS),
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("streaq", 20_000, 32, "bulk", "burst", "benchmarks/bench_streaq.py; `streaq run --burst`",
          options={"uvloop": "1"}, published_s=8.61, source="streaq"),
)
