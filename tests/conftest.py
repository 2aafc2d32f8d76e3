"""Shared fixtures: a real Redis (the machine's, or a private embedded one) and per-test prefixes."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from click.testing import Result

from taskbench.harness import HarnessError
from taskbench.harness.brokers.redis import EmbeddedRedis, check_reachable
from tests.schedule import DurationRecorder, LongestFirst


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help="write each test scope's seconds to tests/durations.json (the order xdist hands them out)")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LongestFirst | None:
    """With ``--dist loadscope`` (pyproject's): the costliest scope first, so three processes finish together
    (tests/schedule.py; docs/benchmarks.md, "The test suite's own time"); another ``--dist`` is xdist's own."""
    return LongestFirst(config, log) if config.getoption("dist") == "loadscope" else None


_recorder = DurationRecorder()


def pytest_configure(config: pytest.Config) -> None:
    _recorder.enabled = bool(config.getoption("--store-durations"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _recorder.enabled:
        _recorder.add(report.nodeid, report.duration)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if _recorder.enabled and not hasattr(config, "workerinput"):
        _recorder.write()


def pytest_sessionstart(session: pytest.Session) -> None:
    """With pytest-xdist, build every backend environment once, before the test processes start.

    Otherwise both test processes could build the same environment at once on a fresh clone (each
    test that needs one calls ``ensure_env``); built environments are only checked (a stamp file).
    """
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from taskbench import backends
    from taskbench.harness.processes.envs import ensure_env

    for extra in dict.fromkeys([*(backends.info(name).extra for name in backends.available()), "servers"]):
        ensure_env(extra)


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


@pytest.fixture(scope="session")
def broker_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private broker Redis apart from the ledger's, as a run has: password, AOF fsync always."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("broker-redis") / "redis.log", name="redis-broker",
                           fsync="always")
    server.start(dict(os.environ))
    try:
        yield server.url
    finally:
        server.stop()


def missing(reason: str) -> None:
    """Skip a test that needs something this machine lacks; under CI (``CI=true``) fail instead: CI
    installs or starts every broker, so a skip there would hide a part that was never tested."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run this test, but: {reason}")
    pytest.skip(reason)


class BrokerServers:
    """The brokers the tests use: the machine's (RabbitMQ 5672, NATS 4222) when they answer, or the URL in
    ``TASKBENCH_TEST_<BROKER>_URL``; otherwise, and always for PostgreSQL (never the machine's database),
    a private server started once for the session and stopped at its end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.urls: dict[str, str] = {}
        self._stack = contextlib.ExitStack()

    def url(self, broker: str) -> str:
        """The broker's URL; ``missing`` when it can neither be reached nor started."""
        from taskbench.harness.brokers import check_broker, provide_broker
        from taskbench.settings import DEFAULT_BROKER_URLS

        if broker in self.urls:
            return self.urls[broker]
        given = os.environ.get(f"TASKBENCH_TEST_{broker.upper()}_URL") or DEFAULT_BROKER_URLS.get(broker)
        if given:
            try:
                check_broker(broker, given, timeout=2.0)
                self.urls[broker] = given
                return given
            except HarnessError as exc:
                if os.environ.get(f"TASKBENCH_TEST_{broker.upper()}_URL"):
                    missing(str(exc))
        try:
            server = self._stack.enter_context(provide_broker(broker, self.folder / broker))
        except HarnessError as exc:
            missing(f"no {broker} server answers and none could be started: {exc}")
        self.urls[broker] = server.url
        return server.url

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="session")
def broker_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerServers]:
    servers = BrokerServers(tmp_path_factory.mktemp("brokers"))
    try:
        yield servers
    finally:
        servers.close()


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


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    """Run ``taskbench ARGS`` in this process (typer's CliRunner): for what needs no process boundary.

    The commands export options into ``os.environ`` and ``run``/``up`` install SIGINT/SIGTERM/SIGHUP
    handlers; both are put back afterwards, so nothing leaks into the next test.
    """
    from typer.testing import CliRunner

    from taskbench.cli import app

    saved_env = dict(os.environ)
    saved_handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(app, list(args), catch_exceptions=True)

    try:
        yield invoke
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_handlers.items():
            signal.signal(sig, handler)


@pytest.fixture(scope="session")
def cgroups_writable() -> str | None:
    """None where a limit can be written to a cgroup here, else why not (for ``pytest.skip``)."""
    import subprocess
    import sys
    import uuid

    from taskbench.harness.processes.cgroups import Cgroups, Limit

    probe = Cgroups(f"probe-{uuid.uuid4().hex[:8]}")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        record = probe.apply("probe", [proc.pid], Limit(cpu=0.5, memory_mb=200))
    finally:
        proc.kill()
        proc.wait()
        probe.release()
    return None if record["applied"] else "cgroups cannot be written here: " + "; ".join(record["notes"])
