"""Shared fixtures: a real Redis (the machine's, or a private embedded one) and per-test prefixes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from taskbench.harness import HarnessError
from taskbench.harness.redis_server import EmbeddedRedis, check_reachable


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """TASKBENCH_TEST_REDIS_URL, else 127.0.0.1:6379 if it answers, else an embedded server."""
    candidate = os.environ.get("TASKBENCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    try:
        check_reachable(candidate, timeout=1.0)
    except HarnessError:
        server = EmbeddedRedis(tmp_path_factory.mktemp("redis") / "redis.log")
        server.start(dict(os.environ))
        try:
            yield server.url
        finally:
            server.stop()
        return
    yield candidate


@pytest.fixture
def run_id() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(redis_url: str, run_id: str) -> Iterator[redis.Redis]:
    """A Redis client; every key under this test's prefix is deleted afterwards (never a flush)."""
    conn = redis.Redis.from_url(redis_url)
    yield conn
    keys = list(conn.scan_iter(match=f"taskbench:{run_id}:*", count=1000))
    if keys:
        conn.unlink(*keys)
    conn.close()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "results"
