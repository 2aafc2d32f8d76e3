"""A user's task that fights its worker, on real workers: it raises BaseException, it is a generator, it returns a
coroutine, it hangs or outlives the library's time limit, it forks out of its session. None of it takes a worker
down, counts a call that never ran, calls a started task lost, or leaves a process behind."""

from __future__ import annotations

import re
from pathlib import Path

import psutil

from taskbench.results import QueueCase, load
from tests.helpers import assert_one_line_error

#: picks what a call does by the request's number (the end of its task id): the same ids on every backend
TASKS = r'''
import asyncio, os, re, time
from pathlib import Path


class Halt(BaseException):
    pass


RAISES = {1: SystemExit(0), 2: SystemExit(3), 3: KeyboardInterrupt(), 4: GeneratorExit(), 5: Halt("its own")}


def number(payload):
    return int(re.search(r"(\d+)$", payload["task_id"]).group(1))


async def _raises_later(n):
    await asyncio.sleep(0.001)
    raise RAISES[n]


def ends(payload):
    """A plain function: raises (even ids), or returns a coroutine that raises on the worker's loop (odd)."""
    n = number(payload) % 12
    if n // 2 + 1 in RAISES and n % 2 == 0:
        raise RAISES[n // 2 + 1]
    if n // 2 + 1 in RAISES:
        return _raises_later(n // 2 + 1)
    return None


async def _sleeps(seconds):
    await asyncio.sleep(seconds)


def hangs(payload):
    """Request 1 hangs in its thread, 2 on the loop, 3 outlives a 3 s time limit; the others return."""
    n = number(payload)
    if n == 1:
        time.sleep(600)
    if n == 2:
        return _sleeps(600)
    if n == 3:
        return _sleeps(6)
    return None


def escapes(payload):
    """Request 1 forks twice and leaves its session: the grandchild sleeps, carrying the worker's environment."""
    if number(payload) != 1:
        return
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            Path(os.environ["HOSTILE_PIDS"]).open("a").write(f"{os.getpid()}\n")
            time.sleep(300)
        os._exit(0)


def generator(payload):
    yield payload


async def async_generator(payload):
    yield payload
'''

RAISED = {1: "SystemExit", 2: "SystemExit", 3: "KeyboardInterrupt", 4: "GeneratorExit", 5: "hostile_tasks.Halt"}


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "hostile_tasks.py"
    path.write_text(TASKS)
    return path


def _run(cli: object, *args: str) -> object:
    return cli("run", "--warmup", "0", "--users", "3", *args)  # type: ignore[operator]


def _cases(out_dir: Path) -> list[QueueCase]:
    result = load(next(out_dir.glob("*/result.json")))
    return [c for c in result.cases if isinstance(c, QueueCase)]


