"""The HTTP scenarios' app: the two ways of raising AnyIO's default thread limiter (seed 004)."""

from __future__ import annotations

import anyio
import anyio.to_thread
import pytest

from taskbench.scenarios.apps import create_app


@pytest.mark.parametrize(("via", "tokens"), [
    ("limiter", 200),  # current_default_thread_limiter().total_tokens: the limiter AnyIO uses
    ("runvar", 40),  # the seed's RunVar("_default_thread_limiter"): a new variable AnyIO 4 never reads
])
def test_the_thread_limit_each_way(via: str, tokens: int) -> None:
    app = create_app({"TASKBENCH_APP_THREAD_LIMIT": "200", "TASKBENCH_APP_THREAD_LIMIT_VIA": via})

    async def inside_the_lifespan() -> float:  # as a server runs it: the startup, then requests
        async with app.router.lifespan_context(app):
            return anyio.to_thread.current_default_thread_limiter().total_tokens

    assert anyio.run(inside_the_lifespan) == tokens


def test_an_unknown_way_is_refused() -> None:
    with pytest.raises(ValueError, match="THREAD_LIMIT_VIA must be limiter or runvar"):
        create_app({"TASKBENCH_APP_THREAD_LIMIT_VIA": "magic"})
