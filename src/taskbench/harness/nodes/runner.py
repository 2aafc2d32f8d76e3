"""``taskbench run --nodes N``: the pods of a cluster run, as processes in network namespaces on this machine.

One namespace per node, as a cluster would place them: Redis (the ledger's and the broker's servers), the
API, each worker, each of the N drivers. The commands are the pods' (``taskbench serve``, ``taskbench
worker``, ``taskbench drive --segment i/N``), started through one :class:`~taskbench.harness.processes.stack.Stack`
(own process groups, stopped by id); the harness itself takes the collector's part
(:func:`~taskbench.harness.commands.collect.collect_case`) from the root namespace, through the bridge.
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
from taskbench.harness.commands import own_task
from taskbench.harness.commands.collect import Collect, collect_case, distributed_result
from taskbench.harness.commands.phases import clean_up, stop_executors, stop_failures, warm_up
from taskbench.harness.commands.runner import describe_load, stamp, write_result
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
        api = net.nodes["api"]
        workers = cfg.workers if backend.has_worker else 0
        path = f"/api/v1/incr/{cfg.route_workload}/{name}"
        url = f"http://{api.ip}:{API_PORT}{path}"
        stack = Stack({**os.environ, **env_vars}, name=run_id, stop_timeout=cfg.stop_timeout)
        case = None
        try:
            with stack:
                for i in range(workers):
                    node = net.nodes[f"worker-{i}"]
                    stack.start(f"worker-{i}", node.exec([str(python), "-m", "taskbench", "worker"]),
                                logs / f"worker-{i}.log", role="workers")
                stack.start("api", api.exec([str(python), "-m", "taskbench", "serve", "--host", api.ip,
                                             "--port", str(API_PORT)]), logs / "api.log", role="api")
                self.say(f"[{name}] API on {api.ip}:{API_PORT} ({api.netns})"
                         + (f", {workers} worker(s) each in its namespace" if workers else ""))
                stack.wait_ready(lambda: _healthy(api.ip) and int(client.hlen(settings.ready_key)) >= workers,
                                 timeout=cfg.startup_timeout,
                                 what=f"the API and {workers} worker(s) to be ready (logs in {logs})")
                template = RequestTemplate(host=api.ip, port=API_PORT, path=path, body=own_task.request_body(cfg),
                                           remote=True)
                warmed = warm_up(template, cfg.load, cfg.warmup, procs=stack.procs, client=client,
                                 ledger=_ledger(settings), timeout=cfg.drain_timeout, logs=logs.parent, say=self.say)
                self.say(f"[{name}] load: {describe_load(cfg.load)}, split over {self.drivers} driver(s)")
                for i in range(self.drivers):
                    node = net.nodes[f"driver-{i}"]
                    stack.start(f"driver-{i}", node.exec([sys.executable, "-m", "taskbench", "drive",
                                                          "--segment", f"{i}/{self.drivers}", "--url", url,
                                                          "--allow-remote", "--node", node.name,
                                                          *load_options(cfg)]),
                                logs / f"driver-{i}.log", role="driver")
                spec = Collect(settings=settings, workload=cfg.workload, drivers=self.drivers, workers=workers,
                               durable=durability.durable, durability=durability.text,
                               segment_timeout=cfg.load.max_duration + cfg.load.timeout + 120,
                               drain_timeout=cfg.drain_timeout, drain_stall=cfg.drain_stall,
                               warm_accepted=warmed, logs=str(logs))
                procs_but_drivers = _without_finished_drivers(stack)
                case, segments = collect_case(client, spec, say=lambda t: self.say(f"[{name}] {t}"),
                                              procs=procs_but_drivers,
                                              stop_executors=lambda: stop_executors(stack.procs, backend.has_worker))
                stack.stop()
        finally:
            cleanup = clean_up(client, settings, backend, keep=cfg.keep, purge_on_broker=False, python=python,
                               env=env_vars, logs=logs, say=self.say, broker=broker_client)
            client.close()
            broker_client.close()
        case.cleanup = cleanup
        case.exit_codes = dict(stack.exit_codes)
        case.failures += stop_failures(stack.procs)
        if case.failures and case.status == "ok":
            case.status = "failed"
        config = {**cfg.to_dict(), "nodes": {n.name: {"netns": n.netns, "ip": n.ip} for n in net.nodes.values()},
                  "drivers": self.drivers, "node_delay_ms": self.delay_ms}
        return distributed_result(case, segments, header=header, config=config)


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


def _ledger(settings: Settings) -> Any:
    from taskbench.ledger import Ledger

    return Ledger(settings.prefix)


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
