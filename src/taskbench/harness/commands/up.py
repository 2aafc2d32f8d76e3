"""``taskbench up``: the live stack for exploring by hand, with its URLs and live counts, until Ctrl-C.

Each backend runs on its own broker (the first it names) or on ``broker``: the Redis ones on the run's
embedded broker Redis (or the user's), a PostgreSQL queue on a private PostgreSQL started for the stack
(or the user's ``broker_url``), RabbitMQ/NATS on the machine's server (or ``broker_url``), checked first.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskbench import backends, brokers, params
from taskbench.harness import HarnessError
from taskbench.harness.brokers import check_broker, needs_private_broker, provide_broker
from taskbench.harness.brokers.redis import RunRedis, provide_redis
from taskbench.harness.case.start import prepare
from taskbench.harness.case.stop import purge
from taskbench.harness.config import check_brokers
from taskbench.harness.faults.stalls import Patient, redis_client, redis_errors, server_of
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.stack import Stack as Processes
from taskbench.harness.prometheus import Prometheus, Target, find_prometheus
from taskbench.harness.scrape import scrape
from taskbench.net import check_port_free, healthy
from taskbench.params import settings_env
from taskbench.procgroup import Managed
from taskbench.settings import Settings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: how long the live loop's Redis calls wait for an answer (it refreshes every second)
SOCKET_TIMEOUT = 2.0


@dataclass(frozen=True, kw_only=True)
class UpConfig:
    backends: tuple[str, ...] = ("arq",)
    workers: int = 1
    concurrency: int = 10
    redis_url: str | None = None
    redis_fsync: str = "always"  # the embedded broker Redis's AOF policy
    broker: str | None = None  # every backend's broker; None: each backend's own (the first it names)
    broker_url: str | None = None  # a user's broker server (else embedded, private or the machine's)
    postgres_durability: str = "fsync"  # a private PostgreSQL broker's
    host: str = "127.0.0.1"
    port: int = 8000  # the first API; the others follow, then the dashboards
    prometheus: bool | None = None  # None: start one if installed
    prometheus_port: int = 9090
    auth: str | None = None  # user:password for the dashboards when bound beyond loopback
    output: Path = Path("results")
    startup_timeout: float = 60.0

    def __post_init__(self) -> None:
        check_brokers(self.backends, self.broker, self.broker_url)
        params.get("postgres_durability").check(self.postgres_durability)
        if self.host not in LOOPBACK and self.auth is None:
            raise ValueError(f"--host {self.host} exposes dashboards that can retry and abort tasks: "
                             "give --auth USER:PASSWORD")
        params.get("redis_fsync").check(self.redis_fsync)
        if self.auth is not None and ":" not in self.auth:
            raise ValueError("--auth must be USER:PASSWORD")

    @property
    def brokers(self) -> dict[str, str]:
        """Backend -> the broker it runs on."""
        return check_brokers(self.backends, self.broker, self.broker_url)


@dataclass
class Url:
    name: str
    url: str


@dataclass
class Stack:
    urls: list[Url] = field(default_factory=list)
    apis: dict[str, str] = field(default_factory=dict)  # backend -> metrics URL
    prefixes: dict[str, str] = field(default_factory=dict)  # backend -> run prefix
    prometheus: Prometheus | None = None
    note: str | None = None  # what the live loop waits for (a stalled Redis), shown under the table


class Up:
    def __init__(self, config: UpConfig, say: Callable[[str], None] = print) -> None:
        self.config = config
        self.say = say
        self.run_id = f"up-{uuid.uuid4().hex[:8]}"
        self.folder = config.output / self.run_id

    def serve_forever(self, show: Callable[[Stack, list[dict[str, Any]]], None]) -> None:
        """Start everything, call ``show`` with live counts every second until interrupted."""
        cfg = self.config
        pythons = {name: ensure_env(backends.info(name).extra) for name in cfg.backends}
        self.folder.mkdir(parents=True, exist_ok=True)
        on_redis = any(brokers.info(kind).can_be_ledger for kind in cfg.brokers.values())
        with provide_redis(cfg.redis_url, self.folder, fsync=cfg.redis_fsync,
                           broker_url=cfg.broker_url if on_redis else None, redis_broker=on_redis,
                           say=self.say) as redis, contextlib.ExitStack() as servers:
            urls = self._broker_urls(redis, servers)
            client = redis_client(redis.url, timeout=SOCKET_TIMEOUT)
            broker = None if redis.shared else redis_client(redis.broker_url, timeout=SOCKET_TIMEOUT)
            server = server_of(client)
            procs = Processes(dict(os.environ), name=self.run_id, stop_timeout=10)
            try:
                with procs:
                    stack = self._start(procs, pythons, redis, urls, client)
                    # a Redis that stops answering (paused, restarting) is waited for, never a reason to
                    # stop: the counts come from /metrics with the worker URLs last read from Redis
                    patient = Patient(server, self.say, repeat=True)
                    workers: dict[str, dict[str, str]] = {name: {} for name in stack.prefixes}
                    while True:
                        for proc in procs.dead():
                            raise HarnessError(f"{proc.name} exited with code {proc.exit_code()}: {proc.tail(5)}")
                        workers = patient.call(lambda: self._worker_urls(stack, client), workers)
                        stack.note = patient.status()
                        rows = self._counts(stack, workers)
                        if stack.prometheus:
                            stack.prometheus.set_targets(self._targets(stack, workers))
                        show(stack, rows)
                        time.sleep(1.0)
            finally:  # the processes are stopped first: one still running could write keys after the cleanup
                self._delete_keys(client, server, broker)
                self._purge(pythons, redis, urls)
                client.close()
                if broker is not None:
                    broker.close()

    def _broker_urls(self, redis: RunRedis, servers: contextlib.ExitStack) -> dict[str, str]:
        """Broker -> its URL: a private server for a PostgreSQL broker without ``broker_url`` (stopped
        with ``servers``), else the named or default server, checked to answer before anything starts."""
        cfg = self.config
        urls: dict[str, str] = {}
        for kind in sorted(set(cfg.brokers.values())):
            if brokers.info(kind).can_be_ledger:  # the run's embedded broker Redis, or the user's
                urls[kind] = redis.broker_url
            elif needs_private_broker(kind, cfg.broker_url, None):
                options = brokers.info(kind).options_from(cfg)
                private = servers.enter_context(provide_broker(kind, self.folder / f"broker-{kind}", cpus=None,
                                                               say=self.say, **options))
                urls[kind] = private.url
            else:
                urls[kind] = Settings(broker=kind, broker_url=cfg.broker_url).broker_address
                check_broker(kind, urls[kind])
        return urls

    def _purge(self, pythons: dict[str, Path], redis: RunRedis, urls: dict[str, str]) -> None:
        """The stack's queues on a RabbitMQ, NATS or PostgreSQL server that outlives it (a private one goes)."""
        for name, kind in self.config.brokers.items():
            if not brokers.info(kind).purge_on_cleanup or needs_private_broker(kind, self.config.broker_url, None):
                continue  # Redis's queues go with the stack's keys; a private server goes with the stack
            env = self._env(name, redis, urls)
            logs = self.folder / "logs" / name
            logs.mkdir(parents=True, exist_ok=True)
            outcome = purge(pythons[name], env, logs)
            if outcome != "ok":
                self.say(f"[{name}] purging its queues on {brokers.describe(kind, urls[kind])}: {outcome}")

    def _env(self, name: str, redis: RunRedis, urls: dict[str, str]) -> dict[str, str]:
        """The TASKBENCH_* variables of ``name``'s processes: its run id, the ledger, its broker."""
        kind = self.config.brokers[name]
        return settings_env(self.config, backend=name, redis_url=redis.url, broker=kind, broker_url=urls[kind],
                            run_id=f"{self.run_id}-{name}")

    def _delete_keys(self, client: Any, server: str, broker: Any) -> None:
        for name in self.config.backends:
            try:
                delete_run_keys(client, f"{self.run_id}-{name}", backends.info(name), broker)
            except redis_errors() as exc:
                self.say(f"{server} did not answer ({exc}): the keys of this stack stay "
                         f"(taskbench:{self.run_id}-*)")
                return

    # -- pieces ---------------------------------------------------------------------------

    def _start(self, procs: Processes, pythons: dict[str, Path], redis: RunRedis, urls: dict[str, str],
               client: Any) -> Stack:
        cfg = self.config
        stack = Stack()
        port = cfg.port
        waiting: list[tuple[Managed, str]] = []
        for name in cfg.backends:
            meta = backends.info(name)
            env = self._env(name, redis, urls)
            env["TASKBENCH_METRICS_DIR"] = str(self.folder / "metrics" / name)
            python = str(pythons[name])
            logs = self.folder / "logs" / name
            if meta.prepares_broker:  # the schema once, before the API and the workers race for it
                prepare(pythons[name], env, logs, self.say)
            check_port_free(cfg.host, port)
            api = procs.start(f"{name}-api", [python, "-m", "taskbench", "serve", "--host", cfg.host,
                                              "--port", str(port)], logs / "api.log", env=env)
            waiting.append((api, f"http://127.0.0.1:{port}/health"))
            shown = "127.0.0.1" if cfg.host in LOOPBACK else cfg.host
            stack.urls.append(Url(f"{name} API", f"http://{shown}:{port}/docs"))
            stack.apis[name] = f"http://127.0.0.1:{port}/metrics"
            stack.prefixes[name] = f"taskbench:{self.run_id}-{name}:"
            port += 1
            for i in range(cfg.workers if meta.has_worker else 0):
                procs.start(f"{name}-worker-{i}", [python, "-m", "taskbench", "worker"],
                            logs / f"worker-{i}.log", env=env)
            if meta.dashboard:
                check_port_free(cfg.host, port)
                dash_env = {**env, **({"TASKBENCH_DASHBOARD_AUTH": cfg.auth} if cfg.auth else {})}
                dash = procs.start(f"{name}-dashboard", [python, "-m", "taskbench", "dashboard", "--host", cfg.host,
                                                         "--port", str(port)], logs / "dashboard.log", env=dash_env)
                waiting.append((dash, f"http://127.0.0.1:{port}/"))
                stack.urls.append(Url(f"{name} {meta.dashboard}", f"http://{shown}:{port}/"))
                port += 1
        self._wait(procs, waiting, client, stack)
        if cfg.prometheus is not False:
            if find_prometheus():
                stack.prometheus = Prometheus(self.folder / "prometheus", cfg.prometheus_port)
                check_port_free("127.0.0.1", cfg.prometheus_port)
                patient = Patient(server_of(client), self.say, purpose="the workers' metrics URLs")
                workers = patient.call(lambda: self._worker_urls(stack, client), {})
                stack.prometheus.set_targets(self._targets(stack, workers))
                stack.prometheus.start(dict(os.environ))
                procs.adopt(stack.prometheus.proc)  # stopped with the rest
                stack.urls.append(Url("Prometheus", f"{stack.prometheus.url}/graph"))
            elif cfg.prometheus:
                raise HarnessError("prometheus is not installed (Debian/Ubuntu: apt-get install prometheus)")
            else:
                self.say("prometheus not installed: live counts only (apt-get install prometheus to add it)")
        for name, url in stack.apis.items():
            stack.urls.append(Url(f"{name} API metrics", url))
        return stack

    def _wait(self, procs: Processes, waiting: list[tuple[Managed, str]], client: Any, stack: Stack) -> None:
        workers = {name: (self.config.workers if backends.info(name).has_worker else 0) for name in stack.apis}
        patient = Patient(server_of(client), self.say, purpose="the workers to register")

        def registered() -> bool:
            return all(int(client.hlen(f"{stack.prefixes[n]}ready")) >= w for n, w in workers.items())

        def ready() -> bool:
            return patient.call(registered, False) and all(_answers(url) for _, url in waiting)

        procs.wait_ready(ready, timeout=self.config.startup_timeout, interval=0.2,
                         what=f"the stack to be ready (logs in {self.folder / 'logs'})")

    def _worker_urls(self, stack: Stack, client: Any) -> dict[str, dict[str, str]]:
        return {name: {k.decode(): v.decode() for k, v in client.hgetall(f"{prefix}metrics").items()}
                for name, prefix in stack.prefixes.items()}

    def _targets(self, stack: Stack, workers: dict[str, dict[str, str]]) -> list[Target]:
        targets = [Target(url=url, backend=name, component="api") for name, url in stack.apis.items()]
        for name, urls in workers.items():
            targets += [Target(url=url, backend=name, component="worker") for url in urls.values()]
        return targets

    def _counts(self, stack: Stack, workers: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
        import http.client

        rows = []
        for name, api_url in stack.apis.items():
            urls = workers.get(name, {})
            row: dict[str, Any] = {"backend": name, "workers": len(urls)}
            for url in [api_url, *urls.values()]:
                try:
                    sums = scrape(url, timeout=1.0)
                except (OSError, ValueError, http.client.HTTPException):
                    continue  # a process busy or gone this second: its counts are missing from this row
                for key, value in sums.items():
                    row[key] = row.get(key, 0.0) + value
            rows.append(row)
        return rows


def _answers(url: str) -> bool:
    import urllib.error
    import urllib.request

    if url.endswith("/health"):
        return healthy(int(url.split(":")[2].split("/")[0]))
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 - our own loopback URL
            return bool(resp.status < 500)
    except urllib.error.HTTPError as exc:
        return exc.code == 401  # behind basic auth: it answers
    except (urllib.error.URLError, OSError):
        return False


def live_table(rows: list[dict[str, Any]], note: str | None = None) -> Any:
    """The live counts as a rich table; ``note`` (what the loop waits for) under it."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="live counts (from every process's /metrics)", title_justify="left",
                  caption=Text(note, style="yellow") if note else None, caption_justify="left")
    for column in ("backend", "workers", "requests", "started", "succeeded", "failed", "in progress",
                   "queue depth"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for row in rows:
        table.add_row(
            row["backend"], str(row["workers"]),
            *(f"{row.get(key, 0):.0f}" for key in (
                "http_requests_total", "taskbench_tasks_started_total", "taskbench_tasks_succeeded_total",
                "taskbench_tasks_failed_total", "taskbench_tasks_in_progress", "taskbench_queue_depth")),
        )
    return table
