"""A Redis that stalls or restarts: polls retry with backoff, say what they wait for, and never raise."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from taskbench.harness.case.audit import read_ledger
from taskbench.harness.case.drain_wait import drain
from taskbench.harness.case.warm_up import warm_up
from taskbench.harness.faults.stalls import Patient, server_of
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.ledger import Ledger


class Flaky:
    """A real client whose first ``failures`` calls raise redis-py's TimeoutError (None: every call)."""

    def __init__(self, client: redis.Redis, failures: int | None) -> None:
        self.client, self.left = client, failures
        self.connection_pool = client.connection_pool

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.left is None or self.left > 0:
                if self.left is not None:
                    self.left -= 1
                raise redis.exceptions.TimeoutError("Timeout reading from socket")
            return attr(*args, **kwargs)

        return call


def _ledger(client: redis.Redis, run_id: str, ids: list[str]) -> Ledger:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    for task_id in ids:
        ledger.record_sync(client, task_id, now, now, now + 0.001)
    return ledger


def test_backoff_doubles_to_its_cap_says_once_and_says_when_it_answers() -> None:
    now = [0.0]
    said: list[str] = []
    patient = Patient("Redis at 127.0.0.1:1", said.append, purpose="the drain", clock=lambda: now[0])

    def stalled() -> int:
        raise redis.exceptions.ConnectionError("Connection refused")

    delays = []
    for _ in range(5):
        assert patient.call(stalled, -1) == -1
        delays.append(patient.next_try - now[0])
        assert patient.call(lambda: 1, -1) == -1, "no call before the next retry is due"
        now[0] = patient.next_try
    assert delays == [1, 2, 4, 5, 5]
    assert said == ["waiting for Redis at 127.0.0.1:1 for the drain (no answer for 0 s: Connection refused; "
                    "retrying with backoff)"]
    assert patient.call(lambda: 7, -1) == 7
    assert said[-1] == "Redis at 127.0.0.1:1 answers again after 17 s"
    assert patient.status() is None and not patient.stalled


def test_drain_waits_through_redis_timeouts(client: redis.Redis, run_id: str) -> None:
    ids = ["a", "b", "c"]
    ledger = _ledger(client, run_id, ids)
    said: list[str] = []
    with ProcessSet(dict(os.environ)) as procs:
        result = drain(procs, Flaky(client, 2), ledger, target=3, accepted=ids, load_end=time.time(), timeout=20,
                       say=said.append)
    assert result.drained and not result.failures
    server = server_of(client)
    assert said[0].startswith(f"waiting for {server} for the drain's count of executed tasks (no answer for")
    assert said[-1].startswith(f"{server} answers again after"), said
    assert len(said) == 2, "said once what it waits for, once that it answers"


def test_a_redis_that_never_answers_is_bounded_by_the_drain_deadline(client: redis.Redis, run_id: str) -> None:
    ledger = _ledger(client, run_id, ["a"])
    started = time.monotonic()
    with ProcessSet(dict(os.environ)) as procs:
        result = drain(procs, Flaky(client, None), ledger, target=1, accepted=["a"], load_end=time.time(),
                       timeout=2, say=lambda _: None)
    assert time.monotonic() - started < 15  # bounded (by the 2 s deadline and the reads' timeouts), not a hang
    assert not result.drained
    assert result.ended == (f"drain timeout: 2 s after the load ended ({server_of(client)} did not answer: "
                            "Timeout reading from socket)")


@pytest.mark.parametrize(("failures", "read"), [(1, True), (None, False)])
def test_the_audit_read_retries_then_fails_the_case_in_one_line(client: redis.Redis, run_id: str,
                                                                failures: int | None, read: bool) -> None:
    ledger = _ledger(client, run_id, ["a", "b"])
    said: list[str] = []
    rows, problems = read_ledger(Flaky(client, failures), ledger, say=said.append, timeout=2.5)
    if read:
        assert rows is not None and rows.counts == {"a": 1, "b": 1} and not problems
    else:
        assert rows is None
        assert problems == [f"audit: could not read the ledger: {server_of(client)} did not answer within 2.5 s "
                            "(Timeout reading from socket)"]
    assert said[0].startswith(f"waiting for {server_of(client)} for the audit's read of the ledger")


