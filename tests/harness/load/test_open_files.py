"""A load needs an open file per user in its driver process: a limit (``ulimit -n``) too low for it is one
line saying what to raise, before anything starts; a soft limit the hard one covers is raised."""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from taskbench.driver import LoadSpec
from taskbench.harness import HarnessError
from taskbench.harness.load import files

CASES = [
    # (soft, hard), users, driver processes, the API started too, what is said (a substring; None: nothing)
    # the limit to set covers the reference API's connections too (every user's, in one process)
    ((1024, 1024), 10_000, 1, True, "raise it with `ulimit -n 10256`"),
    ((1024, 1024), 10_000, 4, True, "2564 open files in each of 4 driver process(es), and the limit is 1024 "
                                    "(hard 1024): raise it with `ulimit -n 10256`"),
    ((1024, 1024), 10_000, 1, False, "--driver-processes 11"),  # the user's own service: spreading helps
    ((256, 256), 300, 1, False, "--driver-processes 2"),
    ((1024, 1024), 1000, 1, True, "raise it with `ulimit -n 1256`"),
]


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The limits the check reads are the test's; what it would set is recorded, never applied."""
    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(files.resource, "setrlimit", lambda _kind, value: set_to.append(tuple(value)))
    return set_to


@pytest.mark.parametrize(("limit", "users", "processes", "api", "said"), CASES)
def test_a_limit_below_the_users_is_one_line_saying_what_to_raise(
        monkeypatch: pytest.MonkeyPatch, limits: list[tuple[int, int]], limit: tuple[int, int], users: int,
        processes: int, api: bool, said: str) -> None:
    monkeypatch.setattr(files, "_limits", lambda: limit)
    with pytest.raises(HarnessError) as caught:
        files.check_open_files(LoadSpec(users=users, requests=10, processes=processes), print, api=api)
    message = str(caught.value)
    assert said in message and f"--users {users}" in message and "\n" not in message
    assert ("--driver-processes" in message) == (not api)
    assert limits == []


@pytest.mark.parametrize(("limit", "users", "processes", "raised", "said"), [
    ((1024, 65_536), 5000, 1, True, "open-file limit raised from 1024 to the hard limit 65536 for 5000 users"),
    ((1024, 4096), 3000, 1, True, "raised from 1024 to the hard limit 4096"),
    ((1024, 1024), 3000, 4, False, "the API can hold about 768 of the 3000"),  # 750 users a driver fit
    ((4096, 4096), 3000, 1, False, None),
    ((math.inf, math.inf), 10_000, 1, False, None),
    ((1024, 1024), 900, 1, False, "the API can hold about 768 of the 900 users' connections"),
])
def test_a_limit_the_hard_one_covers_is_raised(
        monkeypatch: pytest.MonkeyPatch, limits: list[tuple[int, int]], limit: tuple[float, float], users: int,
        processes: int, raised: bool, said: str | None) -> None:
    monkeypatch.setattr(files, "_limits", lambda: limit)
    lines: list[str] = []
    files.check_open_files(LoadSpec(users=users, requests=10, processes=processes), lines.append, api=True)
    assert bool(limits) == raised
    if said is None:
        assert lines == []
    else:
        assert any(said in line for line in lines), lines


def _limited(soft: int, hard: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_run_under_a_low_hard_limit_stops_before_anything_starts(tmp_path: Path, redis_url: str) -> None:
    out = subprocess.run([sys.executable, "-m", "taskbench", "run", "-b", "background", "--users", "10000",
                          "--requests", "20000", "--redis-url", redis_url, "--output", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False,
                         preexec_fn=lambda: _limited(1024, 1024))
    assert out.returncode == 2, out.stderr
    assert "--users 10000 needs about 10064 open files" in out.stderr and "ulimit -n 10256" in out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.glob("*/result.json"))


@pytest.mark.slow
def test_run_raises_a_low_soft_limit_and_every_user_connects(tmp_path: Path, redis_url: str) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    users = 1500
    if hard != resource.RLIM_INFINITY and hard < users + files.API_FILES:
        pytest.skip(f"the hard open-file limit {hard} is below what {users} users need")
    out = subprocess.run([sys.executable, "-m", "taskbench", "run", "-b", "background", "--users", str(users),
                          "--requests", str(users), "--warmup", "0", "--redis-url", redis_url,
                          "--output", str(tmp_path)], capture_output=True, text=True, timeout=300, check=False,
                         preexec_fn=lambda: _limited(1024, hard), env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "open-file limit raised from 1024" in out.stderr
    (path,) = tmp_path.glob("*/result.json")
    (case,) = json.loads(path.read_text())["cases"]
    assert "connect" not in case["load"]["errors"] and case["load"]["ok"] == users
