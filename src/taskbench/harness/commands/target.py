"""``taskbench run --target URL``: load a service the user runs, audit its tasks in taskbench's ledger.

Nothing of the reference stack starts: the user's FastAPI app, workers and broker are theirs. The
driver sends each request with a task reference (``<case run id>.<n>-<seq>@<send time>``) in the
``X-Taskbench-Task`` header and/or where the ``--payload`` template says ``{task_id}``; the user's task,
wrapped in the probe's decorator (``probe/``, ``taskbench_probe``), records each execution under
``taskbench:<case run id>:`` in the ledger's Redis (``--redis-url``, the probe's ``TASKBENCH_LEDGER_URL``).
From there the case is a run's pipeline (:mod:`taskbench.harness.case.pipeline`, :class:`TargetCase` its
hooks): the drain waits for the accepted ids, the audit compares them with the ledger (lost, duplicated,
unexpected, failed), the fault's recovery figures and verdict read the same records, and the result is a
``run`` result that ``report`` and ``compare`` read.

Two things are new, because the service is not ours: before the load, the target must answer on its
port (else one line: is the service running?); and when no execution reaches the ledger within the
first ``first_execution`` seconds of load, the load stops and the run says the instrumentation is
missing, instead of counting every task lost at the end. Faults: :mod:`taskbench.harness.faults.on_target`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import shlex
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from taskbench import backends, brokers
from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness import HarnessError
from taskbench.harness.brokers.redis import check_reachable, describe
from taskbench.harness.case.audit import queue_summary
from taskbench.harness.case.pipeline import Loaded, Pipeline
from taskbench.harness.commands.run import stamp, write_result
from taskbench.harness.config import load_dict
from taskbench.harness.faults.context import Broker
from taskbench.harness.faults.injector import Injector
from taskbench.harness.faults.kinds import paced_for
from taskbench.harness.faults.on_target import TargetFault
from taskbench.harness.faults.recovery import broken_promises, promise_of, summarize, unkept_promises
from taskbench.harness.faults.stalls import redis_client
from taskbench.harness.load.files import check_open_files
from taskbench.harness.machine import result_header
from taskbench.harness.processes.envs import project_root
from taskbench.harness.processes.runs import registered
from taskbench.harness.processes.stack import Stack
from taskbench.ledger import Ledger, Outcomes
from taskbench.net import listening
from taskbench.redaction import redact, redact_text
from taskbench.results import Cleanup, Promise, QueueCase, Result

Say = Callable[[str], None]
#: the header the probe reads (``taskbench_probe.HEADER``), and what the driver fills in it
HEADER = "X-Taskbench-Task"
REFERENCE = "{task_id}@{enqueued_at}"
DEFAULT_LEDGER_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, kw_only=True)
class TargetConfig:
    """A ``--target`` run's parameters (validated on construction, one line each)."""

    url: str
    load: LoadSpec
    ledger_url: str = DEFAULT_LEDGER_URL
    #: the request body's template (``{task_id}`` -> the task reference), None: an empty JSON object
    payload: dict[str, Any] | None = None
    id_header: bool = True
    #: the queue library the service uses: its promise (as taskbench states it) judges a fault's figures
    library: str | None = None
    enqueue_mode: str = "awaited"
    worker_cmd: str | None = None
    worker_pid: int | None = None
    #: the API's command: taskbench starts it (and kill-api kills and restarts it); None: the user runs it
    api_cmd: str | None = None
    fault: TargetFault | None = None
    broker_url: str | None = None
    output: Path = Path("results")
    drain_timeout: float = 120.0
    drain_stall: float = 60.0
    first_execution: float = 10.0
    startup_timeout: float = 60.0
    stop_timeout: float = 10.0
    keep: bool = False
    #: the library settings that change its promise (the libraries' defaults)
    promise_settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"--target {self.shown!r}: give http://127.0.0.1:PORT/path (plain HTTP, a port)")
        RequestTemplate(host=parts.hostname, port=parts.port, path=parts.path or "/")  # loopback only
        if self.library is not None:
            backends.info(self.library)  # ValueError naming the known ones
        if self.enqueue_mode not in ("awaited", "after-response"):
            raise ValueError(f"--enqueue-mode must be awaited or after-response, got {self.enqueue_mode!r}")
        if self.worker_cmd is not None and self.worker_pid is not None:
            raise ValueError("give --worker-cmd or --worker-pid, not both")
        for name, cmd in (("--worker-cmd", self.worker_cmd), ("--api-cmd", self.api_cmd)):
            if cmd is not None and not shlex.split(cmd):
                raise ValueError(f"{name} is empty")
        if not self.id_header and "{task_id}" not in json.dumps(self.payload or {}):
            raise ValueError("the task id would reach your service neither in the X-Taskbench-Task header "
                             "(--no-id-header) nor in the payload (no \"{task_id}\" in --payload)")
        if not 0 < self.first_execution <= 600:
            raise ValueError("--first-execution must be in (0, 600] seconds")

    @property
    def shown(self) -> str:
        """The target as every line and file names it: its user's password and its query's keys masked."""
        return redact(self.url)

    @property
    def template(self) -> RequestTemplate:
        parts = urlsplit(self.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        assert parts.hostname is not None
        assert parts.port is not None
        return RequestTemplate(host=parts.hostname, port=parts.port, path=path, body=body_template(self.payload),
                               headers=((HEADER, REFERENCE),) if self.id_header else ())

    @property
    def library_broker(self) -> str:
        """The broker the service's library runs on: the one of its brokers whose URL ``--broker-url``
        is, else its default (its first), whose promise judges the run."""
        assert self.library is not None
        named = backends.info(self.library).brokers
        url = self.broker_url
        return next((b for b in named if url and brokers.check_scheme(b, url) is None), named[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.shown, "workload": f"target {self.shown}", "load": load_dict(self.load),
            "ledger_url": redact(self.ledger_url), "payload": self.payload, "id_header": self.id_header,
            "library": self.library, "enqueue_mode": self.enqueue_mode, "worker_cmd": self.worker_cmd,
            "worker_pid": self.worker_pid, "api_cmd": self.api_cmd,
            "fault": self.fault.describe() if self.fault else None,
            "broker_url": redact(self.broker_url) if self.broker_url else None, "output": str(self.output),
            "drain_timeout": self.drain_timeout, "drain_stall": self.drain_stall,
            "first_execution": self.first_execution, "backends": [self.library or "target"],
        }


def body_template(payload: dict[str, Any] | None) -> str:
    """The payload as the driver's :meth:`str.format` template: every brace doubled but ``{task_id}``'s,
    which becomes the task reference (``{task_id}@{enqueued_at}``: the probe takes the send time from it)."""
    text = json.dumps(payload or {}, separators=(",", ":"))
    return text.replace("{", "{{").replace("}", "}}").replace("{{task_id}}", REFERENCE)


class TargetRunner:
    """One case: the user's service under load, its ledger audited (see the module's docstring)."""

    def __init__(self, config: TargetConfig, say: Say = print, run_id: str | None = None) -> None:
        paced = paced_for(config.load, config.fault)  # as the reference stack's (Runner): past the fault
        self.pace_line = None if paced is None else paced[1]
        self.config = config if paced is None else dataclasses.replace(config, load=paced[0])
        self.say = say
        self.run_id = run_id or f"{stamp()}-{os.getpid()}"
        self.out_dir = config.output / self.run_id
        self.root = project_root()

    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    def run(self) -> Result:
        cfg = self.config
        check_reachable(cfg.ledger_url)  # one line naming the ledger's Redis when it does not answer
        check_open_files(cfg.load, self.say)  # the drivers' connections fit under ulimit -n
        if cfg.api_cmd is None:
            reachable(cfg.url)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        result = Result(kind="run", config=cfg.to_dict(), **result_header(self.run_id, self.root))
        if self.pace_line:
            self.say(self.pace_line)
        with registered(cfg.output, self.say):
            case = TargetCase(cfg, run_id=f"{self.run_id}-target", logs=self.out_dir / "logs" / "0-target",
                              say=self.say).run()
        result.cases.append(case)
        result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        write_result(self.result_path(), result)
        return result


class TargetCase(Pipeline):
    """The user's service as a case's pipeline: taskbench starts only what ``--worker-cmd`` and
    ``--api-cmd`` name, warms nothing up, and stops the load when nothing reaches the ledger."""

    ignore_prefix = None  # no warm-up: every id is the load's
    stops_executors = False

    def __init__(self, cfg: TargetConfig, *, run_id: str, logs: Path, say: Say) -> None:
        self.cfg, self.logs = cfg, logs
        durable = cfg.enqueue_mode == "awaited"
        has_worker = cfg.worker_cmd is not None or cfg.worker_pid is not None
        case = QueueCase(backend=cfg.library or "target", label=f"target {cfg.shown}", workload=f"target {cfg.shown}",
                         enqueue_mode=cfg.enqueue_mode, durable=durable, has_worker=has_worker,
                         durability="" if durable else "after-response enqueue: the 2xx comes before the broker "
                                                       "has the task", workers=1 if has_worker else 0,
                         run_id=run_id, logs=str(logs), promise_settings=cfg.promise_settings)
        self.promise: Promise | None = None
        if cfg.library is not None:
            self.promise = promise_of(cfg.library, cfg.library_broker, durable=durable, why=case.durability,
                                      settings=cfg.promise_settings)
            case.delivery = self.promise.text
        stack = Stack({**os.environ, "TASKBENCH_LEDGER_URL": cfg.ledger_url}, name=run_id,
                      stop_timeout=cfg.stop_timeout)
        super().__init__(case, label="target", client=redis_client(cfg.ledger_url),
                         ledger=Ledger(f"taskbench:{run_id}:"), say=say, stack=stack,
                         drain_timeout=cfg.drain_timeout, drain_stall=cfg.drain_stall)
        self.stack: Stack = stack

    def start(self) -> None:
        cfg, stack, logs = self.cfg, self.stack, self.logs
        if cfg.worker_cmd is not None:
            self.say(f"starting your worker: {redact_text(cfg.worker_cmd)} (its log: {logs / 'worker-0.log'})")
            stack.start("worker-0", ["/bin/sh", "-c", cfg.worker_cmd], logs / "worker-0.log", role="workers")
        if cfg.api_cmd is not None:
            self.say(f"starting your API: {redact_text(cfg.api_cmd)} (its log: {logs / 'api.log'})")
            stack.start("api", ["/bin/sh", "-c", cfg.api_cmd], logs / "api.log", role="api")
            port = cfg.template.port
            stack.wait_ready(lambda: listening(port), timeout=cfg.startup_timeout,
                             what=f"your API on 127.0.0.1:{port} (its log: {logs / 'api.log'})")

    def load(self) -> Loaded | None:
        cfg, case = self.cfg, self.case
        spec = dataclasses.replace(cfg.load, id_prefix=f"{case.run_id}.")
        injector = self.injector = self._injector() if cfg.fault is not None else None
        stop, missing, started = threading.Event(), threading.Event(), threading.Event()
        watcher = threading.Thread(target=self._watch_first, args=(started, stop, missing),
                                   name="taskbench-first-execution", daemon=True)
        watcher.start()

        def on_start() -> None:
            started.set()
            if injector is not None:
                injector.started()

        self.say(f"load: {cfg.shown}, {spec.model} model, {spec.users} users; the task reference in "
                 + ("the X-Taskbench-Task header" if cfg.id_header else "the payload"))
        load_start = time.time()
        if injector is not None:
            self.through_drain.enter_context(injector.armed(load_start))
        with self.step("load", total=spec.requests, duration=spec.duration, executed=self.executed):
            load = run_load(cfg.template, spec, started=on_start, stop=stop)
        load_end = time.time()
        stop.set()
        if injector is not None:
            injector.load_ended()
        case.load = load.to_model()
        if missing.is_set():  # the run's result says so too: no audit, one failure, status failed
            message = self._missing_message(load.ok, load.errors)
            self.say(message)
            case.failures = [message]
            case.summary = queue_summary(case.load, None, load_start=load_start, drained=False,
                                         fault=injector.record if injector is not None else None)
            case.status = "failed"
            return None
        return Loaded(load, load_start, load_end)

    def after_drain(self, loaded: Loaded) -> None:
        self.record_fault()

    def outcomes(self) -> Outcomes | None:
        return self.ledger.outcomes(self.client)

    def judge_drain(self) -> None:
        # a loss the service's promise allows (after-response, at-most-once) never comes: the drain that
        # waited for it in vain is that loss (audited), not a failure of its own; a backlog it ran out of
        # time on is no loss a promise allows
        drained, promise = self.drained, self.promise
        allowed = not self.case.durable or (promise is not None and not promise.keeps_accepted)
        self.drain_ok = drained.drained or (allowed and not drained.still_running)
        lines = drained.lines(None if self.report is None else self.report.lost)
        if self.drain_ok:
            for line in lines:
                self.say(line)
        else:
            self.failures += lines

    def figures(self, loaded: Loaded) -> None:
        if self.rows is not None and self.case.fault is not None:
            self.case.fault = summarize(self.case.fault, self.rows.times, self.case.load, self.promise)

    def stop(self) -> None:
        """Nothing before the clean-up: the stack stops what taskbench started as it closes."""

    def clean_up(self) -> None:
        self.case.cleanup = _clean_up(self.client, self.case.run_id, keep=self.cfg.keep)

    def stop_failures(self) -> list[str]:
        return []  # the user's processes: how they exit at a stop is theirs

    def verdict(self) -> list[str]:
        """What fails the case: a loss or duplicate the library's promise rules out (after a fault: also
        no recovery); without ``--backend``, a task that never ran."""
        report, fault = self.report, self.case.fault
        if report is None:
            return []
        if fault is not None and fault.injected:
            return broken_promises(fault, lost=report.lost, duplicated=report.duplicated)
        if self.promise is not None:
            return unkept_promises(self.promise, lost=report.lost, duplicated=report.duplicated)
        return [f"{report.lost} accepted task(s) never ran (--backend names your queue library: its promise "
                "then judges them)"] if report.lost else []

    def figures_of_loss(self) -> bool:
        return self.injected or not self.case.durable

    def _watch_first(self, started: threading.Event, stop: threading.Event, missing: threading.Event) -> None:
        """Stop the load when no execution reached the ledger within ``first_execution`` s of its start."""
        ledger, client = self.ledger, self.client
        if not started.wait(self.cfg.startup_timeout + 60) or stop.is_set():
            return
        deadline = time.monotonic() + self.cfg.first_execution
        while time.monotonic() < deadline and not stop.is_set():
            with contextlib.suppress(Exception):  # a Redis that stalls: the next look decides
                if ledger.executed_count(client):
                    return
            stop.wait(0.25)
        with contextlib.suppress(Exception):
            if stop.is_set() or ledger.executed_count(client):
                return
        missing.set()
        stop.set()

    def _missing_message(self, ok: int, errors: dict[str, int]) -> str:
        cfg = self.cfg
        within = f"within {cfg.first_execution:g} s of load"
        if not ok:
            return (f"the load stopped: {cfg.shown} answered none of its requests with a 2xx {within} "
                    f"(errors: {', '.join(f'{k} {v}' for k, v in sorted(errors.items())) or 'none'})")
        return (f"the load stopped: no execution reached the ledger ({describe(cfg.ledger_url)}) {within}, "
                f"though {ok} requests were answered 2xx: the instrumentation is missing. Wrap the task function "
                "in @taskbench_probe.recorded, hand it task_ref(request) (or the payload's field), and start the "
                f"workers with TASKBENCH_LEDGER_URL={redact(cfg.ledger_url)} (probe/README.md)")

    def _injector(self) -> Injector:
        cfg, stack = self.cfg, self.stack
        assert cfg.fault is not None
        broker = Broker("redis", cfg.broker_url) if cfg.broker_url else None

        def ready(proc: Any) -> bool:
            if proc.name == "api":
                return listening(cfg.template.port)
            return bool(proc.alive())  # a user's worker says nothing when it is ready: alive is all we know

        return Injector(cfg.fault, stack.procs, ready=ready, restarted=lambda proc: None,
                        ready_timeout=cfg.startup_timeout, broker=broker)


def _clean_up(client: Any, run_id: str, *, keep: bool) -> Cleanup:
    prefix = f"taskbench:{run_id}:"
    if keep:
        return Cleanup(kept=True, prefix=prefix)
    deleted = 0
    with contextlib.suppress(Exception):
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        deleted = int(client.unlink(*keys)) if keys else 0
    return Cleanup(kept=False, patterns=[f"{prefix}*"], deleted_keys=deleted)


def reachable(url: str, timeout: float = 3.0) -> None:
    """The target answers on its port; else one line saying so (is the service running?)."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            pass
    except OSError as exc:
        raise HarnessError(f"the target {redact(url)} is down: {parts.hostname}:{parts.port} "
                           f"{'refused the connection' if isinstance(exc, ConnectionRefusedError) else exc}; "
                           "start your service first (its API, its workers, its broker)") from None