def test_warm_up_waits_through_redis_timeouts(client: redis.Redis, redis_url: str, run_id: str,
                                              tmp_path: Path) -> None:
    """The real API (``background``: it runs the task itself) and its ledger; the harness's polls time out."""
    from taskbench.driver import LoadSpec, RequestTemplate
    from taskbench.harness.processes.envs import ensure_env
    from tests.helpers import served

    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_METRICS_DIR": str(tmp_path / "metrics")}
    said: list[str] = []
    with served(tmp_path, env, python=str(ensure_env("background", quiet=True))) as port:
        template = RequestTemplate(host="127.0.0.1", port=port, path="/api/v1/incr/io/simple/background",
                                   body='{{"value":1,"task_id":"{task_id}","enqueued_at":{enqueued_at}}}')
        with ProcessSet(dict(os.environ)) as procs:
            accepted = warm_up(template, LoadSpec(users=2, requests=5, timeout=10), 5, procs=procs, client=Flaky(client, 2),
                               ledger=Ledger(f"taskbench:{run_id}:"), timeout=20, logs=tmp_path, say=said.append)
    assert accepted == 5
    assert Ledger(f"taskbench:{run_id}:").executed_count(client) == 5
    assert said[0].startswith(f"waiting for {server_of(client)} for the warm-up's tasks"), said
    assert said[-1].startswith(f"{server_of(client)} answers again after"), said



def test_a_quiet_drain_stops_when_no_task_runs_any_more(client: redis.Redis, run_id: str) -> None:
    # a restarted broker without persistence forgot "b": with quiet set, the drain ends 1 s after the
    # last execution instead of waiting out its 30 s timeout, and says why
    ledger = _ledger(client, run_id, ["a"])
    started = time.monotonic()
    with ProcessSet(dict(os.environ)) as procs:
        result = drain(procs, client, ledger, target=2, accepted=["a", "b"], load_end=time.time(), timeout=30,
                       say=lambda _: None, stall=1.0)
    assert not result.drained and time.monotonic() - started < 10
    assert result.ended == "drain stalled: no task ran for 1 s, stopped waiting" and not result.failures


def test_a_stalled_drain_stops_and_says_how_many_tasks_never_ran(client: redis.Redis, run_id: str) -> None:
    # two of three accepted tasks never reach a worker (answered 2xx, the enqueue lost after the answer):
    # the drain gives up 1 s after the last execution, not at its 30 s timeout, and the case fails
    ledger = _ledger(client, run_id, ["a"])
    started = time.monotonic()
    with ProcessSet(dict(os.environ)) as procs:
        result = drain(procs, client, ledger, target=3, accepted=["a", "b", "c"], load_end=time.time(), timeout=30,
                       say=lambda _: None, stall=1.0)
    assert not result.drained and time.monotonic() - started < 10
    # how many never ran is the audit's count, taken once the workers are stopped: one number
    assert result.lines(2) == ["drain stalled: no task ran for 1 s, stopped waiting: 2 accepted tasks had not run "
                               "when the workers were stopped (the audit counts them lost)"]


def _drain_beside(client: redis.Redis, ledger: Any, records: int, *, accepted: tuple[str, ...] = ("a", "never"),
                  target: int = 1000, **drain_args: Any) -> Any:
    """A drain while a thread records ``records`` executions (``r0``, ``r1``, ...), one every 0.2 s
    (bounded), then stops."""
    import threading

    stop = threading.Event()

    def work() -> None:
        for i in range(records):
            if stop.wait(0.2):
                return
            now = time.time()
            ledger.record_sync(client, f"r{i}", now, now, now + 0.001)

    worker = threading.Thread(target=work)
    worker.start()
    try:
        with ProcessSet(dict(os.environ)) as procs:
            return drain(procs, client, ledger, target=target, accepted=list(accepted), load_end=time.time(),
                         **{"say": lambda _: None, **drain_args})
    finally:
        stop.set()
        worker.join()


