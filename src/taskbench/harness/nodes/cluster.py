"""``taskbench run --nodes N``: the pods of a cluster run, as processes in network namespaces on this machine.

One namespace per node, as a cluster would place them: Redis (the ledger's and the broker's servers), the
API, each worker, each of the N drivers. The commands are the pods' (``taskbench serve``, ``taskbench
worker``, ``taskbench drive --segment i/N``), started through one :class:`~taskbench.harness.processes.stack.Stack`
(own process groups, stopped by id); the harness itself takes the collector's part
(:class:`~taskbench.harness.commands.collect.CollectCase`, whose pipeline :class:`NodesCase` extends with
the pods' start) from the root namespace, through the bridge.
Nothing listens on an address outside the namespaces' private subnet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskbench import backends, brokers
from taskbench.driver import RequestTemplate
from taskbench.harness import HarnessError
from taskbench.harness.brokers import case_durability
from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.harness.case import own_task
from taskbench.harness.case.pipeline import Loaded, describe_load
from taskbench.harness.case.stop import clean_up, stop_executors
from taskbench.harness.case.warm_up import warm_up
from taskbench.harness.commands.collect import Collect, CollectCase, distributed_result
from taskbench.harness.commands.run import stamp, write_result
from taskbench.harness.config import RunConfig
from taskbench.harness.faults.stalls import redis_client
from taskbench.harness.machine import result_header
from taskbench.harness.nodes.netns import Network, Node, unavailable
from taskbench.harness.processes.envs import ensure_env, project_root, versions
from taskbench.harness.processes.runs import registered
from taskbench.harness.processes.stack import Stack
from taskbench.params import settings_env
from taskbench.results import Result
from taskbench.settings import Settings

Say = Callable[[str], None]

#: the API's port inside its namespace (the namespace is its own: nothing else listens there)
API_PORT = 8000


class NodeRedis(EmbeddedRedis):
    """An embedded redis-server inside a node: bound to the node's address only, password in its 0600
    config file as every embedded server's."""

    def __init__(self, node: Node, log_path: Path, *, name: str, fsync: str | None = None) -> None:
        self.node = node  # before the base class writes the config and builds the argv
        super().__init__(log_path, None, name=name, fsync=fsync)

    @property
    def url(self) -> str:
        return f"redis://:{self.secret}@{self.node.ip}:{self.port}/0"

    @property
    def address(self) -> str:
        return f"{self.node.ip}:{self.port}"

    def configure(self) -> None:
        super().configure()
        text = self.config_path.read_text().replace("bind 127.0.0.1", f"bind {self.node.ip}")
        self.config_path.write_text(text)

    def argv(self) -> list[str]:
        return self.node.exec(super().argv())


