"""The test scheduler's scopes and its durations file (tests/schedule.py, the order of ``--dist loadscope``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.schedule import DurationRecorder, read_durations, scope_of

CONFORMANCE = "tests/backends/test_conformance.py"


def test_the_conformance_suite_is_one_scope_per_backend_case_and_other_modules_one_each() -> None:
    assert scope_of(f"{CONFORMANCE}::test_sigkill_mid_task[rq-retry-redis]") == f"{CONFORMANCE}[rq-retry-redis]"
    assert scope_of(f"{CONFORMANCE}::test_tasks_wait_for_a_worker[rq-retry-redis]") == f"{CONFORMANCE}[rq-retry-redis]"
    assert scope_of(f"{CONFORMANCE}::test_every_backend_module_is_registered") == CONFORMANCE
    # a function parameter elsewhere keeps its module's scope (its module-scoped fixtures start once)
    assert scope_of("tests/test_params.py::test_range[0-1]") == "tests/test_params.py"
    assert scope_of("tests/x/test_y.py::Group::test_z") == "tests/x/test_y.py::Group"


def test_stored_durations_sum_each_scope_and_keep_the_scopes_a_run_did_not_reach(tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"tests/test_old.py": 7.0, f"{CONFORMANCE}[arq-redis]": 1.0}))
    recorder = DurationRecorder()
    recorder.add(f"{CONFORMANCE}::test_a[arq-redis]", 2.25)
    recorder.add(f"{CONFORMANCE}::test_b[arq-redis]", 3.0)
    recorder.write(path)
    assert read_durations(path) == {"tests/test_old.py": 7.0, f"{CONFORMANCE}[arq-redis]": 5.2}


def test_a_missing_or_broken_durations_file_reads_as_none(tmp_path: Path) -> None:
    assert read_durations(tmp_path / "absent.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert read_durations(tmp_path / "bad.json") == {}
