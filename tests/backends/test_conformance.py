"""The conformance suite every backend passes, on every broker it names, before any benchmark uses it.

The cases come from the registry: every available backend of ``taskbench.backends.REGISTRY`` times
each broker in its ``BackendInfo.brokers``, so a new backend (one module plus one registry entry)
is tested without a new test file; ``test_every_registered_backend_has_a_conformance_run`` fails
otherwise. What a test may expect of a backend (worker processes, redelivery) comes from the
registry too. Processes run in the backend's own environment, exactly as in a benchmark run.

A case's processes are shared where a test needs no fresh ones: the tests that run with the default
settings use one API (and the workers the previous test left running), the two fault tests another
API with a slow task, both APIs started (and stopped) side by side; each test checks only its own
task ids in the shared ledger. The brokers are the machine's RabbitMQ (127.0.0.1:5672) and NATS
(127.0.0.1:4222) or ``TASKBENCH_TEST_<BROKER>_URL``; where none answers, and always for PostgreSQL,
a private server the session starts (``tests.conftest.BrokerServers``). A broker that can be neither
reached nor started skips its cases with the reason, and fails them under ``CI=true``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from taskbench import backends
from taskbench.brokers import BROKERS
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.stack import Stack as Processes
from taskbench.harness.scrape import scrape
from taskbench.ledger import Ledger
from taskbench.messages import WORKLOADS
from taskbench.procgroup import Managed
from taskbench.wait import wait_until
from tests.conftest import BrokerServers
from tests.helpers import request, served

ROOT = Path(__file__).parents[2]
BACKENDS_DIR = ROOT / "src" / "taskbench" / "backends"


@dataclass(frozen=True)
class Case:
    """One backend on one broker."""

    backend: str
    broker: str
    #: the broker's URL when not the local default (``TASKBENCH_TEST_RABBITMQ_URL``, ``..._NATS_URL``)
    broker_url: str | None = None
    #: settings that make another wiring of the same backend (Celery's prefork pool), in the id
    variant: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        return "-".join([self.backend, self.broker, *(value for _, value in self.variant)])

    @property
    def meta(self) -> backends.BackendInfo:
        return backends.info(self.backend)


#: the wirings a setting chooses, each run by the whole suite beside the backend's default one
VARIANTS = [Case("celery", "redis", variant=(("pool", "prefork"),))]  # the library options of the variant


def cases() -> list[Case]:
    """Every available backend on every broker it names, in registry order, then the variants."""
    plain = [Case(name, broker) for name in backends.available() for broker in backends.info(name).brokers]
    return plain + [v for v in VARIANTS if v.backend in backends.available()]


CASES = cases()

#: the fault tests' task: long enough that a kill or a stop lands inside it once it is seen running
SLOW_TASK = 2.0
#: the SIGTERM test's task (a worker-side setting): the stop needs no margin, it waits for the task
SIGTERM_TASK = 1.0
#: their task timeout, well above the task: a redelivered copy that a busy machine starts or acks a
#: second late would otherwise be redelivered once more (at-least-once, not a bug)
SLOW_TASK_TIMEOUT = 5
#: the fault stack runs the library settings that change the promise (docs/backends.md) with the values
#: that make a dead worker's task run again (their defaults, the libraries', make SAQ and Procrastinate
#: at-most-once; the fault matrix runs those): the SIGKILL test then checks the redelivery itself
#: RQ's abandoned job comes back after its heartbeat TTL (task timeout + 60 s, RQ's own) at the next maintenance:
#: one every second here (an idle worker's dequeue returns every worker_ttl - 15 s)
#: how long the SIGKILL test watches an at-most-once backend's killed tasks for a run that its promise rules
#: out (the at-least-once ones come back within SLOW_TASK_TIMEOUT; RQ's own 60 s is rq-retry's case)
AT_MOST_ONCE_WATCH = 2 * SLOW_TASK_TIMEOUT
RE_RUN = {"saq": {"retries": 3}, "procrastinate": {"retry_stalled": True},
          "pgqueuer": {"heartbeat_timeout": SLOW_TASK_TIMEOUT}, "rq": {"worker_ttl": 16, "maintenance_interval": 1}}


def re_run(case: Case) -> dict[str, object]:
    """The library options of ``case``'s fault stack: RE_RUN's for its library, then its variant's."""
    return {**RE_RUN.get(case.meta.extra, {}), **dict(case.variant)}

