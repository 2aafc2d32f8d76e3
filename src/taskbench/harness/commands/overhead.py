"""``taskbench overhead``: per backend, the ceiling, the library's floor and taskbench's API, loaded alike.

For every backend, in one run and with the same core placement, three servers are started in the
backend's environment and driven with the same load by the project's driver:

- ``ceiling``: a bare FastAPI endpoint doing one ``await redis.incr`` (``service/baseline.py``);
- ``floor``: a bare FastAPI endpoint handing the io/simple task to the library as its documentation
  shows (``floor.py`` of its backend package): no taskbench code, no metrics, no ledger;
- ``taskbench``: the reference API (``taskbench serve``) with its defaults.

No worker runs: the three measure the request path only (``background`` runs its task in the API
process, as its floor does).

``together`` (the default): in every round the three run side by side on the API's cores, each in
a session of its own (the scheduler shares the cores fairly between them), and one driver process
loads two of them at once until the first has had its requests: the floor and taskbench's API (the
ratio), then the ceiling and the floor (floor ÷ ceiling), the pairs' order alternating. The two
rates of a pair cover the same seconds, so when the machine slows down (a shared VM's core speed
moves by a factor of two from one second to the next) both slow down alike. The ratio is the median
of the rounds' ratios. Pairs, not all three at once: with three servers sharing a core, one whose
request waits on a round trip the other two do not make (the API's task-id claim beside
``background``'s floor, which awaits nothing) lost a further 8 % of its CPU share to them.
``sequential``: one server after another, the order rotating each round, each figure the median of
its rounds (solo latencies; the ratio only as steady as the machine is over minutes).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from taskbench import backends, brokers
from taskbench.driver import LoadSpec, RequestTemplate, run_load, run_load_together
from taskbench.harness import progress
from taskbench.harness.brokers import provide_broker
from taskbench.harness.brokers.redis import provide_redis
from taskbench.harness.case.start import prepare
from taskbench.harness.commands.run import stamp, write_result
from taskbench.harness.config import Placement
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.machine import result_header
from taskbench.harness.processes.envs import ensure_env, project_root, versions
from taskbench.harness.processes.pinning import pinned
from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port, healthy
from taskbench.procgroup import tree_cpu_seconds
from taskbench.results import OVERHEAD_SERVERS, Load, OverheadCase, OverheadRound, Result, Summary
from taskbench.results.cases import OverheadServer

Say = Callable[[str], None]
METHODS = ("together", "sequential")
#: the least server CPU a round must read to give a figure: the kernel counts it in clock ticks (10 ms)
CPU_RESOLUTION_S = 2 / os.sysconf("SC_CLK_TCK")
BODY = '{{"value":1,"task_id":"{task_id}","enqueued_at":{enqueued_at}}}'
_UVICORN = (
    "import uvicorn; uvicorn.run({app!r}, factory=True, host='127.0.0.1', port={port}, loop='uvloop', "
    "http='httptools', access_log=False, log_level='warning')"
)
#: ``--floor-gc-freeze``: the app built, then ``gc.freeze()`` (taskbench/heap.py), then served
_UVICORN_FROZEN = (
    "import gc, importlib, uvicorn; module, _, factory = {app!r}.partition(':'); "
    "app = getattr(importlib.import_module(module), factory)(); gc.collect(); gc.freeze(); "
    "uvicorn.run(app, host='127.0.0.1', port={port}, loop='uvloop', http='httptools', access_log=False, "
    "log_level='warning')"
)


@dataclass(frozen=True, kw_only=True)
class OverheadConfig:
    backends: list[str]
    load: LoadSpec
    rounds: int = 3
    warmup: int = 500
    placement: Placement = field(default_factory=lambda: Placement.parse("auto"))
    redis_url: str | None = None
    output: Path = Path("results")
    startup_timeout: float = 60.0
    stop_timeout: float = 10.0
    #: extra TASKBENCH_* settings for the reference API (defaults when empty)
    api_env: dict[str, str] = field(default_factory=dict)
    #: the ceiling and the floor gc.freeze() once built, as the reference API does by default
    floor_gc_freeze: bool = False
    #: ``together``: a round's servers loaded two at a time (see :func:`pairs`); ``sequential``: one after another
    method: str = "together"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"--method must be one of {', '.join(METHODS)}, not {self.method!r}")
        if not self.backends:
            raise ValueError("name at least one backend")
        bare = [name for name in self.backends if backends.info(name).floor is None]
        if bare:
            raise ValueError(f"{', '.join(bare)}: no floor (its package has no floor.py): nothing to compare")
        if not 1 <= self.rounds <= 20:
            raise ValueError(f"rounds must be between 1 and 20, got {self.rounds}")
        if not 0 <= self.warmup <= 100_000:
            raise ValueError(f"warmup must be between 0 and 100000, got {self.warmup}")

    def to_dict(self) -> dict[str, object]:
        load = {k: v for k, v in vars(self.load).items() if v is not None}
        return {"backends": self.backends, "load": load, "rounds": self.rounds, "warmup": self.warmup,
                "placement": self.placement.to_dict(), "api_env": self.api_env,
                "floor_gc_freeze": self.floor_gc_freeze, "method": self.method}


def server_argv(server: str, backend: str, python: Path, port: int, *, frozen: bool = False) -> list[str]:
    """How each of the three servers is started, in the backend's environment (``frozen``: the ceiling
    and the floor ``gc.freeze()`` once their app is built)."""
    if server == "taskbench":
        return [str(python), "-m", "taskbench", "serve", "--host", "127.0.0.1", "--port", str(port)]
    floor = f"{backends.info(backend).floor}:create_app"
    app = "taskbench.service.baseline:create_app" if server == "ceiling" else floor
    return [str(python), "-c", (_UVICORN_FROZEN if frozen else _UVICORN).format(app=app, port=port)]


def order(round_: int) -> list[OverheadServer]:
    """The servers' order in a round: rotated by one each round."""
    shift = round_ % len(OVERHEAD_SERVERS)
    return [*OVERHEAD_SERVERS[shift:], *OVERHEAD_SERVERS[:shift]]


