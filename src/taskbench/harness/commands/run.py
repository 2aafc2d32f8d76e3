"""``taskbench run``: the cases of a benchmark, one per backend, each on its broker; a case is the reference
stack's pipeline (:mod:`taskbench.harness.case.reference`)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from taskbench import backends, brokers
from taskbench.files import write_atomic
from taskbench.harness import HarnessError, progress
from taskbench.harness.brokers import (
    PrivateServer,
    check_broker,
    find_broker_server,
    needs_private_broker,
    provide_broker,
)
from taskbench.harness.brokers.delay_proxy import behind
from taskbench.harness.brokers.redis import RunRedis, provide_redis
from taskbench.harness.case import own_task
from taskbench.harness.case.audit import mark_interrupted
from taskbench.harness.case.reference import ReferenceCase
from taskbench.harness.config import RunConfig
from taskbench.harness.faults.context import Broker
from taskbench.harness.faults.kinds import paced_for
from taskbench.harness.load.disrupt import Disruptions
from taskbench.harness.load.files import check_open_files
from taskbench.harness.machine import result_header
from taskbench.harness.processes.envs import ensure_env, ensure_pinned, environment_key, project_root, versions
from taskbench.harness.processes.runs import registered
from taskbench.net import free_port
from taskbench.params import settings_env
from taskbench.results import QueueCase, Result
from taskbench.settings import Settings

Say = Callable[[str], None]


def stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")


def write_result(path: Path, result: Result) -> None:
    """Write atomically: a reader (or an interrupted run) never sees half a file, a planted link is replaced."""
    write_atomic(path, result.to_json())


class Runner:
    def __init__(self, config: RunConfig, say: Say = print, run_id: str | None = None) -> None:
        # a count-bounded load that a fast backend would finish before its fault is due is paced (said
        # when the run starts; the result's config holds the pace)
        paced = None if config.phases or config.rate_search or config.soak else paced_for(config.load, config.fault)
        self.pace_line = None if paced is None else paced[1]
        self.config = config if paced is None else replace(config, load=paced[0])
        self.say = say
        self.run_id = run_id or f"{stamp()}-{os.getpid()}"
        self.out_dir = config.output / self.run_id
        self.root = project_root()
        self.private: PrivateServer | None = None  # a RabbitMQ/NATS server started for a broker fault
        self.partial: QueueCase | None = None  # the case under way: an interrupted run records what it has

    # -- public ---------------------------------------------------------------------------

    def run(self) -> Result:
        """Every case; on Ctrl-C or SIGTERM, ``result.json`` marked interrupted with what was measured."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        result = Result(kind="run", config=self.config.to_dict(), **result_header(self.run_id, self.root))
        if self.pace_line:
            self.say(self.pace_line)
        with registered(self.config.output, self.say):
            try:
                return self._run(result)
            except KeyboardInterrupt as exc:
                result.interrupted = f"interrupted during {progress.phase_of(exc) or 'the start'}"
                if self.partial is not None and self.partial not in result.cases:
                    mark_interrupted(self.partial, result.interrupted)
                    result.cases.append(self.partial)
                result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                write_result(self.result_path(), result)
                self.say(f"{result.interrupted}: what was measured until then is in {self.result_path()}")
                raise

    def _run(self, result: Result) -> Result:
        cfg = self.config
        check_open_files(cfg.load, self.say, api=True)  # before anything starts: a load past ulimit -n is all errors
        pythons = {name: self.environment(name) for name in cfg.backends}
        own_task.prepare(cfg, pythons, self.say)  # --with installed, the callable imported: before any load
        result.environments = {environment_key(n, cfg.versions): versions(str(p)) for n, p in pythons.items()}
        of_backend = cfg.brokers  # each backend's broker: --broker, else its own default
        on_redis = any(brokers.info(kind).can_be_ledger for kind in of_backend.values())
        with provide_redis(cfg.redis_url, self.out_dir, cpus=cfg.placement.redis, fsync=cfg.redis_fsync,
                           broker_url=cfg.broker_url if on_redis else None, redis_broker=on_redis,
                           say=self.say) as redis:
            result.redis = redis.info
            try:
                for broker in dict.fromkeys(of_backend.values()):  # every broker checked before any case starts
                    self.config = on_broker(cfg, broker)
                    self._check_broker(redis)
                for index, name in enumerate(cfg.backends):
                    self.config = on_broker(cfg, of_backend[name])
                    result.cases.append(self.run_case(index, name, pythons[name], redis))
                    write_result(self.result_path(), result)
            finally:
                self.config = cfg
        result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        write_result(self.result_path(), result)
        return result

    @property
    def broker(self) -> str:
        """The broker of the case at hand: :meth:`run` sets one per case, a scenario's config names one."""
        broker = self.config.broker
        assert broker is not None, "a case's config names its broker"
        return broker

    def _check_broker(self, redis: RunRedis) -> None:
        """The broker of ``self.config`` can be used: a private server's binary is there, a named one
        answers, and the fault can be injected on it."""
        cfg = self.config
        if self._private_needed():  # each case gets a private server: its binary must be there
            find_broker_server(self.broker)
            return
        if not brokers.info(self.broker).can_be_ledger:
            broker_url = Settings(broker=self.broker, broker_url=cfg.broker_url).broker_address
            check_broker(self.broker, broker_url)
        problem = cfg.fault.problem(self.broker_of(redis)) if cfg.fault else None
        problem = problem or Disruptions.problem(cfg.phases, self.broker_of(redis))
        if problem:
            raise HarnessError(problem)

    def _private_needed(self) -> bool:
        cfg = self.config
        return needs_private_broker(self.broker, cfg.broker_url, cfg.fault.target if cfg.fault else None)

    def broker_of(self, redis: RunRedis) -> Broker:
        """The broker the case's tasks travel through (a fault may stall or restart it)."""
        cfg = self.config
        if brokers.info(self.broker).can_be_ledger:
            return Broker(self.broker, redis.broker_url, server=redis.broker)
        if self.private is not None:
            return Broker(self.broker, self.private.url, server=self.private)
        return Broker(self.broker, Settings(broker=self.broker, broker_url=cfg.broker_url).broker_address)

    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    def environment(self, name: str) -> Path:
        """The Python of ``name``'s API and workers: its environment from uv.lock, or the pinned set of
        ``--versions``."""
        if self.config.versions != "lock":
            return ensure_pinned(self.config.versions)
        return ensure_env(backends.info(name).extra)

    def _settings_env(self, name: str, run_id: str, redis: RunRedis, proxy_port: int | None) -> dict[str, str]:
        cfg = self.config
        given: dict[str, str] = {"backend": name, "run_id": run_id, "redis_url": redis.url}
        if brokers.info(self.broker).can_be_ledger:  # the Redis backends' broker: its own server unless shared
            given["broker_url"] = redis.broker_url
        elif self.private is not None:
            given["broker_url"] = self.private.url
        if proxy_port is not None:  # --broker-delay: the API and the workers reach it through the proxy
            given["broker_url"] = behind(self.broker_of(redis).url, proxy_port)
        return settings_env(cfg, **given)

    def run_case(self, index: int, name: str, python: Path, redis: RunRedis) -> QueueCase:
        """One backend under ``self.config``, in a fresh set of processes (a scenario swaps the config).

        A fault on a RabbitMQ/NATS broker gets a private server for the case
        (:func:`~taskbench.harness.brokers.provide_broker`): never the machine's shared one.
        """
        if not self._private_needed():
            return self._run_case(index, name, python, redis)
        folder = self.out_dir / "logs" / f"{index}-{name}" / "broker"
        options = brokers.info(self.broker).options_from(self.config)
        with provide_broker(self.broker, folder, cpus=self.config.placement.redis,
                            say=lambda text: self.say(f"[{name}] {text}"), **options) as server:
            self.private = server
            try:
                return self._run_case(index, name, python, redis)
            finally:
                self.private = None

    def _run_case(self, index: int, name: str, python: Path, redis: RunRedis) -> QueueCase:
        """:meth:`run_case` on the broker at hand: the reference stack's pipeline
        (:class:`~taskbench.harness.case.reference.ReferenceCase`)."""
        cfg = self.config
        run_id = f"{self.run_id}-{index}-{name}"
        logs = self.out_dir / "logs" / f"{index}-{name}"
        proxy_port = free_port() if cfg.broker_delay is not None else None
        env_vars = self._settings_env(name, run_id, redis, proxy_port)
        env_vars["TASKBENCH_METRICS_DIR"] = str(logs / "metrics")
        case = ReferenceCase(cfg, name=name, python=python, run_id=run_id, logs=logs, redis=redis,
                             broker=self.broker_of(redis), env_vars=env_vars, proxy_port=proxy_port, say=self.say)
        self.partial = case.case
        return case.run()


def on_broker(cfg: RunConfig, broker: str) -> RunConfig:
    """A run's config for its cases on ``broker``: that broker, and the backends that run there."""
    return replace(cfg, broker=broker, backends=tuple(n for n, b in cfg.brokers.items() if b == broker))


