"""The conformance suite every backend passes before any benchmark uses it.

A backend's test module subclasses ``Conformance`` and sets ``backend``; everything else comes from
the registry. Processes run in the backend's own environment, exactly as in a benchmark run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import psutil
import pytest
import redis

from taskbench import backends
from taskbench.harness.envs import ensure_env
from taskbench.harness.processes import Managed, ProcessSet
from taskbench.ledger import Ledger
from taskbench.messages import WORKLOADS
from tests.helpers import request, served


class Stack:
    """The API and the workers of one backend, started and stopped by the test."""

    def __init__(self, backend: str, python: str, env: dict[str, str], tmp: Path, port: int) -> None:
        self.backend = backend
        self.python = python
        self.env = env
        self.tmp = tmp
        self.port = port
        self.procs = ProcessSet({**os.environ, **env}, stop_timeout=15)
        self.prefix = f"taskbench:{env['TASKBENCH_RUN_ID']}:"
        self.ledger = Ledger(self.prefix)
        self.client = redis.Redis.from_url(env["TASKBENCH_REDIS_URL"])
        self._workers = 0

    def start_worker(self) -> Managed:
        index = self._workers
        self._workers += 1
        before = int(self.client.hlen(f"{self.prefix}ready"))
        proc = self.procs.start(f"worker-{index}", [self.python, "-m", "taskbench", "worker"],
                                self.tmp / f"worker-{index}.log")
        deadline = time.monotonic() + 60
        while int(self.client.hlen(f"{self.prefix}ready")) <= before:
            assert proc.alive(), f"worker exited: {proc.tail()}"
            assert time.monotonic() < deadline, f"worker not ready: {proc.tail()}"
            time.sleep(0.05)
        return proc

    def post(self, task_id: str, workload: str = "io/simple") -> None:
        status, body = request(self.port, "POST", f"/api/v1/incr/{workload}/{self.backend}",
                               json.dumps({"task_id": task_id}))
        assert status == 202, body

    def post_many(self, ids: list[str], workload: str = "io/simple") -> None:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda t: self.post(t, workload), ids))

    def wait_executed(self, n: int, timeout: float = 60) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while self.ledger.executed_count(self.client) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.ledger.read(self.client)[0]


class Conformance:
    """Subclass per backend (and per broker it supports): set ``backend`` and, if not Redis, ``broker``."""

    backend: ClassVar[str]
    broker: ClassVar[str] = "redis"

    @pytest.fixture
    def python(self) -> str:
        return str(ensure_env(backends.info(self.backend).extra, quiet=True))

    @contextmanager
    def stack(self, python: str, redis_url: str, tmp: Path, *, api: bool = True,
              **settings: object) -> Iterator[Stack]:
        run_id = f"test-{uuid.uuid4().hex[:12]}"
        env = {
            "TASKBENCH_BACKEND": self.backend,
            "TASKBENCH_REDIS_URL": redis_url,
            "TASKBENCH_RUN_ID": run_id,
            "TASKBENCH_BROKER": self.broker,
            "TASKBENCH_CPU_ITERATIONS": "10000",
            **{f"TASKBENCH_{k.upper()}": str(v) for k, v in settings.items()},
        }
        client = redis.Redis.from_url(redis_url)
        try:
            with served(tmp, env, python=python) as port:
                st = Stack(self.backend, python, env, tmp, port)
                try:
                    yield st
                finally:
                    st.procs.stop_all()
                    st.client.close()
        finally:
            # after every process of the stack stopped, the API included: nothing can write any more
            if self.broker != "redis":
                subprocess.run([python, "-m", "taskbench", "purge"], env={**os.environ, **env},
                               check=True, timeout=60, capture_output=True)
            keys = list(client.scan_iter(match=f"taskbench:{run_id}:*"))
            for pattern in backends.info(self.backend).owned_key_patterns(run_id):
                keys += list(client.scan_iter(match=pattern))
            if keys:
                client.unlink(*keys)
            client.close()

    @property
    def meta(self) -> backends.BackendInfo:
        return backends.info(self.backend)

    def test_every_workload_runs_once(self, python: str, redis_url: str, tmp_path: Path) -> None:
        with self.stack(python, redis_url, tmp_path) as st:
            if self.meta.has_worker:
                st.start_worker()
            ids = []
            for workload in WORKLOADS:
                batch = [f"{workload.replace('/', '-')}-{i}" for i in range(5)]
                st.post_many(batch, workload)
                ids += batch
            counts = st.wait_executed(len(ids))
            assert counts == dict.fromkeys(ids, 1)

    def test_competing_workers_run_each_task_once(self, python: str, redis_url: str,
                                                  tmp_path: Path) -> None:
        if not self.meta.has_worker:
            pytest.skip("no worker processes: tasks run in the API process")
        with self.stack(python, redis_url, tmp_path) as st:
            st.start_worker()
            st.start_worker()
            ids = [f"c{i}" for i in range(400)]
            st.post_many(ids)
            counts = st.wait_executed(len(ids))
            time.sleep(0.5)  # a late duplicate would show up here
            counts = st.ledger.read(st.client)[0]
            assert counts == dict.fromkeys(ids, 1)

    def test_tasks_wait_for_a_worker(self, python: str, redis_url: str, tmp_path: Path) -> None:
        with self.stack(python, redis_url, tmp_path) as st:
            ids = [f"q{i}" for i in range(20)]
            st.post_many(ids)
            if not self.meta.has_worker:
                # No queue: the tasks already ran inside the API, nothing waits anywhere.
                assert st.wait_executed(len(ids)) == dict.fromkeys(ids, 1)
                return
            time.sleep(1.0)
            assert st.ledger.executed_count(st.client) == 0
            st.start_worker()
            assert st.wait_executed(len(ids)) == dict.fromkeys(ids, 1)

    def test_sigkill_mid_task(self, python: str, redis_url: str, tmp_path: Path) -> None:
        """A worker killed mid-task: at-least-once backends run the task again elsewhere."""
        if not self.meta.has_worker:
            pytest.skip("no worker processes: a killed API loses its pending tasks (documented)")
        # task_timeout well above the 3 s task: a redelivered copy that a busy machine starts or acks
        # a second late would otherwise be redelivered once more (at-least-once, not a bug)
        with self.stack(python, redis_url, tmp_path, io_delay=3, task_timeout=6) as st:
            victim = st.start_worker()
            ids = [f"k{i}" for i in range(4)]
            st.post_many(ids)
            time.sleep(1.5)  # the victim has picked them up and is inside the 3 s task
            assert st.ledger.executed_count(st.client) == 0
            victim.popen.kill()  # type: ignore[union-attr]
            victim.popen.wait()  # type: ignore[union-attr]
            st.start_worker()
            counts = st.wait_executed(len(ids), timeout=45)
            report = {"redelivered": sum(1 for t in ids if counts.get(t)), "of": len(ids),
                      "runs": {t: counts.get(t, 0) for t in ids}}
            print(f"{self.backend} SIGKILL mid-task: {report}")
            if self.meta.redelivers:
                assert counts == dict.fromkeys(ids, 1), report
            else:
                assert all(counts.get(t, 0) <= 1 for t in ids), report

    def test_sigterm_stops_cleanly(self, python: str, redis_url: str, tmp_path: Path) -> None:
        if not self.meta.has_worker:
            pytest.skip("no worker processes")
        with self.stack(python, redis_url, tmp_path, io_delay=1, shutdown_timeout=5,
                        processes=2) as st:
            worker = st.start_worker()
            st.post_many([f"p{i}" for i in range(2)], "cpu/process")  # starts the process pool
            st.wait_executed(2)
            children = psutil.Process(worker.pid).children(recursive=True)
            ids = [f"s{i}" for i in range(4)]
            st.post_many(ids)
            time.sleep(1.2)
            started = time.monotonic()
            code = worker.stop(timeout=30)
            elapsed = time.monotonic() - started
            assert code in (0, -15), f"exit code {code}: {worker.tail()}"
            assert elapsed < 10, f"took {elapsed:.1f} s to stop"
            _, alive = psutil.wait_procs(children, timeout=5)
            assert not alive, "the worker left child processes behind"
            counts = st.ledger.read(st.client)[0]
            unfinished = [t for t in ids if t not in counts]
            if unfinished:  # returned to the queue: a new worker must run them
                st.start_worker()
                counts = st.wait_executed(len(ids) + 2)
            assert all(counts.get(t) == 1 for t in ids), counts
