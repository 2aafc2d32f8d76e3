"""The API's claims of task ids (taskbench.service.claims) on a private redis-server: a new id is
claimed once, a known one answers what became of it, claims that arrive together share one call, and
the script is loaded where the server does not know it (a fresh or restarted Redis: NOSCRIPT)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.ledger.pipe import pipe_for
from taskbench.service.claims import Call, Claims, KnownTask
from taskbench.settings import Settings


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own: its command statistics and script cache are the test's."""
    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-claims-test")
    server.start(dict(os.environ))
    try:
        yield server.url
    finally:
        server.stop()


def _calls(url: str, command: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def _claim_all(claims: Claims, ids: list[str]) -> list[str | None]:
    async def one(task_id: str) -> str | None:
        try:
            await claims.claim(task_id)
        except KnownTask as known:
            return known.first
        return None

    return list(await asyncio.gather(*(one(task_id) for task_id in ids)))


@pytest.mark.parametrize("client", ["pipe", "redis-py"])
def test_claims_that_arrive_together_share_a_call_and_a_known_id_is_answered(private_redis: str,
                                                                                client: str) -> None:
    settings = Settings(backend="saq", redis_url=private_redis, run_id=f"claims-{uuid.uuid4().hex[:8]}")
    ids = [f"t{i}" for i in range(300)]

    async def main() -> tuple[list[str | None], list[str | None], list[str | None]]:
        call: Call
        if client == "pipe":
            pipe = pipe_for(private_redis)
            assert pipe is not None
            call, close = pipe.submit, pipe.aclose
        else:
            import redis.asyncio as aioredis

            redis_py = aioredis.Redis.from_url(private_redis)
            call, close = redis_py.execute_command, redis_py.aclose
        try:
            async with Claims(call, settings) as claims:
                first = await _claim_all(claims, ids)  # a fresh server: NOSCRIPT, then EVAL loads it
                again = await _claim_all(claims, ids[:5])  # claimed, not yet reported: "pending"
                for task_id in ids[:5]:
                    claims.accepted(task_id)
            async with Claims(call, settings) as claims:  # the accepted ids were flushed on close
                later = await _claim_all(claims, [*ids[:5], "new"])
            return first, again, later
        finally:
            await close()

    first, again, later = asyncio.run(main())
    assert first == [None] * 300
    assert again == ["pending"] * 5
    assert later == ["accepted"] * 5 + [None]
    # 300 claims made in one turn of the loop: one script call (and the EVAL after NOSCRIPT), not 300
    assert _calls(private_redis, "evalsha") + _calls(private_redis, "eval") <= 8
    assert _calls(private_redis, "eval") == 1
    stored = redis.Redis.from_url(private_redis).hgetall(f"{settings.prefix}ids")
    assert len(stored) == 301 and stored[b"t0"] == b"accepted" and stored[b"t9"].startswith(b"pending ")  # type: ignore[arg-type]


def test_a_lost_redis_fails_the_claims_and_they_claim_again_when_it_is_back(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-claims-test")
    server.start(dict(os.environ))
    try:
        settings = Settings(backend="saq", redis_url=server.url, run_id="claims-lost")
        pipe = pipe_for(server.url)
        assert pipe is not None

        async def main() -> tuple[tuple[BaseException | None], list[str | None]]:
            async with Claims(pipe.submit, settings) as claims:
                assert await _claim_all(claims, ["a"]) == [None]
                await asyncio.to_thread(server.stop)
                failed = await asyncio.gather(claims.claim("b"), return_exceptions=True)
                await asyncio.to_thread(server.start, dict(os.environ))  # empty: no script, no claims
                after = await _claim_all(claims, ["b"])
            await pipe.aclose()
            return failed, after

        failed, after = asyncio.run(main())
        assert isinstance(failed[0], redis.exceptions.ConnectionError)
        assert after == [None]
    finally:
        server.stop()