class Stack:
    """The API and the workers of one case, started and stopped by the tests."""

    def __init__(self, case: Case, python: str, env: dict[str, str], tmp: Path, port: int) -> None:
        self.case = case
        self.backend = case.backend
        self.python = python
        self.env = env
        self.tmp = tmp
        self.port = port
        self.procs = Processes({**os.environ, **env}, name=env["TASKBENCH_RUN_ID"], stop_timeout=15)
        self.prefix = f"taskbench:{env['TASKBENCH_RUN_ID']}:"
        self.ledger = Ledger(self.prefix)
        self.client = redis.Redis.from_url(env["TASKBENCH_REDIS_URL"])
        self.workers: list[Managed] = []  # running ones (a killed or stopped worker leaves the list)
        self._started = 0

    # -- workers --------------------------------------------------------------------------------

    def start_worker(self, **settings: object) -> Managed:
        """A worker of the stack's settings, ``settings`` overriding some (worker-side ones only)."""
        index = self._started
        self._started += 1
        proc = self.procs.start(f"worker-{index}", [self.python, "-m", "taskbench", "worker"],
                                self.tmp / f"worker-{index}.log", env=_env(settings))
        wait_until(lambda: self.client.hexists(f"{self.prefix}ready", f"worker:{proc.pid}"), 60,
                   what=f"worker-{index} ready: {proc.log_path}",
                   abort=lambda: None if proc.alive() else f"worker exited: {proc.tail()}")
        self.workers.append(proc)
        return proc

    def ensure_workers(self, n: int) -> list[Managed]:
        """At least ``n`` running workers (those a previous test left running count)."""
        self.workers = [w for w in self.workers if w.alive()]
        while len(self.workers) < n:
            self.start_worker()
        return self.workers

    def stop(self, worker: Managed, timeout: float = 30) -> int | None:
        self.workers.remove(worker)
        return worker.stop(timeout=timeout)

    def stop_workers(self) -> None:
        """SIGTERM every worker (at once) and wait: what they held is finished or back in the broker."""
        workers, self.workers = self.workers, []
        with ThreadPoolExecutor(max(1, len(workers))) as pool:
            codes = list(pool.map(lambda w: w.stop(timeout=30), workers))
        for worker, code in zip(workers, codes, strict=True):
            assert code in (0, -15), f"{worker.name} exit code {code}: {worker.tail()}"

    def kill(self, worker: Managed) -> None:
        self.workers.remove(worker)
        worker.popen.kill()  # type: ignore[union-attr]
        worker.popen.wait()  # type: ignore[union-attr]

    def in_progress(self, worker: Managed) -> float:
        """The worker's ``taskbench_tasks_in_progress`` (its pool children included), from its /metrics."""
        url = self.client.hget(f"{self.prefix}metrics", f"worker:{worker.pid}")
        assert url is not None, f"{worker.name} registered no /metrics URL"
        return scrape(url.decode())["taskbench_tasks_in_progress"]

    def _dead_worker(self) -> str | None:
        dead = [w for w in self.workers if not w.alive()]
        return f"{dead[0].name} exited: {dead[0].tail()}" if dead else None

    # -- tasks ----------------------------------------------------------------------------------

    def submit(self, task_id: str, workload: str = "io/simple") -> tuple[int, Any]:
        return request(self.port, "POST", f"/api/v1/incr/{workload}/{self.backend}", json.dumps({"task_id": task_id}))

    def post(self, task_id: str, workload: str = "io/simple") -> None:
        status, body = self.submit(task_id, workload)
        assert status == 202, body

    def post_many(self, ids: list[str], workload: str = "io/simple") -> None:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda t: self.post(t, workload), ids))

    def counts(self, ids: list[str]) -> dict[str, int]:
        """How often each of ``ids`` ran (those that never ran are absent)."""
        if not ids:
            return {}
        values = self.client.hmget(self.ledger.count_key, ids)
        return {t: int(v) for t, v in zip(ids, values, strict=True) if v is not None}

    def wait_executed(self, ids: list[str], timeout: float = 60) -> dict[str, int]:
        """Wait until every one of ``ids`` ran (or a worker died, or the timeout); return their counts."""
        wait_until(lambda: not self.ledger.unseen(self.client, ids), timeout,
                   what=f"{len(ids)} tasks executed", abort=self._dead_worker, raise_on_timeout=False)
        return self.counts(ids)


