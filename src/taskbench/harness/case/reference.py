"""A case of the reference stack (``taskbench run``): one backend's API and workers started for it, with
what the run's config adds (a fault, ``--broker-delay``, limits, ``--restart-workers``, a soak, phases,
the rate search, a user's own task).

Every poll of Redis (readiness, warm-up, drain, the audit's read) waits for a Redis that stalls or
restarts, with backoff inside its own deadline; one that never answers fails the case.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.driver import LoadResult, RequestTemplate, run_load
from taskbench.harness.api_scrape import ApiScrape
from taskbench.harness.brokers import case_durability
from taskbench.harness.brokers.redis import RunRedis
from taskbench.harness.case import fault, own_task, soak
from taskbench.harness.case.audit import check_metrics
from taskbench.harness.case.drain_wait import (
    LONGEST_DRAIN,
    Drain,
    drain,
    drain_timeout,
    follows_backlog,
    quiet,
    redelivery_bound,
    redelivery_timeout,
    settle,
    supervised,
)
from taskbench.harness.case.pipeline import Loaded, Pipeline, describe_load
from taskbench.harness.case.search_load import run_search
from taskbench.harness.case.start import prepare, start_delay_proxy
from taskbench.harness.case.stop import clean_up
from taskbench.harness.case.warm_up import WARMUP_PREFIX, warm_up
from taskbench.harness.config import RunConfig
from taskbench.harness.faults import broker_restart
from taskbench.harness.faults.context import Broker
from taskbench.harness.faults.recovery import fault_verdict, summarize, unkept_promises
from taskbench.harness.faults.stalls import Patient, redis_client, server_of
from taskbench.harness.load import figures as load_figures
from taskbench.harness.load.backlog import origin_of
from taskbench.harness.load.disrupt import Disruptions
from taskbench.harness.processes.pinning import pinned
from taskbench.harness.processes.stack import Stack
from taskbench.ledger import Ledger, Outcomes
from taskbench.net import check_port_free, free_port, healthy
from taskbench.procgroup import Managed
from taskbench.results import FaultRecord, LimitRecord, Promise, QueueCase, Summary
from taskbench.settings import Settings

Say = Callable[[str], None]


class ReferenceCase(Pipeline):
    """One backend under ``cfg`` in a fresh set of processes; ``broker`` is the one its tasks travel
    through (a fault may stall or restart it), ``proxy_port`` the port of ``--broker-delay``'s proxy."""

    def __init__(self, cfg: RunConfig, *, name: str, python: Path, run_id: str, logs: Path, redis: RunRedis,
                 broker: Broker, env_vars: dict[str, str], proxy_port: int | None, say: Say) -> None:
        self.cfg, self.python, self.logs, self.redis, self.broker = cfg, python, logs, redis, broker
        self.env_vars, self.proxy_port = env_vars, proxy_port
        backend = self.backend = backends.info(name)
        self.settings = Settings(backend=name, redis_url=redis.url, run_id=run_id)
        client = redis_client(redis.url)
        self.broker_client = None if redis.shared or not broker.facts.can_be_ledger else redis_client(redis.broker_url)
        durability = case_durability(backend, cfg.enqueue_mode, broker.kind, self.broker_client or client,
                                     broker_url=broker.url)
        self.port = cfg.api_port or free_port()
        check_port_free("127.0.0.1", self.port)
        self.workers = cfg.workers if backend.has_worker else 0
        case = QueueCase(backend=name, broker=broker.kind, workload=cfg.workload, enqueue_mode=cfg.enqueue_mode,
                         durable=durability.durable, durability=durability.text, has_worker=backend.has_worker,
                         workers=self.workers, concurrency=cfg.concurrency, run_id=run_id, unsafe=backend.unsafe,
                         placement=cfg.placement.to_dict(), logs=str(logs),
                         promise_settings=cfg.promise_settings(name))
        delivery = backend.delivery_on(broker.kind, case.promise_settings)
        case.delivery = f"{delivery.guarantee}: {delivery.recovery}" + (
            "" if cfg.versions == "lock" else f" (the lock's versions; on {cfg.versions}'s nothing is judged)")
        stack = Stack({**os.environ, **env_vars}, name=run_id, stop_timeout=cfg.stop_timeout)
        super().__init__(case, label=name, client=client, ledger=Ledger(self.settings.prefix),
                         say=lambda text: say(f"[{name}] {text}"), stack=stack, drain_timeout=cfg.drain_timeout,
                         drain_stall=cfg.drain_stall)
        self.stack: Stack = stack
        self.template = RequestTemplate(host="127.0.0.1", port=self.port,
                                        path=f"/api/v1/incr/{cfg.route_workload}/{name}",
                                        body=own_task.request_body(cfg))
        self.fault_limits: dict[str, LimitRecord] = {}
        self.disruptions: Disruptions | None = None
        self.soaking: soak.SoakRun | None = None
        self.rss: Any = None
        self.revive: Callable[[Managed], str | None] | None = None
        self.scraping: ApiScrape | None = None
        self.revived_in_load: list[str] = []
        self.origin = 0.0  # the load's first request, wall clock
        self.read_outcomes: Outcomes | None = None

    # -- start, warm-up, load -------------------------------------------------------------

    def start(self) -> None:
        cfg, stack, logs, python, workers = self.cfg, self.stack, self.logs, self.python, self.workers
        self.say(f"starting API on 127.0.0.1:{self.port}" + (f" and {workers} worker(s)" if workers else ""))
        if self.proxy_port is not None and cfg.broker_delay is not None:
            self.case.broker_delay_ms = cfg.broker_delay
            start_delay_proxy(stack, self.proxy_port, self.broker, cfg.broker_delay, logs, self.say)
        if self.backend.prepares_broker:  # the schema once, before the API and workers race for it
            prepare(python, self.env_vars, logs, self.say)
        for i in range(workers):
            stack.start(f"worker-{i}", [str(python), "-m", "taskbench", "worker"],
                        logs / f"worker-{i}.log", role="workers", cpus=cfg.placement.workers)
        stack.start("api", [str(python), "-m", "taskbench", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                    logs / "api.log", role="api", cpus=cfg.placement.api)
        ready_key, client = f"{self.settings.prefix}ready", self.client
        patient = Patient(server_of(client), self.say, purpose="the workers to register")

        def ready() -> bool:
            return healthy(self.port) and patient.call(lambda: int(client.hlen(ready_key)) >= workers, False)

        stack.wait_ready(ready, timeout=cfg.startup_timeout,
                         what=f"the API and {workers} worker(s) to be ready (logs in {logs})")
        if cfg.limits:
            stack.limit(cfg.limits, self.say)

    def warm_up(self) -> int:
        cfg = self.cfg
        with self.step("warm-up", total=cfg.warmup or None, executed=lambda: self.ledger.executed_count(self.client)):
            return warm_up(self.template, cfg.load, cfg.warmup, procs=self.stack.procs, client=self.client,
                           ledger=self.ledger, timeout=cfg.drain_timeout, logs=self.logs.parent, say=self.say)

    def load(self) -> Loaded:
        cfg, stack, case = self.cfg, self.stack, self.case
        self.say("load: " + (f"the search for the highest sustainable rate, steps of {cfg.rate_search.step_s:g} s"
                             if cfg.rate_search else describe_load(cfg.load)))
        self.disruptions = Disruptions(cfg.phases, stack.procs, self.broker) if cfg.phases else None
        self.injector, self.fault_limits = fault.arm(cfg, stack, self.client, self.settings, self.port, case,
                                                     self.broker, self.say)
        if self.injector is None and cfg.fault is not None:
            case.fault = FaultRecord(fault=cfg.fault.describe(), target=cfg.fault.target,
                                     note=f"{case.backend} has no worker process to {cfg.fault.kind.split('-')[0]}")
        load_start = time.time()
        # a soak samples the task processes' memory itself, with their CPU, the broker and the backlog
        self.rss = own_task.rss_sampler(cfg, stack.procs, self.backend.has_worker) if cfg.soak is None else None
        self.soaking = soak.start(cfg, stack.procs, self.backend.has_worker, t0=load_start, client=self.client,
                                  ledger=self.ledger, api_port=self.port, broker=self.broker.kind,
                                  broker_client=self.broker_client, broker_url=self.broker.url,
                                  run_id=self.settings.run_id)
        self.revive = fault.supervisor(cfg, stack) if cfg.supervised else None
        # the fault is armed through the load and the drain: one due after a short load's end
        # hits the backlog being worked off (its record says so)
        if self.injector is not None:
            self.through_drain.enter_context(self.injector.armed(load_start))
        if cfg.scrape_api:
            self.scraping = self.through_drain.enter_context(
                ApiScrape(f"http://127.0.0.1:{self.port}/metrics", interval=cfg.scrape_api))
        with self.step("load", total=None if cfg.rate_search else cfg.load.requests,
                       duration=cfg.load.duration or cfg.load.scheduled_s or None, executed=self.executed), \
                stack.measure() as window, pinned(cfg.placement.driver), \
                supervised(stack.procs, self.revive, self.say) as self.revived_in_load:
            load = self._drive()
        self.origin = origin_of(load)
        load_end = time.time()
        case.processes = window.processes
        if self.injector is not None:
            self.injector.load_ended()
        case.load = load.to_model()
        return Loaded(load, load_start, load_end)

    def _drive(self) -> LoadResult:
        """The load: the rate search's steps (each drained: one load), or the config's load."""
        cfg = self.cfg
        if cfg.rate_search is not None:
            self.case.rate_search, load = run_search(self.template, cfg.load, cfg.rate_search, procs=self.stack.procs,
                                                     client=self.client, ledger=self.ledger, say=self.say)
            return load
        started = [hook.started for hook in (self.injector, self.disruptions) if hook is not None]
        if self.disruptions is None:
            return run_load(self.template, cfg.load, started=_each(started))
        with self.disruptions.armed():
            return run_load(self.template, cfg.load, started=_each(started))

    # -- drain, audit ---------------------------------------------------------------------

    def drain(self, loaded: Loaded) -> Drain:
        cfg, load, name = self.cfg, loaded.load, self.case.backend
        if self.backend.fans_out:  # every worker runs its own copy: wait until the copies stop
            return settle(self.procs, self.client, self.ledger, accepted=load.accepted_ids, load_end=loaded.end,
                          timeout=cfg.drain_timeout, say=self.say)
        # stop once executions stop coming (--drain-stall, past a dead worker's redelivery); sooner after
        # a fault on a backend that promises nothing (past every redelivery: the task timeout, arq's 10 s
        # on top, a restart)
        promised = self.promise().keeps_accepted
        stall = max(cfg.drain_stall, redelivery_bound(cfg.redelivery_wait(name)))
        if not promised and self.injector is not None:
            stall = redelivery_bound(cfg.redelivery_wait(name))
        ran = self.ledger.executed_count(self.client) - self.warm_accepted
        seconds = loaded.end - loaded.start
        timeout = drain_timeout(cfg, len(load.accepted_ids), ran, seconds)
        if timeout > cfg.drain_timeout and not cfg.phases:
            self.say(f"the drain waits up to {timeout:.0f} s: {len(load.accepted_ids) - ran} tasks left at "
                     f"{ran / max(1e-9, seconds):.0f} tasks/s during the load (--drain-timeout sets a fixed wait)")
        if promised and self.injector is not None:
            timeout = redelivery_timeout(cfg, name, timeout, self.injector.record, load_start=loaded.start,
                                         load_end=loaded.end, say=self.say)
        drained = drain(self.procs, self.client, self.ledger, target=self.warm_accepted + len(load.accepted_ids),
                        accepted=load.accepted_ids, load_end=loaded.end, timeout=timeout, say=self.say,
                        revive=self.revive, stall=stall, follow=LONGEST_DRAIN if follows_backlog(cfg) else None)
        self.case.revived = self.revived_in_load + drained.revived
        if drained.drained:  # requests the driver gave up on may still be running
            quiet(self.client, self.ledger, say=self.say, failed=load.failed_ids)
        return drained

    def after_drain(self, loaded: Loaded) -> None:
        case = self.case
        if self.scraping is not None:
            case.api_scrape = self.scraping.record(loaded.load.per_second, loaded.end)
            self.say(case.api_scrape.describe())
        self.record_fault()
        case.rss = self.rss.stop() if self.rss is not None else None

    def outcomes(self) -> Outcomes | None:
        self.read_outcomes = own_task.read_outcomes(self.cfg, self.client, self.ledger, self.say)
        return self.read_outcomes

    def indeterminate_words(self) -> str:
        words = super().indeterminate_words()
        report = self.report
        if not words or report is None or report.indeterminate_since is None:
            return words
        limit, timeout = self.backend.time_limit, self.cfg.task_timeout
        age = max(0.0, time.time() - report.indeterminate_since)
        since = f"the first started {age:.0f} s before the audit"
        if not limit:
            return f"{words}; {since}, and {self.case.backend} ends no running task here (no time limit)"
        fired = "had passed: the library gave up on them" if age > timeout else "had not passed: still running"
        return f"{words}; {since}: {limit} ({timeout:g} s, --task-timeout) {fired}"

    def loss_excused(self) -> str | None:
        # a fault may lose what the backend does not promise to keep: those never come, so a drain that
        # waited for them in vain is the loss (audited), not a failure of its own; a drain that ran out of
        # time with tasks still running left a backlog, which no promise excuses (at-most-once would
        # otherwise pass any backlog off as the fault's loss)
        injector, report = self.injector, self.report
        if injector is None or not injector.record.injected or self.drained.still_running:
            return None
        promise = self.promise()
        if not promise.keeps_accepted:
            return promise.text
        inside = report is not None and not unkept_promises(promise, lost=report.lost, duplicated=0,
                                                            kills=len(injector.record.kills) or 1)
        return promise.text if inside else None  # a loss inside the promise's bounds (judged in the verdict)

    def figures(self, loaded: Loaded) -> None:
        cfg, case, rows = self.cfg, self.case, self.rows
        if self.soaking is not None:
            case.soak, soak_rss = self.soaking.finish({} if rows is None else rows.times, load_end=loaded.end,
                                                      skip_prefix=WARMUP_PREFIX)
            case.rss = soak_rss if cfg.user_task else None
            self.failures += case.soak.drift
        if rows is not None:
            if case.fault is not None:
                case.fault = summarize(case.fault, rows.times, case.load, self.promise(), ignore_prefix=WARMUP_PREFIX)
                load_times = {k: v for k, v in rows.times.items() if not k.startswith(WARMUP_PREFIX)}
                case.fault = broker_restart.sent_before(case.fault, load_times)
            # a user's task's call that raised is an execution its worker counts failed, not succeeded
            succeeded = sum(rows.counts.values()) - own_task.failed_executions(self.read_outcomes)
            case.metrics, metric_failures = check_metrics(self.client, self.settings, self.port, succeeded,
                                                          case.fault, case.revived, self.stopped)
            self.failures += metric_failures
        if rows is not None and cfg.phases and case.load is not None:
            case.phases, case.backlog = load_figures.records(cfg.phases, case.load, rows.times, self.origin,
                                                             self.disruptions.records if self.disruptions else ())
            self.failures += [f"phase {p.kind}: {p.error}" for p in case.phases if p.error]
        case.limits = self.stack.limit_records()
        case.fault_limits = self.fault_limits

    # -- stop, verdict --------------------------------------------------------------------

    def finish(self) -> None:
        if self.soaking is not None:
            self.soaking.stop()
        try:
            super().finish()
        finally:
            if self.broker_client is not None:
                self.broker_client.close()

    def clean_up(self) -> None:
        cfg = self.cfg
        self.case.cleanup = clean_up(self.client, self.settings, self.backend, keep=cfg.keep,
                                     purge_on_broker=self.broker.facts.purge_on_cleanup, python=self.python,
                                     env=self.env_vars, logs=self.logs, say=self.say, broker=self.broker_client)

    def stop_failures(self) -> list[str]:
        self.failures[:0] = self.redis.exit_notes()  # the cause first: a dead Redis is why its clients got no answer
        return super().stop_failures()

    def promise(self) -> Promise:
        cfg = self.cfg
        # a restart of the embedded Redis without persistence empties it (the broker is the run's Redis)
        keeps = not (self.broker.facts.can_be_ledger and cfg.redis_url is None and cfg.redis_fsync == "none")
        return fault.case_promise(cfg, self.case, broker_keeps=keeps)

    @property
    def died(self) -> bool:
        """A worker died on its own (an OOM kill, say) and was started again: a fault the harness did not
        inject, whose redeliveries are figures too."""
        return bool(self.case.revived) and not self.injected

    def verdict(self) -> list[str]:
        case, report, broken = self.case, self.report, []
        if report is not None and self.injected and case.fault is not None:
            # lost and duplicated tasks are judged by what the backend promises (docs/backends.md)
            verdict = fault_verdict(case.fault, lost=report.lost, duplicated=report.duplicated)
            broken += verdict.broken
            if verdict.within:  # inside its bounds: shown with the bound, not failed
                case.fault = case.fault.model_copy(update={"within_bounds": verdict.within})
                for line in verdict.within:
                    self.say(line)
        if report is not None and self.died:  # a loss fails only where the backend promises
            broken += unkept_promises(self.promise(), lost=report.lost, duplicated=report.duplicated,
                                      cause=" after a worker died")
        return broken

    def summary(self, loaded: Loaded) -> Summary:
        cfg, case = self.cfg, self.case
        summary = super().summary(loaded)
        if cfg.user_task:
            own_task.add_to_summary(summary, self.report, case.rss)
        if cfg.phases and case.load is not None:  # the warm-up phase is in no figure
            summary = load_figures.summarize(summary, cfg.phases, case.load)
        if case.rate_search is not None:
            summary.sustainable_rps = case.rate_search.rate
        return summary

    def figures_of_loss(self) -> bool:
        # after a fault, or on an unsafe seed wiring, lost and duplicated tasks are the case's figures
        return self.injected or self.died or bool(self.backend.unsafe)

    def bounded(self) -> bool:
        return self.injected or self.died


def _each(hooks: list[Callable[[], None]]) -> Callable[[], None] | None:
    """The driver's start, told to the fault's injector and the phases' disruptions (each counts from it)."""
    if not hooks:
        return None

    def started() -> None:
        for hook in hooks:
            hook()

    return started
