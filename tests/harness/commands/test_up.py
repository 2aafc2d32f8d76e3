"""``taskbench up``: every URL it prints answers; Ctrl-C leaves no process; no open dashboard off loopback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import redis
from click.testing import Result

from taskbench.harness.prometheus import find_prometheus
from taskbench.wait import wait_until
from tests.helpers import assert_one_line_error, harness_cli


def _free_block(size: int) -> int:
    """A port whose next ``size - 1`` ports are free too (``up`` numbers its servers from it).

    Taken below the kernel's ephemeral range: ``up`` binds them one after another over seconds, and a
    port inside that range can meanwhile become the local port of any outgoing connection on the
    machine (a parallel test's Redis client), which then holds it ("Address already in use").
    """
    import random
    import socket

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        base = random.randrange(10_000, max(10_001, low - size))
        try:
            for port in range(base, base + size):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError(f"no {size} consecutive free ports below the ephemeral range")


@pytest.mark.slow
def test_up_serves_every_url_and_stops_cleanly(redis_url: str, tmp_path: Path) -> None:
    for attempt in range(3):
        base = _free_block(5)  # saq API and SAQ web, celery API and Flower, procrastinate API
        prometheus_port = _free_block(1)
        with harness_cli(  # procrastinate: on a private PostgreSQL, its schema prepared before it starts
            ["up", "--backends", "saq,celery,procrastinate", "--redis-url", redis_url, "--port", str(base),
             "--prometheus-port", str(prometheus_port), "--output", str(tmp_path)],
        ) as proc:
            assert proc.stdout is not None
            urls: list[str] = []
            lines: list[str] = []
            deadline = time.monotonic() + 240
            for line in proc.stdout:
                lines.append(line)
                urls += re.findall(r"http://127\.0\.0\.1:\d+/\S*", line)
                if "Ctrl-C stops everything" in line or time.monotonic() > deadline:
                    break
            if "is in use" in "".join(lines) and attempt < 2:
                # A parallel test bound one of the ports between the check and ``up``'s own check,
                # which refused it by name (its one-line error is tested elsewhere): a new block.
                proc.wait(timeout=60)
                continue
            _check_up(proc, urls, lines, base)
            return


def _check_up(proc: subprocess.Popen[str], urls: list[str], lines: list[str], base: int) -> None:
    """Every URL ``up`` printed answers; SIGINT stops everything it started."""
    started = psutil.Process(proc.pid).children(recursive=True)
    try:
        names = {u.split("/")[-1] or "root" for u in urls}
        assert {"docs", "metrics", "root"} <= names, "".join(lines)  # APIs, their metrics, SAQ web, Flower
        dashboards = {f"http://127.0.0.1:{base + 1}/", f"http://127.0.0.1:{base + 3}/"}  # SAQ web, Flower
        assert dashboards <= set(urls), urls
        assert f"http://127.0.0.1:{base + 4}/docs" in urls, urls  # procrastinate's API
        assert any("private postgres server" in line for line in lines), "".join(lines)
        if find_prometheus():
            assert any(u.endswith("/graph") for u in urls), urls
        for url in urls:
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.status == 200, url
    finally:
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    assert "stopped; no process left running" in out


def test_up_refuses_an_open_dashboard_beyond_loopback(tmp_path: Path, cli: Callable[..., Result]) -> None:
    out = cli("up", "--backends", "saq", "--host", "0.0.0.0", "--output", str(tmp_path))
    assert_one_line_error(out, "--auth USER:PASSWORD")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["saq", "celery"])
def test_dashboard_with_auth_refuses_strangers(backend: str, redis_url: str, run_id: str, tmp_path: Path,
                                               client: redis.Redis) -> None:
    """``client``: its teardown deletes the keys the dashboard created (Flower declares celery's)."""
    import base64
    import urllib.error

    from taskbench import backends
    from taskbench.harness.processes.envs import ensure_env
    from taskbench.harness.processes.process_set import ProcessSet

    python = str(ensure_env(backends.info(backend).extra, quiet=True))
    port = _free_block(1)
    env = {**os.environ, "TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_RUN_ID": run_id,
           "TASKBENCH_DASHBOARD_AUTH": "admin:s3cret"}
    with ProcessSet(env, stop_timeout=10) as procs:
        dash = procs.start("dashboard", [python, "-m", "taskbench", "dashboard", "--port", str(port)],
                           tmp_path / "dashboard.log")
        url = f"http://127.0.0.1:{port}/"

        def answer() -> int | None:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    return int(resp.status)
            except urllib.error.HTTPError as exc:
                return exc.code
            except OSError:
                return None

        code = wait_until(answer, 60, what=f"the {backend} dashboard", interval=0.2,
                          abort=lambda: None if dash.alive() else f"dashboard exited: {dash.tail()}")
        assert code == 401, "the dashboard must refuse a request without credentials"
        token = base64.b64encode(b"admin:s3cret").decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200


@pytest.mark.slow
def test_up_waits_through_a_paused_redis_and_still_stops_cleanly(tmp_path: Path) -> None:
    """A private Redis SIGSTOPped 10 s: ``up`` says it waits, keeps every process, says when it answers."""
    import threading

    from taskbench.harness.brokers.redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis.log")
    server.start(dict(os.environ))
    lines: list[str] = []

    def said(text: str) -> bool:
        return any(text in line for line in list(lines))

    try:
        with harness_cli(["up", "--backends", "arq", "--redis-url", server.url, "--port", str(_free_block(2)),
                          "--no-prometheus", "--output", str(tmp_path)],
                         env={**os.environ, "COLUMNS": "200"}) as proc:
            assert proc.stdout is not None
            reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
            reader.start()
            wait_until(lambda: said("Ctrl-C stops everything"), 120, what="up to start", interval=0.2,
                       abort=lambda: None if proc.poll() is None else "up exited:\n" + "".join(lines))
            started = psutil.Process(proc.pid).children(recursive=True)
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                paused = time.monotonic()
                wait_until(lambda: said(f"waiting for Redis at 127.0.0.1:{server.port}"), 8,
                           what="up to say it waits for Redis", interval=0.2)
                time.sleep(max(0.0, 10 - (time.monotonic() - paused)))  # the pause itself
                assert proc.poll() is None, "".join(lines)
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            wait_until(lambda: said(f"Redis at 127.0.0.1:{server.port} answers again"), 15,
                       what="up to say Redis answers again", interval=0.2)
            assert proc.poll() is None, "".join(lines)
            assert all(p.is_running() for p in started), "".join(lines)
            os.kill(proc.pid, signal.SIGINT)
            proc.wait(timeout=90)
            reader.join(timeout=10)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
    out = "".join(lines)
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    assert "stopped; no process left running" in out, out
    assert "Traceback" not in out, out