def _env(settings: dict[str, object]) -> dict[str, str]:
    """TASKBENCH_* variables; a dict (the library's options) as the JSON the processes read."""
    return {f"TASKBENCH_{k.upper()}": json.dumps(v) if isinstance(v, dict) else str(v) for k, v in settings.items()}


@contextmanager
def open_stack(case: Case, python: str, redis_url: str, tmp: Path, *, broker_redis_url: str | None = None,
               **settings: object) -> Iterator[Stack]:
    """An API of ``case`` with these TASKBENCH_* settings; afterwards every process stops and the
    run's keys, queues and streams are deleted. On Redis the tasks travel through ``broker_redis_url``
    (another server than the ledger's, as in a run)."""
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    env = {
        "TASKBENCH_BACKEND": case.backend,
        "TASKBENCH_REDIS_URL": redis_url,
        "TASKBENCH_RUN_ID": run_id,
        "TASKBENCH_BROKER": case.broker,
        "TASKBENCH_CPU_ITERATIONS": "10000",
        **({"TASKBENCH_BROKER_URL": case.broker_url} if case.broker_url else {}),
        **({"TASKBENCH_BROKER_URL": broker_redis_url} if case.broker == "redis" and broker_redis_url else {}),
        **_env(settings),
    }
    tmp.mkdir(parents=True, exist_ok=True)
    client = redis.Redis.from_url(redis_url)
    broker = redis.Redis.from_url(broker_redis_url) if case.broker == "redis" and broker_redis_url else None
    try:
        if case.meta.prepares_broker:  # the library's schema, once, before the API and the workers
            subprocess.run([python, "-m", "taskbench", "prepare"], env={**os.environ, **env},
                           check=True, timeout=120, capture_output=True)
        with served(tmp, env, python=python) as port:
            st = Stack(case, python, env, tmp, port)
            try:
                yield st
            finally:
                st.procs.stop()
                st.client.close()
    finally:
        # after every process of the stack stopped, the API included: nothing can write any more
        if case.broker != "redis":
            subprocess.run([python, "-m", "taskbench", "purge"], env={**os.environ, **env},
                           check=True, timeout=60, capture_output=True)
        delete_run_keys(client, run_id, case.meta, broker)
        client.close()
        if broker is not None:
            broker.close()


# -- fixtures: one case at a time (pytest groups the tests by the module-scoped parameter) ----------


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest, broker_servers: BrokerServers) -> Case:
    selected: Case = request.param
    if selected.broker != "redis":
        selected = dataclasses.replace(selected, broker_url=broker_servers.url(selected.broker))
    return selected


@pytest.fixture(scope="module")
def python(case: Case) -> str:
    return str(ensure_env(case.meta.extra, quiet=True))


@contextmanager
def open_stacks(case: Case, python: str, redis_url: str, tmp: Path, specs: dict[str, dict[str, object]],
                broker_redis_url: str | None = None) -> Iterator[dict[str, Stack]]:
    """Several stacks of one case (name -> settings), started side by side and stopped side by side."""
    managers = {name: open_stack(case, python, redis_url, tmp / name, broker_redis_url=broker_redis_url,
                                 **settings)
                for name, settings in specs.items()}
    opened: dict[str, Stack] = {}
    failures: list[BaseException] = []
    with ThreadPoolExecutor(len(managers)) as pool:
        futures = {name: pool.submit(cm.__enter__) for name, cm in managers.items()}
        for name, future in futures.items():
            try:
                opened[name] = future.result()
            except BaseException as exc:  # the others are still closed below
                failures.append(exc)

    def close(name: str) -> None:
        managers[name].__exit__(None, None, None)

    try:
        if failures:
            raise failures[0]
        yield opened
    finally:
        with ThreadPoolExecutor(max(1, len(opened))) as pool:
            list(pool.map(close, opened))