class NodesRunner:
    """One backend's queue case with its components on separate (namespace) nodes and ``drivers`` drivers."""

    def __init__(self, config: RunConfig, drivers: int, *, delay_ms: float = 0.0, say: Say = print,
                 run_id: str | None = None) -> None:
        if len(config.backends) != 1:
            raise HarnessError("--nodes runs one backend: give --backends NAME")
        problem = unavailable()
        if problem:
            raise HarnessError(f"--nodes: {problem}")
        self.config, self.drivers, self.delay_ms, self.say = config, drivers, delay_ms, say
        self.run_id = run_id or f"{stamp()}-{os.getpid()}"
        self.out_dir = config.output / self.run_id

    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    def run(self) -> Result:
        cfg = self.config
        name = cfg.backends[0]
        backend = backends.info(name)
        asked = [cfg.broker] if cfg.broker else list(backend.brokers)  # no --broker: any the backend takes
        if not any(b in backend.brokers and brokers.info(b).can_be_ledger for b in asked):  # the nodes run Redis
            raise HarnessError(f"--nodes runs on a Redis broker; {name} on {cfg.broker} is not supported yet")
        if cfg.fault is not None or cfg.broker_delay is not None:
            raise HarnessError("--nodes takes no --fault or --broker-delay (use --node-delay for the network)")
        python = ensure_env(backend.extra)
        with registered(cfg.output, self.say):  # what the check's import left outside its group is swept
            own_task.prepare(cfg, {name: python}, self.say)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        logs = self.out_dir / "logs" / f"0-{name}"
        logs.mkdir(parents=True, exist_ok=True)
        workers = cfg.workers if backend.has_worker else 0
        names = ["redis", "api", *(f"worker-{i}" for i in range(workers)),
                 *(f"driver-{i}" for i in range(self.drivers))]
        header = result_header(self.run_id, project_root())
        with registered(cfg.output, self.say), Network(names, delay_ms=self.delay_ms, say=self.say) as net:
            ledger = NodeRedis(net.nodes["redis"], logs / "redis-ledger.log", name="redis-ledger")
            broker = NodeRedis(net.nodes["redis"], logs / "redis-broker.log", name="redis-broker",
                               fsync=cfg.redis_fsync)
            try:
                ledger.start(dict(os.environ))
                broker.start(dict(os.environ))
                result = self._case(name, python, net, ledger, broker, logs, header)
            finally:
                broker.stop()
                ledger.stop()
            result.environments = {name: versions(str(python))}
            result.redis = {"mode": "embedded", "ledger": ledger.address, "broker": broker.address,
                            "broker_fsync": broker.fsync or "none", "node": "redis"}
        write_result(self.result_path(), result)
        return result

    def _case(self, name: str, python: Path, net: Network, ledger: NodeRedis, broker: NodeRedis, logs: Path,
              header: dict[str, Any]) -> Result:
        cfg = self.config
        backend = backends.info(name)
        run_id = f"{self.run_id}-0-{name}"
        env_vars = settings_env(cfg, backend=name, run_id=run_id, redis_url=ledger.url, broker_url=broker.url,
                                broker=EmbeddedRedis.kind)
        settings = Settings(backend=name, redis_url=ledger.url, broker_url=broker.url, run_id=run_id,
                            enqueue_mode=cfg.enqueue_mode, concurrency=cfg.concurrency)
        client, broker_client = redis_client(ledger.url), redis_client(broker.url)
        durability = case_durability(backend, cfg.enqueue_mode, EmbeddedRedis.kind, broker_client)
        workers = cfg.workers if backend.has_worker else 0
        spec = Collect(settings=settings, workload=cfg.workload, drivers=self.drivers, workers=workers,
                       durable=durability.durable, durability=durability.text,
                       segment_timeout=cfg.load.max_duration + cfg.load.timeout + 120,
                       drain_timeout=cfg.drain_timeout, drain_stall=cfg.drain_stall, logs=str(logs))
        stack = Stack({**os.environ, **env_vars}, name=run_id, stop_timeout=cfg.stop_timeout)
        pipeline = NodesCase(cfg, client, spec, stack=stack, net=net, python=python, logs=logs, env_vars=env_vars,
                             broker_client=broker_client, say=lambda t: self.say(f"[{name}] {t}"))
        case = pipeline.run()
        config = {**cfg.to_dict(), "nodes": {n.name: {"netns": n.netns, "ip": n.ip} for n in net.nodes.values()},
                  "drivers": self.drivers, "node_delay_ms": self.delay_ms}
        return distributed_result(case, pipeline.segments, header=header, config=config)


