"""``taskbench up``: every URL it prints answers; Ctrl-C leaves no process; no open dashboard off loopback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
import redis

from taskbench.harness.prometheus import find_prometheus
from taskbench.net import free_port
from tests.helpers import harness_cli

TB = [sys.executable, "-m", "taskbench"]


@pytest.mark.slow
def test_up_serves_every_url_and_stops_cleanly(redis_url: str, tmp_path: Path) -> None:
    base = free_port()
    prometheus_port = free_port()
    with harness_cli(
        ["up", "--backends", "arq,saq,celery", "--redis-url", redis_url, "--port", str(base),
         "--prometheus-port", str(prometheus_port), "--output", str(tmp_path)],
    ) as proc:
        assert proc.stdout is not None
        urls: list[str] = []
        deadline = time.monotonic() + 240
        for line in proc.stdout:
            urls += re.findall(r"http://127\.0\.0\.1:\d+/\S*", line)
            if "Ctrl-C stops everything" in line or time.monotonic() > deadline:
                break
        started = psutil.Process(proc.pid).children(recursive=True)
        try:
            names = {u.split("/")[-1] or "root" for u in urls}
            assert {"docs", "metrics", "root"} <= names, urls  # APIs, their metrics, SAQ web and Flower
            dashboards = {f"http://127.0.0.1:{base + 2}/", f"http://127.0.0.1:{base + 4}/"}  # SAQ web, Flower
            assert dashboards <= set(urls), urls
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


def test_up_refuses_an_open_dashboard_beyond_loopback(tmp_path: Path) -> None:
    out = subprocess.run([*TB, "up", "--backends", "saq", "--host", "0.0.0.0", "--output", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "--auth USER:PASSWORD" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["saq", "celery"])
def test_dashboard_with_auth_refuses_strangers(backend: str, redis_url: str, run_id: str, tmp_path: Path,
                                               client: redis.Redis) -> None:
    """``client``: its teardown deletes the keys the dashboard created (Flower declares celery's)."""
    import base64
    import urllib.error

    from taskbench import backends
    from taskbench.harness.envs import ensure_env
    from taskbench.harness.processes import ProcessSet

    python = str(ensure_env(backends.info(backend).extra, quiet=True))
    port = free_port()
    env = {**os.environ, "TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_RUN_ID": run_id,
           "TASKBENCH_DASHBOARD_AUTH": "admin:s3cret"}
    with ProcessSet(env, stop_timeout=10) as procs:
        dash = procs.start("dashboard", [python, "-m", "taskbench", "dashboard", "--port", str(port)],
                           tmp_path / "dashboard.log")
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        code = None
        while code is None:
            try:
                urllib.request.urlopen(url, timeout=2)
                code = 200
            except urllib.error.HTTPError as exc:
                code = exc.code
            except OSError:
                assert dash.alive() and time.monotonic() < deadline, dash.tail()
                time.sleep(0.2)
        assert code == 401, "the dashboard must refuse a request without credentials"
        token = base64.b64encode(b"admin:s3cret").decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200
