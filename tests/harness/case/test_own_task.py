"""``taskbench run --workload file.py:callable``: the user's task on real backends, audited end to end."""

from __future__ import annotations

import json
from pathlib import Path

from taskbench.results import QueueCase, load
from tests.helpers import assert_one_line_error

TASKS = '''
import asyncio


class DeclinedError(Exception):
    pass


async def pay(payload):
    await asyncio.sleep(0.001)
    if payload["order"].endswith("7"):  # the same ids on every backend
        raise DeclinedError(payload["order"])
'''


def test_a_task_that_cannot_be_imported_stops_the_run_before_any_load(tmp_path: Path, redis_url: str,
                                                                       out_dir: Path, cli: object) -> None:
    tasks = tmp_path / "broken.py"
    tasks.write_text("import no_such_dependency_xyz\n\ndef run(payload):\n    pass\n")
    out = cli("run", "--backends", "arq", "--workload", f"{tasks}:run", "--redis-url", redis_url,  # type: ignore[operator]
              "--output", str(out_dir), "--requests", "10")
    assert_one_line_error(out, "the 'arq' environment")
    assert "cannot import" in out.stderr and "No module named 'no_such_dependency_xyz'" in out.stderr
    assert not list(out_dir.glob("*/logs/*"))  # no process was started


def test_failed_calls_are_counted_by_type_and_nothing_is_lost(tmp_path: Path, redis_url: str, out_dir: Path,
                                                              cli: object) -> None:
    tasks = tmp_path / "shop.py"
    tasks.write_text(TASKS)
    template = tmp_path / "order.json"
    template.write_text('{"order": "o-{task_id}", "note": "{braces} stay"}')
    out = cli("run", "--backends", "arq,rq", "--workload", f"{tasks}:pay", "--payload", str(template),  # type: ignore[operator]
              "--redis-url", redis_url, "--output", str(out_dir), "--requests", "60", "--users", "5",
              "--warmup", "0", "--drain-timeout", "120")
    assert out.exit_code == 0, out.stderr + out.stdout
    result = load(next(out_dir.glob("*/result.json")))
    cases = [c for c in result.cases if isinstance(c, QueueCase)]
    assert [c.backend for c in cases] == ["arq", "rq"]
    for case in cases:
        assert case.audit is not None and case.status == "ok"
        expected = sum(1 for i in range(60) if str(i).endswith("7"))
        assert (case.audit.lost, case.audit.duplicated, case.audit.failed) == (0, 0, expected)
        assert case.audit.failed_types == {"shop.DeclinedError": expected}
        assert case.audit.categories.ok == 60 - expected
        assert case.audit.cpu_ms is not None and case.audit.cpu_ms.count == 60
        assert case.rss is not None and case.rss.peak_mb > 0
        assert case.summary.failed == expected
        assert case.metrics is not None and case.metrics.match  # failed calls counted failed by the workers
    assert "failed 6 (10.00 %: shop.DeclinedError 6)" in out.stderr + out.stdout
    assert json.loads((next(out_dir.glob("*/result.json"))).read_text())["config"]["payload"] == str(template)
