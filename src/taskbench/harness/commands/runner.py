"""Runs the cases of a benchmark: start, wait ready, warm up, load, drain, audit, stop, clean."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness import HarnessError, progress
from taskbench.harness.api_scrape import ApiScrape
from taskbench.harness.brokers import (
    PrivateServer,
    case_durability,
    check_broker,
    find_broker_server,
    needs_private_broker,
    provide_broker,
)
from taskbench.harness.brokers.delay_proxy import BROKER_PORTS, behind, target_of
from taskbench.harness.brokers.redis import RunRedis, provide_redis
from taskbench.harness.commands import own_task, soak
from taskbench.harness.commands.drain_wait import (
    LONGEST_DRAIN,
    drain_timeout,
    follows_backlog,
    redelivery_bound,
    redelivery_timeout,
)
from taskbench.harness.commands.phases import (
    WARMUP_PREFIX,
    check_metrics,
    clean_up,
    drain,
    prepare,
    queue_status,
    queue_summary,
    quiet,
    read_ledger,
    settle,
    stop_executors,
    stop_failures,
    supervised,
    warm_up,
)
from taskbench.harness.commands.search_steps import run_search
from taskbench.harness.config import RunConfig
from taskbench.harness.faults import broker_restart
from taskbench.harness.faults.context import Broker
from taskbench.harness.faults.injector import Injector
from taskbench.harness.faults.kinds import paced_for
from taskbench.harness.faults.recovery import fault_verdict, promise_of, summarize, unkept_promises
from taskbench.harness.faults.stalls import Patient, redis_client, server_of
from taskbench.harness.load import figures as load_figures
from taskbench.harness.load.backlog import origin_of
from taskbench.harness.load.disrupt import Disruptions
from taskbench.harness.machine import result_header
from taskbench.harness.processes.envs import ensure_env, ensure_pinned, environment_key, project_root, versions
from taskbench.harness.processes.pinning import pinned
from taskbench.harness.processes.runs import registered
from taskbench.harness.processes.stack import Stack
from taskbench.ledger import Ledger, audit
from taskbench.net import check_port_free, free_port, healthy, listening
from taskbench.params import settings_env
from taskbench.procgroup import Managed
from taskbench.results import FaultRecord, LimitRecord, Promise, QueueCase, Result
from taskbench.settings import Settings

Say = Callable[[str], None]


def stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")


def write_result(path: Path, result: Result) -> None:
    """Write atomically: a reader (or an interrupted run) never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.to_json())
    tmp.replace(path)


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
                    self.partial.status = "failed"
                    self.partial.failures.append(result.interrupted)
                    result.cases.append(self.partial)
                result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                write_result(self.result_path(), result)
                self.say(f"{result.interrupted}: what was measured until then is in {self.result_path()}")
                raise

    def _run(self, result: Result) -> Result:
        cfg = self.config
        pythons = {name: self.environment(name) for name in cfg.backends}
        own_task.prepare(cfg, pythons, self.say)  # --with installed, the callable imported: before any load
        result.environments = {environment_key(n, cfg.versions): versions(str(p)) for n, p in pythons.items()}
        brokers = cfg.brokers  # each backend's broker: --broker, else its own default
        on_redis = "redis" in brokers.values()
        with provide_redis(cfg.redis_url, self.out_dir, cpus=cfg.placement.redis, fsync=cfg.redis_fsync,
                           broker_url=cfg.broker_url if on_redis else None, redis_broker=on_redis,
                           say=self.say) as redis:
            result.redis = redis.info
            try:
                for broker in dict.fromkeys(brokers.values()):  # every broker checked before any case starts
                    self.config = on_broker(cfg, broker)
                    self._check_broker(redis)
                for index, name in enumerate(cfg.backends):
                    self.config = on_broker(cfg, brokers[name])
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
        if self.broker != "redis":
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
        if self.broker == "redis":
            return Broker("redis", redis.broker_url, server=redis.broker)
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

    # -- one case -------------------------------------------------------------------------

    def _settings_env(self, name: str, run_id: str, redis: RunRedis, proxy_port: int | None) -> dict[str, str]:
        cfg = self.config
        given: dict[str, str] = {"backend": name, "run_id": run_id, "redis_url": redis.url}
        if self.broker == "redis":  # the Redis backends' broker: its own server unless shared
            given["broker_url"] = redis.broker_url
        elif self.private is not None:
            given["broker_url"] = self.private.url
        if proxy_port is not None:  # --broker-delay: the API and the workers reach it through the proxy
            given["broker_url"] = behind(self.broker_address(redis), proxy_port)
        return settings_env(cfg, **given)

    def broker_address(self, redis: RunRedis) -> str:
        """The broker's real URL (a delay proxy, if any, stands in front of it)."""
        cfg = self.config
        if self.broker == "redis":
            return redis.broker_url
        if self.private is not None:
            return self.private.url
        return Settings(broker=self.broker, broker_url=cfg.broker_url).broker_address

    def _start_delay_proxy(self, stack: Stack, port: int, redis: RunRedis, logs: Path, say: Say) -> str:
        """Start the delay proxy (before the API and the workers) and wait until it listens; its line."""
        cfg = self.config
        target = target_of(self.broker_address(redis), BROKER_PORTS[self.broker])
        stack.start("broker-delay", [sys.executable, "-m", "taskbench.harness.brokers.delay_proxy", "--port", str(port),
                                     "--target", f"{target[0]}:{target[1]}", "--delay-ms", f"{cfg.broker_delay:g}"],
                    logs / "broker-delay.log")
        stack.wait_ready(lambda: listening(port), timeout=30, what=f"the delay proxy on 127.0.0.1:{port}")
        line = (f"broker behind a delay proxy: {cfg.broker_delay:g} ms each way "
                f"(127.0.0.1:{port} -> {target[0]}:{target[1]})")
        say(line)
        return line

    def run_case(self, index: int, name: str, python: Path, redis: RunRedis) -> QueueCase:
        """One backend under ``self.config``, in a fresh set of processes (a scenario swaps the config).

        A fault on a RabbitMQ/NATS broker gets a private server for the case
        (:func:`~taskbench.harness.brokers.provide_broker`): never the machine's shared one.
        """
        if not self._private_needed():
            return self._run_case(index, name, python, redis)
        folder = self.out_dir / "logs" / f"{index}-{name}" / "broker"
        options = {"durability": self.config.postgres_durability} if self.broker == "postgres" else {}
        with provide_broker(self.broker, folder, cpus=self.config.placement.redis,
                            say=lambda text: self.say(f"[{name}] {text}"), **options) as server:
            self.private = server
            try:
                return self._run_case(index, name, python, redis)
            finally:
                self.private = None

    def _run_case(self, index: int, name: str, python: Path, redis: RunRedis) -> QueueCase:
        """:meth:`run_case` on the broker at hand.

        Every poll of Redis (readiness, warm-up, drain, the audit's read) waits for a Redis that stalls
        or restarts, with backoff inside its own deadline; one that never answers fails the case.
        """
        cfg = self.config
        backend = backends.info(name)
        run_id = f"{self.run_id}-{index}-{name}"
        logs = self.out_dir / "logs" / f"{index}-{name}"
        proxy_port = free_port() if cfg.broker_delay is not None else None
        env_vars = self._settings_env(name, run_id, redis, proxy_port)
        env_vars["TASKBENCH_METRICS_DIR"] = str(logs / "metrics")
        redis_url = redis.url
        settings = Settings(backend=name, redis_url=redis_url, run_id=run_id)
        ledger = Ledger(settings.prefix)
        client = redis_client(redis_url)
        broker_client = None if redis.shared or self.broker != "redis" else redis_client(redis.broker_url)
        durability = case_durability(backend, cfg.enqueue_mode, self.broker, broker_client or client,
                                     broker_url=self.broker_address(redis))
        port = cfg.api_port or free_port()
        check_port_free("127.0.0.1", port)
        workers = cfg.workers if backend.has_worker else 0
        case = QueueCase(backend=name, broker=self.broker, workload=cfg.workload, enqueue_mode=cfg.enqueue_mode,
                         durable=durability.durable, durability=durability.text, has_worker=backend.has_worker,
                         workers=workers, concurrency=cfg.concurrency, run_id=run_id, unsafe=backend.unsafe,
                         placement=cfg.placement.to_dict(), logs=str(logs),
                         promise_settings=cfg.promise_settings(name))
        delivery = backend.delivery_on(self.broker, case.promise_settings)
        case.delivery = f"{delivery.guarantee}: {delivery.recovery}" + (
            "" if cfg.versions == "lock" else f" (the lock's versions; on {cfg.versions}'s nothing is judged)")

        def say(text: str) -> None:
            self.say(f"[{name}] {text}")

        self.partial = case
        say(f"starting API on 127.0.0.1:{port}" + (f" and {workers} worker(s)" if workers else ""))
        failures: list[str] = []
        stack = Stack({**os.environ, **env_vars}, name=run_id, stop_timeout=cfg.stop_timeout)
        soaking: soak.SoakRun | None = None
        def executed() -> int:
            return ledger.executed_count(client)

        try:
            with stack:
                with progress.phase(f"[{name}] start"):
                    if proxy_port is not None:
                        case.broker_delay_ms = cfg.broker_delay
                        self._start_delay_proxy(stack, proxy_port, redis, logs, say)
                    if backend.prepares_broker:  # the schema once, before the API and workers race for it
                        prepare(python, env_vars, logs, say)
                    for i in range(workers):
                        stack.start(f"worker-{i}", [str(python), "-m", "taskbench", "worker"],
                                    logs / f"worker-{i}.log", role="workers", cpus=cfg.placement.workers)
                    stack.start("api", [str(python), "-m", "taskbench", "serve", "--host", "127.0.0.1",
                                        "--port", str(port)], logs / "api.log", role="api", cpus=cfg.placement.api)
                    ready_key = f"{settings.prefix}ready"
                    patient = Patient(server_of(client), say, purpose="the workers to register")
                    stack.wait_ready(lambda: healthy(port) and patient.call(
                                         lambda: int(client.hlen(ready_key)) >= workers, False),
                                     timeout=cfg.startup_timeout,
                                     what=f"the API and {workers} worker(s) to be ready (logs in {logs})")
                if cfg.limits:
                    stack.limit(cfg.limits, say)
                template = RequestTemplate(
                    host="127.0.0.1", port=port, path=f"/api/v1/incr/{cfg.route_workload}/{name}",
                    body=own_task.request_body(cfg),
                )
                with progress.phase(f"[{name}] warm-up", total=cfg.warmup or None, executed=executed):
                    warm_accepted = warm_up(template, cfg.load, cfg.warmup, procs=stack.procs, client=client,
                                            ledger=ledger, timeout=cfg.drain_timeout, logs=logs.parent, say=say)
                say("load: " + (f"the search for the highest sustainable rate, steps of {cfg.rate_search.step_s:g} s"
                                if cfg.rate_search else describe_load(cfg.load)))
                disruptions = Disruptions(cfg.phases, stack.procs, self.broker_of(redis)) if cfg.phases else None
                injector, fault_limits = self._injector(stack, client, settings, port, case, redis)
                if injector is None and cfg.fault is not None:
                    case.fault = FaultRecord(fault=cfg.fault.describe(), target=cfg.fault.target,
                                             note=f"{name} has no worker process to {cfg.fault.kind.split('-')[0]}")
                load_start = time.time()
                # a soak samples the task processes' memory itself, with their CPU, the broker and the backlog
                rss = own_task.rss_sampler(cfg, stack.procs, backend.has_worker) if cfg.soak is None else None
                soaking = soak.start(cfg, stack.procs, backend.has_worker, t0=load_start, client=client,
                                     ledger=ledger, api_port=port, broker=self.broker, broker_client=broker_client,
                                     broker_url=self.broker_address(redis), run_id=run_id)
                supervisor = self._supervisor(stack) if cfg.supervised else None
                # the fault is armed through the load and the drain: one due after a short load's end
                # hits the backlog being worked off (its record says so)
                scraping = ApiScrape(f"http://127.0.0.1:{port}/metrics", interval=cfg.scrape_api) \
                    if cfg.scrape_api else None
                with injector.armed(load_start) if injector else contextlib.nullcontext(), \
                        scraping if scraping is not None else contextlib.nullcontext():
                    with progress.phase(f"[{name}] load", total=None if cfg.rate_search else cfg.load.requests,
                                        duration=cfg.load.duration or cfg.load.scheduled_s or None,
                                        executed=lambda: max(0, executed() - warm_accepted)), \
                            stack.measure() as window, pinned(cfg.placement.driver), \
                            supervised(stack.procs, supervisor, say) as revived_in_load:
                        if cfg.rate_search is not None:  # steps of the open model, each drained: one load
                            case.rate_search, load = run_search(template, cfg.load, cfg.rate_search, procs=stack.procs,
                                                                client=client, ledger=ledger, say=say)
                        else:
                            with disruptions.armed() if disruptions else contextlib.nullcontext():
                                load = run_load(template, cfg.load, started=_started(injector, disruptions))
                    origin = origin_of(load)
                    load_end = time.time()
                    case.processes = window.processes
                    if injector is not None:
                        injector.load_ended()
                    case.load = load.to_model()
                    with progress.phase(f"[{name}] drain", total=len(load.accepted_ids),
                                        executed=lambda: max(0, executed() - warm_accepted),
                                        accepted=lambda: len(load.accepted_ids)):
                        # said inside the drain's phase: an interrupt after this line names the drain
                        say(f"{load.ok} accepted at {load.rps:.0f} req/s; draining")
                        if backend.fans_out:  # every worker runs its own copy: wait until the copies stop
                            drained = settle(stack.procs, client, ledger, accepted=load.accepted_ids,
                                             load_end=load_end, timeout=cfg.drain_timeout, say=say)
                        else:
                            # stop once executions stop coming (--drain-stall, past a dead worker's redelivery);
                            # sooner after a fault on a backend that promises nothing (past every redelivery:
                            # the task timeout, arq's 10 s on top, a restart)
                            promised = self._promise(name, case).keeps_accepted
                            stall = max(cfg.drain_stall, redelivery_bound(cfg.redelivery_wait(name)))
                            if not promised and injector is not None:
                                stall = redelivery_bound(cfg.redelivery_wait(name))
                            ran = executed() - warm_accepted
                            timeout = drain_timeout(cfg, len(load.accepted_ids), ran, load_end - load_start)
                            if timeout > cfg.drain_timeout and not cfg.phases:
                                say(f"the drain waits up to {timeout:.0f} s: {len(load.accepted_ids) - ran} tasks "
                                    f"left at {ran / max(1e-9, load_end - load_start):.0f} tasks/s during the load "
                                    f"(--drain-timeout sets a fixed wait)")
                            if promised and injector is not None:
                                timeout = redelivery_timeout(cfg, name, timeout, injector.record,
                                                             load_start=load_start, load_end=load_end, say=say)
                            drained = drain(stack.procs, client, ledger, target=warm_accepted + len(load.accepted_ids),
                                            accepted=load.accepted_ids, load_end=load_end, timeout=timeout,
                                            say=say, revive=supervisor, stall=stall,
                                            follow=LONGEST_DRAIN if follows_backlog(cfg) else None)
                            case.revived = revived_in_load + drained.revived
                            if drained.drained:  # requests the driver gave up on may still be running
                                quiet(client, ledger, say=say, failed=load.failed_ids)
                if scraping is not None:
                    case.api_scrape = scraping.record(load.per_second, load_end)
                    say(case.api_scrape.describe())
                if injector is not None:
                    case.fault = injector.record
                    if injector.record.error:
                        failures.append(f"fault {cfg.fault.describe() if cfg.fault else ''}: "
                                        f"{injector.record.error}")
                    elif not injector.record.injected:
                        failures.append(f"fault {injector.record.fault}: {injector.record.note}")
                promise = self._promise(name, case)
                # a fault may lose what the backend does not promise to keep: those never come, so a
                # drain that waited for them in vain is the loss (audited), not a failure of its own; a
                # drain that ran out of time with tasks still running left a backlog, which no promise
                # excuses (at-most-once would otherwise pass any backlog off as the fault's loss)
                drain_ok = drained.drained or (injector is not None and injector.record.injected
                                               and not promise.keeps_accepted and not drained.still_running)
                case.rss = rss.stop() if rss is not None else None
                stopped: list[str] = []
                if not drained.drained:
                    time.sleep(cfg.late_grace)  # a straggler finishing now is counted late, not lost
                    # what runs the tasks stops before the audit, so the drain, the audit and the metrics
                    # give one number of tasks that never ran (the workers' counters as they stopped)
                    with progress.phase(f"[{name}] stop the workers"):
                        stopped = stop_executors(stack.procs, backend.has_worker)
                with progress.phase(f"[{name}] audit"):
                    rows, read_failures = read_ledger(client, ledger, say=say)
                    failures += read_failures
                    outcomes = own_task.read_outcomes(cfg, client, ledger, say)
                    report = None if rows is None else audit(
                        load.accepted_ids, rows.counts, rows.times, deadline=drained.deadline,
                        ignore_prefix=WARMUP_PREFIX, start=load_start, corrupt=rows.corrupt,
                        failed_ids=load.failed_ids, refused_ids=load.refused_ids(), outcomes=outcomes).to_model()
                lines = drained.lines(None if report is None else report.lost)
                if not drain_ok and report is not None and injector is not None and injector.record.injected \
                        and not drained.still_running and not unkept_promises(promise, lost=report.lost, duplicated=0,
                                                kills=len(injector.record.kills) or 1):
                    drain_ok = True  # what it waited for is a loss inside the promise's bounds (judged below)
                if drain_ok and not drained.drained:
                    say(f"{'; '.join(lines)} ({promise.text}: audited as lost)")
                else:
                    failures += lines
                if soaking is not None:
                    case.soak, soak_rss = soaking.finish({} if rows is None else rows.times, load_end=load_end,
                                                         skip_prefix=WARMUP_PREFIX)
                    case.rss = soak_rss if cfg.user_task else None
                    failures += case.soak.drift
                if rows is not None:
                    if case.fault is not None:
                        case.fault = summarize(case.fault, rows.times, case.load, promise,
                                               ignore_prefix=WARMUP_PREFIX)
                        load_times = {k: v for k, v in rows.times.items() if not k.startswith(WARMUP_PREFIX)}
                        case.fault = broker_restart.sent_before(case.fault, load_times)
                    # a user's task's call that raised is an execution its worker counts failed, not succeeded
                    succeeded = sum(rows.counts.values()) - own_task.failed_executions(outcomes)
                    case.metrics, metric_failures = check_metrics(client, settings, port, succeeded,
                                                                  case.fault, case.revived, stopped)
                    failures += metric_failures
                if rows is not None and cfg.phases and case.load is not None:
                    case.phases, case.backlog = load_figures.records(cfg.phases, case.load, rows.times, origin,
                                                                     disruptions.records if disruptions else ())
                    failures += [f"phase {p.kind}: {p.error}" for p in case.phases if p.error]
                case.limits = stack.limit_records()
                case.fault_limits = fault_limits
                with progress.phase(f"[{name}] stop"):  # the API first, then the workers (SIGTERM)
                    stack.stop()
        finally:
            if soaking is not None:
                soaking.stop()
            case.exit_codes = dict(stack.exit_codes)
            case.cleanup = clean_up(client, settings, backend, keep=cfg.keep, purge_on_broker=self.broker != "redis",
                                    python=python, env=env_vars, logs=logs, say=say, broker=broker_client)
            client.close()
            if broker_client is not None:
                broker_client.close()
        failures += stop_failures(stack.procs)
        failures[:0] = redis.exit_notes()  # the cause first: a dead Redis is why its clients got no answer
        case.audit = report
        injected = case.fault is not None and case.fault.injected
        if report is not None and injected:
            # lost and duplicated tasks are judged by what the backend promises (docs/backends.md)
            verdict = fault_verdict(case.fault, lost=report.lost, duplicated=report.duplicated)
            failures += verdict.broken
            if case.fault is not None and verdict.within:  # inside its bounds: shown with the bound, not failed
                case.fault = case.fault.model_copy(update={"within_bounds": verdict.within})
                for line in verdict.within:
                    self.say(f"[{name}] {line}")
        # a worker that died on its own (an OOM kill, say) and was started again is a fault the harness did
        # not inject: its redeliveries are figures too, and a loss fails only where the backend promises
        died = bool(case.revived) and not injected
        if report is not None and died:
            failures += unkept_promises(promise, lost=report.lost, duplicated=report.duplicated,
                                        cause=" after a worker died")
        case.summary = queue_summary(case.load, report, load_start=load_start, drained=drained.drained,
                                     fault=case.fault)
        if cfg.user_task:
            own_task.add_to_summary(case.summary, report, case.rss)
        if cfg.phases and case.load is not None:  # the warm-up phase is in no figure
            case.summary = load_figures.summarize(case.summary, cfg.phases, case.load)
        if case.rate_search is not None:
            case.summary.sustainable_rps = case.rate_search.rate
        case.failures = failures
        # after a fault, or on an unsafe seed wiring, lost and duplicated tasks are the case's figures
        audit_ok = report is not None and (report.corrupt == 0 if injected or died or backend.unsafe else report.ok)
        case.status = queue_status(case.summary, audit_ok=audit_ok, drained=drain_ok, failures=failures,
                                   bounded=injected or died)
        return case

    def _promise(self, name: str, case: QueueCase) -> Promise:
        """What ``name`` promises in ``case``: its registry entry on the case's broker under the run's
        settings, with the bounds of the case's fault (docs/backends.md, "What a fault case promises")."""
        cfg = self.config
        # a restart of the embedded Redis without persistence empties it
        keeps = not (self.broker == "redis" and cfg.redis_url is None and cfg.redis_fsync == "none")
        return promise_of(name, self.broker, durable=case.durable, why=case.durability, broker_keeps=keeps,
                          settings=cfg.promise_settings(name), fault=cfg.fault.kind if cfg.fault else None,
                          workers=cfg.workers, concurrency=cfg.concurrency, versions=cfg.versions)

    def _injector(self, stack: Stack, client: Any, settings: Settings, port: int, case: QueueCase,
                  redis: RunRedis) -> tuple[Injector | None, dict[str, LimitRecord]]:
        """The fault of the config, armed on this case's processes (None when there is nothing to inject)."""
        fault = self.config.fault
        restarted_limits: dict[str, LimitRecord] = {}
        if fault is None or (fault.target.startswith("worker") and not case.has_worker):
            return None, restarted_limits
        broker = self.broker_of(redis)
        problem = fault.problem(broker)
        if problem:
            raise HarnessError(problem)

        patient = Patient(server_of(client), self.say, purpose="the restarted worker to register")

        def ready(proc: Managed) -> bool:
            if proc.name == "api":
                return healthy(port)
            return patient.call(lambda: bool(client.hexists(f"{settings.prefix}ready", f"worker:{proc.pid}")), False)

        def restarted(proc: Managed) -> None:
            # the new process gets the limits the killed one had, as a restarted container would
            limit = self.config.limits.get("api" if proc.name == "api" else "workers")
            if limit is not None:
                restarted_limits[proc.name] = stack.limit_process(proc, limit, track=False)

        injector = Injector(fault, stack.procs, ready=ready, restarted=restarted,
                            ready_timeout=self.config.startup_timeout, broker=broker)
        return injector, restarted_limits


    def _supervisor(self, stack: Stack) -> Callable[[Managed], str | None]:
        """``--restart-workers``: a worker that exited on its own is started again with the limits it
        had, as a supervisor with ``restart: on-failure`` would; the line says what happened. None: not
        this one's to restart (a fault killed it and restarts it, or the set is stopping)."""
        limit = self.config.limits.get("workers")

        def revive(proc: Managed) -> str | None:
            try:
                new, code = stack.procs.revive(proc.name)
            except (StopIteration, KeyError, RuntimeError):
                return None
            if limit is not None:
                stack.limit_process(new, limit, track=False)
            return (f"{proc.name} (pid {proc.pid}) exited on its own with code {code}; started again as "
                    f"pid {new.pid} (--restart-workers)")

        return revive


def on_broker(cfg: RunConfig, broker: str) -> RunConfig:
    """A run's config for its cases on ``broker``: that broker, and the backends that run there."""
    return replace(cfg, broker=broker, backends=tuple(n for n, b in cfg.brokers.items() if b == broker))


def _started(*hooks: Injector | Disruptions | None) -> Callable[[], None] | None:
    """The driver's start, told to the fault's injector and the phases' disruptions (each counts from it)."""
    found = [hook for hook in hooks if hook is not None]
    if not found:
        return None

    def started() -> None:
        for hook in found:
            hook.started()

    return started


def describe_load(spec: LoadSpec) -> str:
    if spec.schedule:
        return f"open model, {spec.users} users, {len(spec.schedule)} phases over {spec.scheduled_s:g} s"
    bounds = []
    if spec.requests:
        bounds.append(f"{spec.requests} requests")
    if spec.duration:
        bounds.append(f"{spec.duration:g} s")
    rate = f" at {spec.rate:g}/s" if spec.model == "open" else ""
    pace = f", each at most one every {spec.pace:.3g} s" if spec.pace else ""
    return f"{spec.model} model, {spec.users} users{rate}{pace}, {' or '.join(bounds)}"