@pytest.fixture(scope="module")
def stacks(case: Case, python: str, redis_url: str, broker_redis_url: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Stack]]:
    """The case's APIs: ``default`` settings, shared by the tests that need nothing else, and
    ``faults`` for the SIGTERM and SIGKILL tests (a slow task, a process pool of two)."""
    variant: dict[str, object] = dict(case.variant)
    specs: dict[str, dict[str, object]] = {"default": {"options": variant} if variant else {}}
    if case.meta.has_worker:
        specs["faults"] = {"io_delay": SLOW_TASK, "task_timeout": SLOW_TASK_TIMEOUT,
                           "shutdown_timeout": 5, "processes": 2, "options": re_run(case)}
    with open_stacks(case, python, redis_url, tmp_path_factory.mktemp(case.id), specs,
                     broker_redis_url) as opened:
        yield opened


@pytest.fixture
def stack(stacks: dict[str, Stack]) -> Stack:
    return stacks["default"]


@pytest.fixture
def fault_stack(stacks: dict[str, Stack]) -> Stack:
    return stacks["faults"]


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# -- the suite ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tasks_wait_for_a_worker(case: Case, stack: Stack) -> None:
    stack.stop_workers()
    ids = _ids("q", 10)
    stack.post_many(ids)
    if not case.meta.has_worker:
        # No queue: the tasks already ran inside the API, nothing waits anywhere.
        assert stack.wait_executed(ids) == dict.fromkeys(ids, 1)
        return
    # Nothing may run them without a worker. Absence has no condition to wait on: an API that ran
    # tasks itself would do it right after the response, so a short bounded wait (ended at once by
    # a violation) is the test.
    ran = wait_until(lambda: stack.counts(ids), 0.5, raise_on_timeout=False)
    assert not ran, f"tasks ran without a worker: {ran}"
    stack.start_worker()
    assert stack.wait_executed(ids) == dict.fromkeys(ids, 1)


@pytest.mark.slow
def test_every_workload_runs_once(case: Case, stack: Stack) -> None:
    if case.meta.has_worker:
        stack.ensure_workers(1)
    ids = []
    for workload in WORKLOADS:
        batch = _ids(f"{workload.replace('/', '-')}-", 5)
        stack.post_many(batch, workload)
        ids += batch
    assert stack.wait_executed(ids) == dict.fromkeys(ids, 1)


@pytest.mark.slow
def test_competing_workers_run_each_task_once(case: Case, stack: Stack) -> None:
    if not case.meta.has_worker:
        pytest.skip("no worker processes: tasks run in the API process")
    stack.ensure_workers(2)
    ids = _ids("c", 300)
    stack.post_many(ids)
    stack.wait_executed(ids)
    # A late duplicate (one task delivered to both workers) would be running or queued now; the
    # graceful stop waits for what the workers hold, so the ledger read after it has every copy.
    stack.stop_workers()
    assert stack.counts(ids) == dict.fromkeys(ids, 1)


def _known(st: Stack, task_id: str) -> str:
    """Submit a known id: 409 naming it; what the API says of its first submission."""
    status, answer = st.submit(task_id)
    assert status == 409, answer
    assert answer["task_id"] == task_id, answer
    first: str = answer["first"]
    return first


@pytest.mark.slow
def test_a_task_id_is_an_idempotency_key(case: Case, stack: Stack) -> None:
    """A known id is answered 409 naming it and is never enqueued again: right after its first
    submission, racing it (8 POSTs at once: one 202), and after it ran; other ids are unaffected."""
    if case.meta.has_worker:
        stack.ensure_workers(1)
    stack.post("idem-seq")
    # its outcome is written within 50 ms of the 202 (pending until then); arq answers from its own job
    assert _known(stack, "idem-seq") in ("accepted", "pending")
    distinct = _ids("idem-distinct-", 8)
    sent = ["idem-race"] * 8 + distinct
    with ThreadPoolExecutor(len(sent)) as pool:
        answers = dict(enumerate(pool.map(stack.submit, sent)))
    race = sorted(answers[i][0] for i, t in enumerate(sent) if t == "idem-race")
    assert race == [202] + [409] * 7, answers
    assert all(answers[i][0] == 202 for i, t in enumerate(sent) if t != "idem-race"), answers
    assert stack.wait_executed(["idem-seq", "idem-race"]) == {"idem-seq": 1, "idem-race": 1}
    for task_id in ("idem-seq", "idem-race"):  # the API writes accepted ids every 50 ms
        wait_until(lambda t=task_id: _known(stack, t) == "accepted", 10, what=f"{task_id} marked accepted")
    # any copy enqueued by the duplicates would have run by the time a later batch did (and the
    # distinct ids: with several workers, a later task may finish before an earlier one)
    later = _ids("idem-later-", 5)
    stack.post_many(later)
    stack.wait_executed(distinct + later)
    ids = ["idem-seq", "idem-race", *distinct, *later]
    assert stack.counts(ids) == dict.fromkeys(ids, 1)


