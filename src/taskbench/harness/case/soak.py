"""What a queue case adds for a soak (``taskbench run --soak``): the sampler over the load and the drain,
then the end-to-end latency over time, every series' growth and the drift verdict
(:mod:`taskbench.harness.soak`), as the case's :class:`~taskbench.results.soak.SoakRecord`.

A drift is one of the case's failures (the run exits 1): a soak is asked whether the backend stays
healthy at a rate it sustains, and a leak or a latency that keeps growing is the answer "no".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskbench import brokers
from taskbench.harness.config import RunConfig
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.soak.fit import fit_all
from taskbench.harness.soak.latency import e2e_over_time
from taskbench.harness.soak.sampler import PostgresBroker, Probe, SoakSampler, backlog, redis_broker, unit_of
from taskbench.ledger import Ledger
from taskbench.results import RssRecord
from taskbench.results.soak import SoakRecord


class SoakRun:
    """One case's soak: started with the load, finished once the ledger has been read."""

    def __init__(self, cfg: RunConfig, sampler: SoakSampler, broker_source: str) -> None:
        assert cfg.soak is not None
        self.spec = cfg.soak
        self.rate = cfg.load.rate or 0.0
        self.sampler = sampler
        self.broker_source = broker_source

    def stop(self) -> None:
        self.sampler.stop()

    def finish(self, times: Mapping[str, tuple[float, float, float]], *, load_end: float,
               skip_prefix: str) -> tuple[SoakRecord, RssRecord | None]:
        """The record (series, growth, drift lines) and the task processes' memory as an ``RssRecord``."""
        self.stop()
        t_s, series = self.sampler.points()
        series.update(e2e_over_time(t_s, times, t0=self.sampler.t0, skip_prefix=skip_prefix))
        units = {name: unit_of(name) for name in series}
        load_s = max(0.0, load_end - self.sampler.t0)
        growth, drift = fit_all(self.spec, t_s, series, units, load_s=load_s, rate=self.rate)
        record = SoakRecord(
            duration_s=self.spec.duration_s, rate=self.rate, rate_source=self.spec.rate_source,
            interval_s=self.sampler.series.resolution, max_points=self.spec.max_points,
            t_s=[round(t, 1) for t in t_s],
            series={name: [None if v is None else round(v, 3) for v in values] for name, values in series.items()},
            units=units, processes=list(self.sampler.names), broker_source=self.broker_source,
            load_s=round(load_s, 1), growth=growth, drift=drift)
        memory = [v for v in series.get("tasks_mb", []) if v is not None]
        rss = None if not memory else RssRecord(
            interval_s=record.interval_s, samples_mb=[round(v, 2) for v in memory], start_mb=round(memory[0], 2),
            peak_mb=round(max(memory), 2), end_mb=round(memory[-1], 2), processes=list(self.sampler.names))
        return record, rss


def start(cfg: RunConfig, procs: ProcessSet, has_worker: bool, *, t0: float, client: Any, ledger: Ledger,
          api_port: int, broker: str, broker_client: Any | None, broker_url: str, run_id: str) -> SoakRun | None:
    """The soak of the case, sampling from now (None unless ``--soak``).

    ``client`` is the ledger's Redis (the backlog's two hashes); ``broker_client`` the broker's Redis when
    it is a server of its own (None: shared with the ledger, or not Redis).
    """
    if cfg.soak is None:
        return None

    def pids() -> dict[str, int]:
        return {p.name: p.pid for p in procs.procs
                if (p.name.startswith("worker") if has_worker else p.name == "api") and p.popen is not None}

    probes: list[Probe] = [backlog(f"http://127.0.0.1:{api_port}/metrics", client, ledger.count_key)]
    facts = brokers.info(broker)
    if facts.can_be_ledger:  # a Redis client reaches it: INFO and DBSIZE
        probes.append(redis_broker(broker_client or client))
        source = ("Redis INFO used_memory and DBSIZE of the broker's own server" if broker_client is not None
                  else "Redis INFO used_memory and DBSIZE of the server shared with the ledger (which grows "
                       "with every task)")
    elif facts.sized_by_schema:
        from taskbench.backends import _postgres
        from taskbench.settings import Settings

        schema = _postgres.schema(Settings(run_id=run_id))
        probes.append(PostgresBroker(broker_url, schema))
        source = f"PostgreSQL: the size and live rows of the run's schema {schema}"
    else:
        source = f"none: {broker} has no cheap reading of its memory here"
    sampler = SoakSampler(pids, probes, t0=t0, interval=cfg.soak.interval_s, max_points=cfg.soak.max_points)
    return SoakRun(cfg, sampler.start(), source)
