"""The user's task checked in an environment before any load: in a process group of its own, killed at its end;
what left its group is stopped when the run ends (the run's marker, never a name)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from taskbench.harness import HarnessError
from taskbench.harness.processes import task_env
from taskbench.harness.processes.runs import registered
from taskbench.procgroup import OWNER_ENV
from taskbench.wait import wait_until

#: a module that forks at import: the child sleeps (holding the check's output open), and with ``SESSION`` it
#: forks again and leaves its session first, so no group kill reaches it
FORKS = '''
import os, sys, time
from pathlib import Path
if os.fork() == 0:
    if SESSION:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
    Path(PIDS).open("a").write(f"{os.getpid()}\\n")
    time.sleep(300)
    os._exit(0)

def run(payload):
    pass
'''


def _forking_module(tmp_path: Path, *, session: bool) -> tuple[str, Path]:
    pids = tmp_path / "pids"
    tasks = tmp_path / "forks_at_import.py"
    tasks.write_text(f"SESSION = {session}\nPIDS = {str(pids)!r}\n{FORKS}")
    return f"{tasks}:run", pids


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _dies(pid: int) -> bool:
    """The process is gone (a SIGKILL takes a moment to land) or a zombie."""
    return bool(wait_until(lambda: not _alive(pid) or None, 10, what=f"pid {pid} to die"))


def _forked(pids: Path) -> int:
    found = wait_until(lambda: pids.read_text().split() if pids.exists() and pids.read_text().strip() else None,
                       30, what="the forked child's pid")
    assert found is not None
    return int(found[0])


def test_a_module_that_forks_at_import_answers_the_check_and_its_child_goes_with_it(tmp_path: Path) -> None:
    spec, pids = _forking_module(tmp_path, session=False)
    assert task_env.check(Path(sys.executable), "arq", spec, None) == "sync"  # not held by the child's pipes
    child = _forked(pids)
    assert _dies(child)  # its group was killed once the check answered


def test_a_check_that_fails_is_still_one_line_and_kills_its_group(tmp_path: Path) -> None:
    tasks = tmp_path / "forks_then_breaks.py"
    pids = tmp_path / "pids"
    tasks.write_text(f"SESSION = False\nPIDS = {str(pids)!r}\n{FORKS}\nimport no_such_dependency_xyz\n")
    with pytest.raises(HarnessError, match="cannot use your task: cannot import") as info:
        task_env.check(Path(sys.executable), "arq", f"{tasks}:run", None)
    assert "\n" not in str(info.value)
    assert _dies(_forked(pids))


def test_what_left_its_session_is_stopped_when_the_run_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKBENCH_RUNS_DIR", str(tmp_path / "runs"))
    spec, pids = _forking_module(tmp_path, session=True)
    said: list[str] = []
    with registered(tmp_path / "out", said.append) as record:
        assert task_env.check(Path(sys.executable), "arq", spec, None) == "sync"
        orphan = _forked(pids)
        assert _alive(orphan)  # out of the check's group: the kill of the group missed it
        environ = Path(f"/proc/{orphan}/environ").read_bytes().split(b"\0")
        assert f"{OWNER_ENV}={record.marker}".encode() in environ
    assert not _alive(orphan)  # stop_pids waited for it
    assert any(f"pid {orphan}" in line and "outlived their process group" in line for line in said)
    assert os.environ.get(OWNER_ENV) != record.marker