def _all_running(st: Stack, worker: Managed, n: int) -> None:
    """Wait until ``worker`` runs ``n`` tasks at once: its /metrics in-progress gauge."""
    wait_until(lambda: st.in_progress(worker) >= n, 30, what=f"{worker.name} running {n} tasks",
               abort=lambda: None if worker.alive() else f"{worker.name} exited: {worker.tail()}")


@pytest.mark.slow
def test_sigterm_stops_cleanly(case: Case, request: pytest.FixtureRequest) -> None:
    if not case.meta.has_worker:
        pytest.skip("no worker processes")
    st: Stack = request.getfixturevalue("fault_stack")
    st.stop_workers()
    worker = st.start_worker(io_delay=SIGTERM_TASK)
    warm = _ids("p", 2)
    st.post_many(warm, "cpu/process")  # starts the process pool
    # each ran; a second run is the promise of an at-least-once backend when the pool's start took longer
    # than this stack's 5 s task timeout (seen on a loaded CI machine, Celery and FastStream-on-NATS at once);
    # exactly-once across the stop is checked on ``ids`` below
    # an at-most-once backend (SAQ's retries=1) drops a warm task that its timeout cut: it is not run again
    at_least_once = case.meta.delivery_on(case.broker, re_run(case)).guarantee == backends.AT_LEAST_ONCE
    warm_counts = st.wait_executed(warm)
    if at_least_once:
        assert set(warm_counts) == set(warm) and all(n <= 2 for n in warm_counts.values()), warm_counts
    else:
        assert warm_counts and all(n == 1 for n in warm_counts.values()), warm_counts
    children = psutil.Process(worker.pid).children(recursive=True)
    ids = _ids("s", 4)
    st.post_many(ids)
    _all_running(st, worker, len(ids))  # the stop lands inside the tasks
    started = time.monotonic()
    code = st.stop(worker)
    elapsed = time.monotonic() - started
    assert code in (0, -15), f"exit code {code}: {worker.tail()}"
    assert elapsed < 10, f"took {elapsed:.1f} s to stop"
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, "the worker left child processes behind"
    counts = st.counts(ids)
    unfinished = [t for t in ids if t not in counts]
    if unfinished:  # returned to the queue: a new worker must run them (within the task timeout)
        st.start_worker()
        counts = st.wait_executed(ids, timeout=3 * SLOW_TASK_TIMEOUT)
    assert counts == dict.fromkeys(ids, 1), counts


@pytest.mark.slow
def test_sigkill_mid_task(case: Case, request: pytest.FixtureRequest) -> None:
    """A worker killed mid-task: at-least-once backends run the task again elsewhere."""
    if not case.meta.has_worker:
        pytest.skip("no worker processes: a killed API loses its pending tasks (documented)")
    st: Stack = request.getfixturevalue("fault_stack")
    st.stop_workers()
    victim = st.start_worker()
    ids = _ids("k", 4)
    st.post_many(ids)
    _all_running(st, victim, len(ids))  # the victim has picked them up and is inside the task
    assert st.counts(ids) == {}
    st.kill(victim)
    st.start_worker()
    delivery = case.meta.delivery_on(case.broker, re_run(case))
    if delivery.guarantee == backends.AT_LEAST_ONCE:
        # a library whose own setting sets when the task comes back (RQ's TTL: past 60 s) is given that long
        counts = st.wait_executed(ids, timeout=max(45, 1.5 * (delivery.after or 0)))
    else:  # nothing comes back: a copy run again would show within a few task timeouts of the fault stack
        time.sleep(AT_MOST_ONCE_WATCH)
        counts = st.counts(ids)
    report = {"redelivered": len(counts), "of": len(ids), "runs": {t: counts.get(t, 0) for t in ids}}
    print(f"{case.backend} on {case.broker} SIGKILL mid-task: {report}")
    if delivery.guarantee == backends.AT_LEAST_ONCE:
        # every task ran again; a redelivered copy that a busy machine ran past the ack deadline may be
        # delivered once more (at-least-once keeps that promise: seen on faststream-nats under load)
        assert set(counts) == set(ids) and all(n <= 2 for n in counts.values()), report
    else:
        assert all(counts.get(t, 0) <= 1 for t in ids), report