#: ``together``: the pairs loaded at once in a round; the first gives the ratio, the second floor ÷ ceiling
PAIRS: tuple[tuple[OverheadServer, OverheadServer], ...] = (("floor", "taskbench"), ("ceiling", "floor"))


def pairs(round_: int) -> list[tuple[OverheadServer, OverheadServer]]:
    """A round's pairs: which pair goes first, and which server of a pair connects first, alternate."""
    ordered = list(PAIRS) if round_ % 2 == 0 else list(reversed(PAIRS))
    return [pair if (round_ // 2) % 2 == 0 else (pair[1], pair[0]) for pair in ordered]


def run_overhead(config: OverheadConfig, say: Say = print) -> tuple[Result, Path]:
    run_id = f"overhead-{stamp()}-{os.getpid()}"
    out = config.output / run_id
    out.mkdir(parents=True, exist_ok=True)
    path = out / "result.json"
    result = Result(kind="overhead", config=config.to_dict(), **result_header(run_id, project_root()))
    pythons = {name: ensure_env(backends.info(name).extra) for name in config.backends}
    result.environments = {n: versions(str(p)) for n, p in pythons.items()}
    # one server is broker and ledger for all three APIs alike (no second, persistent broker Redis)
    with provide_redis(config.redis_url, out, cpus=config.placement.redis, redis_broker=False,
                       say=say) as servers:
        url = servers.url
        result.redis = servers.info
        for index, name in enumerate(config.backends):
            case = OverheadCase(backend=name, placement=config.placement.to_dict(), logs=str(out / name),
                                method="together" if config.method == "together" else "sequential")
            try:
                with _broker_of(name, out / name, config.placement, say) as broker_env:
                    for round_ in range(config.rounds):
                        trio = order(round_)
                        run_ids = {s: f"{run_id}-{index}-{s}-{round_}" for s in trio}
                        label = f"[{name}] round {round_ + 1}/{config.rounds}"
                        if config.method == "together":
                            with progress.phase(f"{label}: {' and '.join('+'.join(p) for p in pairs(round_))}"):
                                measured = _together(config, name, pairs(round_), pythons[name], url, run_ids,
                                                     out / name, broker_env)
                        else:
                            measured = []
                            for server in trio:
                                with progress.phase(f"{label}: {server}"):
                                    load, argv, cpu = _one(config, name, server, pythons[name], url, run_ids[server],
                                                           out / name, broker_env)
                                measured.append((server, None, load, argv, cpu))
                        for server, beside, load, argv, cpu in measured:
                            # CPU time is counted in clock ticks: a round shorter than a few is not measured
                            per_request = (1e6 * cpu / load.completed if load.completed and cpu >= CPU_RESOLUTION_S
                                           else None)
                            said = f" (beside {beside})" if beside else ""
                            shown = (f"{per_request:.0f} µs a request" if per_request is not None
                                     else f"not measured ({cpu * 1000:.0f} ms, under {CPU_RESOLUTION_S * 1000:.0f} ms)")
                            say(f"{label}: {server}{said} {load.rps:.0f} req/s, server CPU {shown}, "
                                f"errors {sum(load.errors.values())}")
                            case.rounds.append(OverheadRound(
                                server=server, round=round_, beside=beside, argv=argv, load=load, server_cpu_s=cpu,
                                cpu_us_per_request=per_request))
            except Exception as exc:  # one backend that cannot start costs its row, not the run
                case.failures.append(f"{type(exc).__name__}: {exc}")
            summarize(case)
            result.cases.append(case)
            write_result(path, result)
    result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    write_result(path, result)
    return result, path


def summarize(case: OverheadCase) -> None:
    """Medians per server, the ratios, the row's figures and its status."""
    by_server = {s: rs for s in OVERHEAD_SERVERS if (rs := case.figures(s))}
    case.rps = {s: statistics.median(r.load.rps for r in rs) for s, rs in by_server.items()}
    case.cpu_us_per_request = {s: statistics.median(r.cpu_us_per_request for r in rs if r.cpu_us_per_request)
                               for s, rs in by_server.items() if any(r.cpu_us_per_request for r in rs)}
    if case.method == "together":
        # a pair's two servers ran over the same seconds: compare within a pair, then take the median
        pair: dict[tuple[int, str, str], OverheadRound] = {(r.round, r.server, r.beside or ""): r for r in case.rounds}
        rounds_ = sorted({r.round for r in case.rounds})
        ab = [(pair[n, "floor", "taskbench"], pair[n, "taskbench", "floor"]) for n in rounds_
              if (n, "floor", "taskbench") in pair and (n, "taskbench", "floor") in pair]
        case.ratio_rounds = [t.load.rps / f.load.rps for f, t in ab if f.load.rps]
        case.cpu_ratio_rounds = [f.cpu_us_per_request / t.cpu_us_per_request for f, t in ab
                                 if f.cpu_us_per_request and t.cpu_us_per_request]
        case.ratio = statistics.median(case.ratio_rounds) if case.ratio_rounds else None
        case.cpu_ratio = statistics.median(case.cpu_ratio_rounds) if case.cpu_ratio_rounds else None
        vs_ceiling = [pair[n, "floor", "ceiling"].load.rps / pair[n, "ceiling", "floor"].load.rps for n in rounds_
                      if (n, "floor", "ceiling") in pair and (n, "ceiling", "floor") in pair
                      and pair[n, "ceiling", "floor"].load.rps]
        case.floor_vs_ceiling = statistics.median(vs_ceiling) if vs_ceiling else None
    else:
        floor, ours, ceiling = (case.rps.get(s) for s in ("floor", "taskbench", "ceiling"))
        floor_cpu, ours_cpu = case.cpu_us_per_request.get("floor"), case.cpu_us_per_request.get("taskbench")
        case.cpu_ratio = floor_cpu / ours_cpu if floor_cpu and ours_cpu else None
        case.ratio = ours / floor if floor and ours is not None else None
        case.floor_vs_ceiling = floor / ceiling if ceiling and floor is not None else None
    errors = sum(sum(r.load.errors.values()) for r in case.rounds)
    mine = by_server.get("taskbench", [])
    if mine:
        median = sorted(mine, key=lambda r: r.load.rps)[len(mine) // 2].load
        lat = median.latency_ms
        case.summary = Summary(requests=median.requests, rps=median.rps, p50_ms=lat.p50, p95_ms=lat.p95,
                               p99_ms=lat.p99, driver_cpu_pct=100 * median.max_utilization,
                               driver_saturated=any(r.load.saturated for r in case.rounds))
    if errors:
        case.failures.append(f"{errors} requests failed (non-2xx, timeout or connection error)")
    missing = [s for s in OVERHEAD_SERVERS if s not in case.rps]
    if missing:  # a failed status names its reason
        case.failures.append(f"no figure for {', '.join(missing)}")
    case.status = "failed" if case.failures else "ok"


def _progress(backend: str) -> Say:
    """Progress of a backend's servers, on stderr (stdout is the table or, with --format json, the JSON)."""
    return lambda text: print(f"[{backend}] {text}", file=sys.stderr, flush=True)


def _one(config: OverheadConfig, backend: str, server: str, python: Path, redis_url: str, run_id: str,
         logs: Path, broker_env: dict[str, str]) -> tuple[Load, list[str], float]:
    port = free_port()
    argv = server_argv(server, backend, python, port, frozen=config.floor_gc_freeze)
    env = {**os.environ, "TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_METRICS_DIR": str(logs / "metrics" / run_id),
           "PYTHONUNBUFFERED": "1", **broker_env}
    if broker_env and server != "ceiling":
        prepare(python, env, logs / "prepare" / run_id, say=_progress(backend))
    if server == "taskbench":
        env.update(config.api_env)
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{run_id}.log"
    try:
        with Stack(env, name=run_id, stop_timeout=config.stop_timeout) as stack:
            proc = stack.start(server, argv, log, role="api", cpus=config.placement.api)
            stack.wait_ready(lambda: healthy(port), timeout=config.startup_timeout,
                             what=f"the {server} server of {backend} to answer /health (log: {log})")
            template = RequestTemplate(host="127.0.0.1", port=port, path=f"/api/v1/incr/io/simple/{backend}",
                                       body=BODY)
            with pinned(config.placement.driver):
                if config.warmup:
                    run_load(template, LoadSpec(users=min(10, config.load.users), requests=config.warmup,
                                                id_prefix="w"))
                cpu_before = tree_cpu_seconds(proc.pid)
                load = run_load(template, config.load).to_model()
                cpu = tree_cpu_seconds(proc.pid) - cpu_before
    finally:
        _clean(redis_url, run_id, backend)
    return load, argv, cpu


def _together(config: OverheadConfig, backend: str, pairs_: list[tuple[OverheadServer, OverheadServer]],
              python: Path, redis_url: str, run_ids: dict[OverheadServer, str], logs: Path,
              broker_env: dict[str, str]) -> list[tuple[OverheadServer, OverheadServer | None, Load, list[str], float]]:
    """One round of ``together``: the three servers started side by side and warmed up one by one, then
    each pair loaded at once (the third server idle meanwhile)."""
    logs.mkdir(parents=True, exist_ok=True)
    servers = list(OVERHEAD_SERVERS)
    base = {**os.environ, "TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1",
            **broker_env}
    for server in servers:  # a PostgreSQL queue's schema, for the floor's run and the API's
        if broker_env and server != "ceiling":
            prepare(python, {**base, "TASKBENCH_RUN_ID": run_ids[server]}, logs / "prepare" / run_ids[server],
                    say=_progress(backend))
    ports = {server: free_port() for server in servers}
    argvs = {server: server_argv(server, backend, python, ports[server], frozen=config.floor_gc_freeze)
             for server in servers}
    measured: list[tuple[OverheadServer, OverheadServer | None, Load, list[str], float]] = []
    try:
        with Stack(base, name=run_ids["taskbench"], stop_timeout=config.stop_timeout) as stack:
            procs = {}
            for server in servers:
                env = {"TASKBENCH_RUN_ID": run_ids[server],
                       "TASKBENCH_METRICS_DIR": str(logs / "metrics" / run_ids[server]),
                       **(config.api_env if server == "taskbench" else {})}
                procs[server] = stack.start(server, argvs[server], logs / f"{run_ids[server]}.log", role="api",
                                            cpus=config.placement.api, env=env)
            for server in servers:
                stack.wait_ready(partial(healthy, ports[server]), timeout=config.startup_timeout,
                                 what=f"the {server} server of {backend} to answer /health "
                                      f"(log: {logs / f'{run_ids[server]}.log'})")
            templates = {s: RequestTemplate(host="127.0.0.1", port=ports[s], path=f"/api/v1/incr/io/simple/{backend}",
                                            body=BODY) for s in servers}
            with pinned(config.placement.driver):
                if config.warmup:
                    for server in servers:
                        run_load(templates[server], LoadSpec(users=min(10, config.load.users),
                                                             requests=config.warmup, id_prefix="w"))
                for pair in pairs_:
                    before = {s: tree_cpu_seconds(procs[s].pid) for s in pair}
                    loads = run_load_together([templates[s] for s in pair], config.load)
                    cpu = {s: tree_cpu_seconds(procs[s].pid) - before[s] for s in pair}
                    for server, other, load in zip(pair, reversed(pair), loads, strict=True):
                        measured.append((server, other, load.to_model(), argvs[server], cpu[server]))
    finally:
        for server in servers:
            _clean(redis_url, run_ids[server], backend)
    return measured


@contextlib.contextmanager
def _broker_of(name: str, folder: Path, placement: Placement, say: Say) -> Iterator[dict[str, str]]:
    """The TASKBENCH_* variables of a backend whose default broker is not Redis: a private PostgreSQL for
    its rounds (the ceiling still INCRs the run's Redis); ``{}`` for a Redis backend."""
    broker = backends.info(name).brokers[0]
    if brokers.info(broker).can_be_ledger:  # the run's embedded broker Redis
        yield {}
        return
    with provide_broker(broker, folder / "broker", cpus=placement.redis,
                        say=lambda text: say(f"[{name}] {text}")) as server:
        yield {"TASKBENCH_BROKER": broker, "TASKBENCH_BROKER_URL": server.url}


def _clean(url: str, run_id: str, backend: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        delete_run_keys(client, run_id, backends.info(backend))
    finally:
        client.close()
