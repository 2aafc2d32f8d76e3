"""Seed 000's FastStream wiring (Redis pub/sub), kept as the unsafe ``faststream-pubsub`` backend: a real
run with several workers, where the ledger counts every execution and the duplication is measured."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from taskbench import backends
from taskbench.cli._common import backend_names
from taskbench.driver import LoadSpec
from taskbench.harness.case.warm_up import WARMUP_PREFIX
from taskbench.harness.commands.run import Runner
from taskbench.harness.config import Placement, RunConfig
from taskbench.ledger import Ledger
from taskbench.results import QueueCase
from taskbench.settings import Settings

NAME = "faststream-pubsub"


def test_the_seed_wiring_is_flagged_and_never_a_default() -> None:
    meta = backends.info(NAME)
    assert meta.unsafe and "pub/sub" in meta.unsafe
    assert meta.fans_out and not meta.durable
    assert meta.extra == "faststream" and meta.module == "taskbench.backends.faststream.backend_pubsub"
    assert NAME not in backends.available()
    assert NAME not in backend_names("all")
    assert NAME in backends.available(unsafe=True)
    assert not any(backends.info(n).unsafe for n in backends.available())


def test_an_unsafe_case_reports_its_duplicates_without_failing() -> None:
    flagged = QueueCase(backend=NAME, unsafe=backends.info(NAME).unsafe, status="errors")
    plain = QueueCase(backend="faststream", status="errors")
    assert flagged.errors_expected and not plain.errors_expected
    assert flagged.name.endswith("[UNSAFE]")
    assert QueueCase(backend=NAME, unsafe="x", status="failed").errors_expected  # failed still fails:
    from taskbench.results.cases import passed

    assert not passed(QueueCase(backend=NAME, unsafe="x", status="failed"))
    assert passed(flagged) and not passed(plain)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 3])
def test_every_worker_runs_every_task_and_the_ledger_counts_it(redis_url: str, out_dir: Path,
                                                                workers: int) -> None:
    requests = 150
    config = RunConfig(backends=(NAME,), load=LoadSpec(users=10, requests=requests), workers=workers,
                       concurrency=1, redis_url=redis_url, output=out_dir, warmup=10, drain_timeout=60,
                       placement=Placement.parse("auto"), keep=True)
    result = Runner(config, say=lambda _: None).run()
    case = result.cases[0]
    assert isinstance(case, QueueCase)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    ledger = Ledger(Settings(run_id=case.run_id).prefix)
    try:
        counts = {t: int(n) for t, n in client.hgetall(ledger.count_key).items()
                  if not t.startswith(WARMUP_PREFIX)}
    finally:
        for key in client.scan_iter(match=f"taskbench:{case.run_id}:*"):
            client.delete(key)
        client.close()
    s = case.summary
    assert case.unsafe and case.durable is False and "unsafe wiring" in case.durability
    assert s.accepted == requests and s.lost == 0, case.failures  # every worker subscribed before the load
    executions = sum(counts.values())
    # the duplicates the result reports are exactly the ledger's executions beyond the accepted tasks
    assert s.extra_executions == executions - s.accepted
    assert case.audit is not None and case.audit.extra_executions == s.extra_executions
    # and what they are: each of the N subscribers ran every task
    assert set(counts.values()) == {workers}, sorted(set(counts.values()))
    assert s.duplicated == requests and s.extra_executions == (workers - 1) * requests
    # measured, reported, and not a failure of the run
    assert case.status == "errors" and not case.failures, case.failures
    assert result.passed()
    assert case.metrics is not None and case.metrics.match, case.metrics


def test_every_report_marks_the_unsafe_wiring() -> None:
    import io

    from rich.console import Console

    from taskbench.report import html, table
    from tests.report.synthetic import queue_run

    result = queue_run()
    case = result.cases[0]
    assert isinstance(case, QueueCase)
    case.backend, case.unsafe = NAME, backends.info(NAME).unsafe
    case.summary.extra_executions = 2 * (case.summary.accepted or 0)
    out = io.StringIO()
    table.render(result, Console(file=out, width=1000))
    text = out.getvalue()
    assert f"{NAME} [UNSAFE]" in text
    assert "executions beyond each task's first" in text and str(case.summary.extra_executions) in text
    assert f"{NAME} [UNSAFE]" in html.render(result)