#: the Redis-stream backends whose worker claims another consumer's entries once they sat idle past the
#: task timeout (XAUTOCLAIM): an entry a live worker holds but has not started must not look idle that long
RECLAIM_IDLE = [Case(name, "redis") for name in ("faststream", "taskiq", "streaq")]


@pytest.mark.slow
@pytest.mark.parametrize("idle_case", RECLAIM_IDLE, ids=[c.id for c in RECLAIM_IDLE])
def test_a_backlog_older_than_the_task_timeout_runs_once(idle_case: Case, redis_url: str, broker_redis_url: str,
                                                         tmp_path: Path) -> None:
    """A worker holds no more than it runs, so a backlog that waits past the task timeout is not taken for
    a dead worker's and run again. FastStream's subscriber read every entry of the stream into its
    consumer's pending list (XREADGROUP without COUNT); at concurrency 1 those behind the running one
    waited there past the XAUTOCLAIM's idle time and ran twice (79 of 200 half-second tasks, no fault)."""
    python = str(ensure_env(idle_case.meta.extra, quiet=True))
    with open_stack(idle_case, python, redis_url, tmp_path, broker_redis_url=broker_redis_url,
                    io_delay=0.4, task_timeout=2, concurrency=1) as st:
        ids = _ids("b", 15)  # 6 s one at a time: the last waits three task timeouts behind the others
        st.post_many(ids)
        st.start_worker()
        assert st.wait_executed(ids, timeout=60) == dict.fromkeys(ids, 1)
        # a copy claimed late would be running now; the graceful stop waits for it
        st.stop_workers()
        assert st.counts(ids) == dict.fromkeys(ids, 1)


# -- the registry and the suite agree -------------------------------------------------------------


def _modules_defining_backend() -> set[str]:
    """Modules under ``taskbench/backends/<package>/`` with a top-level ``backend = ...`` (read, not imported),
    as dotted names."""
    found = set()
    for path in sorted(BACKENDS_DIR.glob("*/*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == "backend" for t in targets):
                found.add(f"taskbench.backends.{path.parent.name}.{path.stem}")
    return found


def test_every_backend_module_is_registered() -> None:
    """Every backend module of a package is some declaration's, and every declaration's module exists."""
    modules = _modules_defining_backend()
    assert modules, f"no backend module found in {BACKENDS_DIR}"
    registered = {meta.module for meta in backends.REGISTRY.values()}
    unregistered = modules - registered
    assert not unregistered, f"backend modules no package declares (BACKENDS): {unregistered}"
    assert modules >= {backends.info(name).module for name in backends.available(unsafe=True)}


def test_every_broker_a_backend_names_is_known() -> None:
    for name in backends.available():
        brokers = backends.info(name).brokers
        assert brokers and len(set(brokers)) == len(brokers), name
        for broker in brokers:
            assert broker in BROKERS, f"{name}: unknown broker {broker!r}"


def test_every_registered_backend_has_a_conformance_run() -> None:
    """Collect this module as pytest does: every suite test runs on every backend × broker."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         str(Path(__file__).relative_to(ROOT))],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    collected: dict[str, set[str]] = {}
    for line in out.stdout.splitlines():
        if "::" in line and "[" in line:
            test, param = line.split("::", 1)[1].rstrip("]").split("[", 1)
            collected.setdefault(test, set()).add(param)
    expected = {f"{name}-{broker}" for name in backends.available() for broker in backends.info(name).brokers}
    expected |= {v.id for v in VARIANTS if v.backend in backends.available()}
    suite = [name for name, f in globals().items()
             if name.startswith("test_") and "case" in inspect.signature(f).parameters]
    assert suite and set(suite) <= set(collected), (suite, sorted(collected))
    for test in suite:
        missing = expected - collected[test]
        assert not missing, f"{test} has no run for {sorted(missing)}"