def test_a_drain_that_times_out_with_tasks_still_running_says_so(client: redis.Redis, run_id: str) -> None:
    # a backlog the workers were still working through when the time ran out: not tasks a fault lost,
    # which a promise that allows losses may excuse (the runner reads still_running); 100 records: 20 s at
    # most, the drain's 2 s timeout ends it sooner
    result = _drain_beside(client, _ledger(client, run_id, ["a"]), 100, timeout=2, stall=30.0)
    assert not result.drained and result.still_running
    assert result.ended == "drain timeout: 2 s after the load ended, tasks still running", result.ended


def test_a_drain_that_times_out_with_nothing_running_is_not_still_running(client: redis.Redis, run_id: str) -> None:
    ledger = _ledger(client, run_id, ["a"])
    with ProcessSet(dict(os.environ)) as procs:
        result = drain(procs, client, ledger, target=2, accepted=["a", "never"], load_end=time.time(), timeout=1.5,
                       say=lambda _: None, stall=30.0)
    assert not result.drained and not result.still_running
    assert result.ended == "drain timeout: 2 s after the load ended", result.ended


def test_a_short_drain_whose_tasks_ran_early_is_not_still_running(client: redis.Redis, run_id: str) -> None:
    # what a killed API's successor does: its own last tasks run in the drain's first second (three
    # records in 0.6 s), then nothing, for the tasks the kill took never come: a 3 s drain was not cut off
    result = _drain_beside(client, _ledger(client, run_id, ["a"]), 3, timeout=3, stall=None)
    assert not result.drained and not result.still_running, result.ended
    assert result.ended == "drain timeout: 3 s after the load ended", result.ended


def test_a_drain_that_follows_its_backlog_goes_on_while_tasks_run(client: redis.Redis, run_id: str) -> None:
    # the timeout was an estimate from the load's pace (taskbench run without --drain-timeout): 1 s for a
    # backlog of 15 tasks that run one every 0.2 s (3 s): the drain goes on at its own pace and drains
    ids = tuple(f"r{i}" for i in range(15))
    said: list[str] = []
    result = _drain_beside(client, _ledger(client, run_id, []), 15, accepted=ids, target=15, timeout=1, stall=30.0,
                           follow=60.0, say=said.append)
    assert result.drained and result.ended is None, (result.ended, said)
    assert said and said[0].startswith("the drain goes on up to ") and "tasks/s in the drain" in said[0], said
    # a fixed wait (--drain-timeout given: no follow) stops at its timeout with the tasks still running
    fixed = _drain_beside(client, _ledger(client, f"{run_id}:fixed", []), 15, accepted=ids, target=15, timeout=1,
                          stall=30.0)
    assert not fixed.drained and fixed.still_running, fixed.ended


def test_a_followed_drain_ends_at_the_latest_and_without_a_pace() -> None:
    from taskbench.harness.case.drain_wait import extended

    assert extended(done=100, seconds=10, left=100, now=1000, latest=5000) == 1000 + 1.5 * 10 + 30
    assert extended(done=100, seconds=10, left=10**6, now=1000, latest=5000) == 5000
    assert extended(done=0, seconds=10, left=100, now=1000, latest=5000) is None
    assert extended(done=100, seconds=10, left=0, now=1000, latest=5000) is None


def test_the_still_running_window() -> None:
    from taskbench.harness.case.drain_wait import STILL_RUNNING, still_running_window

    assert still_running_window(120, None) == STILL_RUNNING
    assert still_running_window(120, 16) == STILL_RUNNING
    assert still_running_window(120, 2200) == STILL_RUNNING
    assert still_running_window(120, 4) == 4
    assert still_running_window(3, None) == 1.0
    assert still_running_window(2, 30) == 1.0
    assert still_running_window(30, None) == STILL_RUNNING
    assert still_running_window(24, 30) == 8.0