def test_a_base_exception_is_a_failed_call_and_every_worker_lives(tmp_path: Path, redis_url: str, out_dir: Path,
                                                                  cli: object) -> None:
    tasks = _tasks(tmp_path)
    out = _run(cli, "--backends", "arq,dramatiq,rq", "--workload", f"{tasks}:ends", "--redis-url", redis_url,
               "--output", str(out_dir), "--requests", "48", "--drain-timeout", "120")
    assert out.exit_code == 0, out.stderr + out.stdout  # type: ignore[attr-defined]
    expected: dict[str, int] = {}
    for i in range(48):
        kind = RAISED.get((i % 12) // 2 + 1)
        if kind is not None:
            expected[kind] = expected.get(kind, 0) + 1
    for case in _cases(out_dir):
        assert case.audit is not None and case.status == "ok", (case.backend, case.failures)
        assert (case.audit.lost, case.audit.duplicated, case.audit.indeterminate) == (0, 0, 0), case.backend
        assert case.audit.failed_types == dict(sorted(expected.items(), key=lambda kv: (-kv[1], kv[0])))
        assert case.audit.categories.ok == 48 - sum(expected.values())
        workers = {name: code for name, code in case.exit_codes.items() if name.startswith("worker")}
        assert workers and not case.revived and set(workers.values()) == {0}, case.exit_codes  # each stopped cleanly


def test_a_generator_function_is_refused_before_any_load(tmp_path: Path, redis_url: str, out_dir: Path,
                                                         cli: object) -> None:
    tasks = _tasks(tmp_path)
    for name, kind in (("generator", "a generator function"), ("async_generator", "an async generator function")):
        out = _run(cli, "--backends", "arq,dramatiq", "--workload", f"{tasks}:{name}", "--redis-url", redis_url,
                   "--output", str(out_dir), "--requests", "10")
        assert_one_line_error(out, f"is {kind}: a call only makes an iterator")  # type: ignore[arg-type]
        assert not list(out_dir.glob("*/logs/*"))  # nothing started, so nothing counted ok


def test_a_task_that_hangs_or_outlives_the_time_limit_is_indeterminate_not_lost(
        tmp_path: Path, redis_url: str, out_dir: Path, cli: object) -> None:
    tasks = _tasks(tmp_path)
    out = _run(cli, "--backends", "arq,dramatiq", "--workload", f"{tasks}:hangs", "--redis-url", redis_url,
               "--output", str(out_dir), "--requests", "12", "--task-timeout", "3", "--drain-stall", "5")
    text = out.stderr + out.stdout  # type: ignore[attr-defined]
    assert out.exit_code == 1 and list(out_dir.glob("*/result.json")), text  # type: ignore[attr-defined]
    arq, dramatiq = _cases(out_dir)
    assert arq.audit is not None and dramatiq.audit is not None
    # arq's job_timeout cut request 3 after 3 s, and requests 1 and 2 never end
    assert (arq.audit.lost, arq.audit.indeterminate, arq.audit.categories.ok) == (0, 3, 9)
    assert sorted(re.sub(r"^.*?(\d+)$", r"\1", i) for i in arq.audit.indeterminate_ids) == ["1", "2", "3"]
    assert arq.summary.indeterminate == 3 and arq.audit.categories.indeterminate == 3
    # Dramatiq's TimeLimit only stops waiting: request 3 finishes (and its retry runs it again)
    assert (dramatiq.audit.lost, dramatiq.audit.indeterminate) == (0, 2)
    said = {case.backend: " ".join(case.failures) for case in (arq, dramatiq)}
    assert ("0 accepted tasks had not started when the workers were stopped (the audit counts them lost); "
            "3 started and never finished (indeterminate: hung or cut, not lost)") in said["arq"]
    assert "arq's job_timeout (3 s, --task-timeout) had passed: the library gave up on them" in said["arq"]
    assert "Dramatiq's TimeLimit (3 s, --task-timeout) had passed" in said["dramatiq"]
    assert "indeterminate 3 (25.00 %)" in " ".join(text.split())  # the audit's line, as the terminal wraps it


def test_a_task_that_leaves_its_session_is_stopped_after_the_run(tmp_path: Path, redis_url: str, out_dir: Path,
                                                                  cli: object, monkeypatch: object) -> None:
    tasks = _tasks(tmp_path)
    pids = tmp_path / "pids"
    monkeypatch.setenv("HOSTILE_PIDS", str(pids))  # type: ignore[attr-defined]
    out = _run(cli, "--backends", "arq,dramatiq", "--workload", f"{tasks}:escapes", "--redis-url", redis_url,
               "--output", str(out_dir), "--requests", "6")
    text = " ".join((out.stderr + out.stdout).split())  # type: ignore[attr-defined]  # as the terminal wraps it
    assert out.exit_code == 0, text  # type: ignore[attr-defined]
    orphans = [int(p) for p in pids.read_text().split()]
    assert len(orphans) == 2  # one a backend
    for pid in orphans:
        assert f"pid {pid}" in text
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert "outlived their process group" in text
