"""``gc.freeze()`` once the API has started (TASKBENCH_GC_FREEZE): on by default, off on request."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
import redis

from taskbench import heap
from taskbench.service.app import create_app
from taskbench.settings import Settings


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freeze_moves_the_live_heap_to_the_permanent_generation() -> None:
    heap.freeze(enabled=False)
    assert gc.get_freeze_count() == 0
    heap.freeze()
    assert gc.get_freeze_count() > 1000, "the test process's modules and objects are frozen"


@pytest.mark.parametrize("enabled", [True, False])
def test_the_api_freezes_its_heap_once_started_unless_told_not_to(
        enabled: bool, redis_url: str, run_id: str, client: redis.Redis) -> None:
    app = create_app(Settings(backend="background", redis_url=redis_url, run_id=run_id, gc_freeze=enabled))

    async def start_and_stop() -> int:
        async with app.router.lifespan_context(app):
            return gc.get_freeze_count()

    frozen = asyncio.run(start_and_stop())
    assert (frozen > 1000) is enabled, frozen