def test_supervised_starts_an_exited_worker_again_during_the_load(tmp_path: Path) -> None:
    import sys

    from taskbench.harness.case.drain_wait import supervised
    from taskbench.wait import wait_until

    said: list[str] = []
    with ProcessSet(dict(os.environ)) as procs:
        procs.start("worker-0", [sys.executable, "-c", "import time; time.sleep(0.3)"], tmp_path / "w.log")
        procs.start("api", [sys.executable, "-c", "import time; time.sleep(0.3)"], tmp_path / "a.log")

        def revive(proc: Any) -> str:
            new, code = procs.revive(proc.name)
            return f"{proc.name} exited with code {code}; started again as pid {new.pid}"

        api = next(p for p in procs.procs if p.name == "api")
        with supervised(procs, revive, said.append, interval=0.05) as lines:
            wait_until(lambda: len(lines) >= 1 and not api.alive(), 30, what="a revival and the API's exit")
            time.sleep(0.5)  # the supervisor's passes after the API's exit: not its business
        assert lines and lines == said and all(line.startswith("worker-0 exited with code 0") for line in lines)
        assert any(p.name == "api" and not p.alive() for p in procs.procs)


def test_a_worker_started_again_gets_a_whole_stall_window(client: redis.Redis, redis_url: str, run_id: str,
                                                          tmp_path: Path) -> None:
    """The dead worker's tasks are the new one's to run: the drain's stall counts from the new worker's
    start, not from the last execution before the old one died (streaq's successor, 10 s to start on a busy
    machine, was cut off by the 16 s stall)."""
    import sys

    ledger = _ledger(client, run_id, ["a"])
    marker = tmp_path / "first-run-done"
    # the first run exits after 7.5 s without running "b"; the one started again runs it 1 s after its start
    # (plus its imports, seconds on a busy 2-core machine): more than the 8 s stall after "a", less than 8 s
    # after the new worker's start
    script = (f"import pathlib, sys, time\n"
              f"marker = pathlib.Path({str(marker)!r})\n"
              f"if not marker.exists():\n"
              f"    marker.touch(); time.sleep(7.5); sys.exit(1)\n"
              f"import redis\n"
              f"from taskbench.ledger import Ledger\n"
              f"time.sleep(1); now = time.time()\n"
              f"Ledger({ledger.prefix!r}).record_sync(redis.Redis.from_url({redis_url!r}), 'b', now, now, now)\n"
              f"time.sleep(60)\n")
    with ProcessSet(dict(os.environ)) as procs:
        procs.start("worker-0", [sys.executable, "-c", script], tmp_path / "w.log")

        def revive(proc: Any) -> str:
            new, code = procs.revive(proc.name)
            return f"{proc.name} exited with code {code}; started again as pid {new.pid}"

        result = drain(procs, client, ledger, target=2, accepted=["a", "b"], load_end=time.time(), timeout=60,
                       say=lambda _: None, revive=revive, stall=8.0)
    assert result.drained and not result.ended, (result.ended, (tmp_path / "w.log").read_text())
    assert len(result.revived) == 1 and "exited with code 1" in result.revived[0]


def test_the_drain_waits_for_a_promised_redelivery() -> None:
    # RQ with Retry promises a dead worker's job back within 1095 s of the kill with RQ's defaults: the
    # drain's deadline follows the last kill, or the fault's time when no kill has happened yet
    from taskbench.harness.case.drain_wait import redelivery_deadline

    assert redelivery_deadline([], None, 1095) is None
    assert redelivery_deadline([1000.0, 1010.0], None, 1095) == 1010 + 1095 + 109.5
    assert redelivery_deadline([], 1002.0, 60) == 1002 + 60 + 10
    assert redelivery_deadline([1000.0], 1002.0, 60) == 1002 + 60 + 10
