"""Huey: RedisHuey and its consumer's thread (or process) workers, no results."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from taskbench.backends.declaration import AT_MOST_ONCE, BackendInfo, Delivery
from taskbench.backends.options import LibraryOptions
from taskbench.backends.shapes import Shape


class Options(LibraryOptions):
    worker_type: Literal["thread", "process"] = Field(
        default="thread",
        description="Huey's consumer worker type (-k, default thread): thread runs a task on the worker "
                    "process's event loop, process in a forked child with a synchronous Redis client")


BACKENDS = (
    BackendInfo(
        name="huey",
        port=8025,
        rank=140,
        summary="Huey: RedisHuey, the consumer's thread workers (--option huey.worker_type), no results",
        key_patterns=("huey.*.taskbench.{run_id}", "huey.*.taskbench.{run_id}.*"),
        threading="threads",
        options=Options,
        default_delivery=Delivery(guarantee=AT_MOST_ONCE,
                                  recovery="none: a worker takes a task off Redis (BRPOP) before it runs it, "
                                           "so a worker killed mid-task loses it",
                                  source="huey 3.5 huey/storage.py RedisStorage.dequeue (BRPOP)"),
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("huey", 20_000, 10, "serial", "last-finish", "huey/; `huey_consumer.py -k thread -w 10 -d 0.001 -C`",
          options={"initial_delay": "0.001", "check_worker_health": "0"}, published_s=4.15,
          source="python_queue_benchmark"),
)