class NodesCase(CollectCase):
    """The collector's pipeline with the pods' processes started in their namespaces: the workers and the
    API (start), a warm-up, the drivers (load), and the workers stopped before the audit of a drain that
    did not end, as a run does."""

    stops_executors = True

    def __init__(self, cfg: RunConfig, client: Any, spec: Collect, *, stack: Stack, net: Network, python: Path,
                 logs: Path, env_vars: dict[str, str], broker_client: Any, say: Say) -> None:
        super().__init__(client, spec, say=say, stack=stack)
        self.stack: Stack = stack
        self.cfg, self.net, self.python, self.logs, self.env_vars = cfg, net, python, logs, env_vars
        self.broker_client = broker_client
        self.api = net.nodes["api"]
        path = f"/api/v1/incr/{cfg.route_workload}/{spec.settings.backend}"
        self.template = RequestTemplate(host=self.api.ip, port=API_PORT, path=path,
                                        body=own_task.request_body(cfg), remote=True)

    @property
    def procs(self) -> Any:
        return _without_finished_drivers(self.stack)

    def start(self) -> None:
        stack, api, logs, python, workers = self.stack, self.api, self.logs, self.python, self.spec.workers
        for i in range(workers):
            node = self.net.nodes[f"worker-{i}"]
            stack.start(f"worker-{i}", node.exec([str(python), "-m", "taskbench", "worker"]),
                        logs / f"worker-{i}.log", role="workers")
        stack.start("api", api.exec([str(python), "-m", "taskbench", "serve", "--host", api.ip,
                                     "--port", str(API_PORT)]), logs / "api.log", role="api")
        self.say(f"API on {api.ip}:{API_PORT} ({api.netns})"
                 + (f", {workers} worker(s) each in its namespace" if workers else ""))
        ready_key = self.spec.settings.ready_key
        stack.wait_ready(lambda: _healthy(api.ip) and int(self.client.hlen(ready_key)) >= workers,
                         timeout=self.cfg.startup_timeout,
                         what=f"the API and {workers} worker(s) to be ready (logs in {logs})")

    def warm_up(self) -> int:
        cfg = self.cfg
        return warm_up(self.template, cfg.load, cfg.warmup, procs=self.stack.procs, client=self.client,
                       ledger=self.ledger, timeout=cfg.drain_timeout, logs=self.logs.parent, say=self.say)

    def load(self) -> Loaded:
        cfg, drivers = self.cfg, self.spec.drivers
        self.say(f"load: {describe_load(cfg.load)}, split over {drivers} driver(s)")
        url = f"http://{self.api.ip}:{API_PORT}{self.template.path}"
        for i in range(drivers):
            node = self.net.nodes[f"driver-{i}"]
            self.stack.start(f"driver-{i}", node.exec([sys.executable, "-m", "taskbench", "drive", "--segment",
                                                       f"{i}/{drivers}", "--url", url, "--allow-remote",
                                                       "--node", node.name, *load_options(cfg)]),
                             self.logs / f"driver-{i}.log", role="driver")
        return super().load()

    def stop_executors(self) -> list[str]:
        return stop_executors(self.stack.procs, self.case.has_worker)

    def finish(self) -> None:
        if self.stack is not None:
            self.case.exit_codes = dict(self.stack.exit_codes)
        try:
            self.case.cleanup = clean_up(self.client, self.spec.settings, backends.info(self.case.backend),
                                         keep=self.cfg.keep, purge_on_broker=False, python=self.python,
                                         env=self.env_vars, logs=self.logs, say=self.say, broker=self.broker_client)
        finally:
            self.client.close()
            self.broker_client.close()


def load_options(cfg: RunConfig) -> list[str]:
    """The load's options as ``taskbench drive`` takes them (the whole load: each driver takes its share)."""
    spec = cfg.load
    out = ["--model", spec.model, "--users", str(spec.users), "--ramp", f"{spec.ramp_per_s:g}",
           "--driver-processes", str(spec.processes), "--timeout", f"{spec.timeout:g}"]
    if spec.rate is not None:
        out += ["--rate", f"{spec.rate:g}"]
    if spec.requests is not None:
        out += ["--requests", str(spec.requests)]
    if spec.duration is not None:
        out += ["--duration", f"{spec.duration:g}"]
    return out


def _healthy(host: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{API_PORT}/health", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _without_finished_drivers(stack: Stack) -> Any:
    """The stack's processes as the collector's waits see them: a driver that exited 0 is done, not dead."""
    procs = stack.procs

    class View:
        def dead(self) -> list[Any]:
            return [p for p in procs.dead() if not (p.name.startswith("driver-") and p.exit_code() == 0)]

        @property
        def procs(self) -> list[Any]:
            return [p for p in procs.procs if not p.name.startswith("driver-")]

    return View()
