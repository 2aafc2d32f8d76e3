"""A drain that times out: the workers stop before the audit, so the run says one number of tasks that never ran."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskbench.driver import LoadSpec
from taskbench.harness.commands.run import Runner
from taskbench.harness.config import Placement, RunConfig
from taskbench.results import QueueCase

pytestmark = pytest.mark.slow


def test_a_timed_out_drain_gives_one_number_everywhere(redis_url: str, out_dir: Path) -> None:
    # one worker running one 0.3 s task at a time is far behind 40 tasks when the 1 s drain times out
    config = RunConfig(backends=("arq",), load=LoadSpec(users=5, requests=40), redis_url=redis_url,
                       output=out_dir, warmup=2, drain_timeout=1, concurrency=1, io_delay=0.3,
                       placement=Placement.parse("auto"))
    said: list[str] = []
    result = Runner(config, say=said.append).run()
    (case,) = result.cases
    assert isinstance(case, QueueCase) and case.audit is not None and case.metrics is not None
    assert case.status == "failed"
    (line,) = [f for f in case.failures if f.startswith("drain timeout")]
    # the workers were still running the backlog when the time ran out (or had just stopped): either way
    match = re.fullmatch(r"drain timeout: 1 s after the load ended(?:, tasks still running)?: (\d+) accepted tasks "
                         r"had not run when the workers were stopped \(the audit counts them lost\)", line)
    assert match, line
    unrun = int(match.group(1))
    assert unrun > 0
    assert unrun == case.audit.lost == case.summary.lost  # the drain's figure is the audit's
    # the worker's counters as it stopped: the same executions as the ledger's, no disagreement
    assert case.metrics.match, case.metrics
    assert case.metrics.totals["taskbench_tasks_succeeded_total"] == case.metrics.ledger_executions
    assert not [f for f in case.failures if f.startswith("metrics")], case.failures
    assert case.audit.executed == case.summary.accepted - unrun
    assert case.exit_codes.get("worker-0") in (0, -15), case.exit_codes


def test_an_unset_drain_timeout_grows_with_the_backlog() -> None:
    # RQ forks a child per job: 57 tasks/s on a quiet machine, so 10,000 tasks outlast a fixed 120 s drain
    # although the worker never stops; `taskbench run` without --drain-timeout waits for such a backlog
    from taskbench.harness.case.drain_wait import drain_timeout

    given = RunConfig(drain_timeout=120)
    unset = RunConfig(drain_timeout=120, drain_follows_backlog=True)
    # 10,000 accepted, 300 ran during a 10 s load: 9,700 left at 30/s -> 1.5 x 323 s + 30 s
    assert drain_timeout(given, 10_000, 300, 10.0) == 120
    assert drain_timeout(unset, 10_000, 300, 10.0) == 1.5 * 9_700 / 30 + 30
    assert drain_timeout(unset, 1_000, 900, 10.0) == 120  # never shorter than the default
    assert drain_timeout(unset, 10_000, 0, 10.0) == 120  # no pace to go by
    assert drain_timeout(unset, 10_000_000, 1, 10.0) == 3600  # within an hour
