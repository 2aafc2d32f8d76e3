"""The new fault kinds on real processes and a private redis-server: each fault happened, nothing is left.

Short open-model loads (100 requests/s, a few hundred requests) on arq, whose worker starts fastest.
A watcher thread samples the harness's process tree every 20 ms, so the tests see for themselves what
the harness's record claims (a worker in state "stopped", a new worker pid after each kill).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from taskbench.harness.brokers.redis import EmbeddedRedis
from tests.helpers import harness_cli

LOAD = ["--model", "open", "--rate", "100", "--warmup", "10", "--users", "20"]


@dataclass
class Watch:
    """What the process tree looked like: every pid seen, and the states each worker pid was seen in."""

    seen: dict[int, psutil.Process] = field(default_factory=dict)
    worker_states: dict[int, set[str]] = field(default_factory=dict)


@contextlib.contextmanager
def watched(root: int) -> Iterator[Watch]:
    watch, stop = Watch(), threading.Event()

    def sample() -> None:
        while not stop.is_set():
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(root).children(recursive=True):
                    watch.seen.setdefault(child.pid, child)
                    with contextlib.suppress(psutil.Error):
                        if child.cmdline()[-1:] == ["worker"]:
                            watch.worker_states.setdefault(child.pid, set()).add(child.status())
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        stop.set()
        thread.join(5)


def _run(args: list[str], out_dir: Path) -> tuple[int, str, dict[str, Any], Watch]:
    with harness_cli(["run", "--backends", "arq", "--output", str(out_dir), *LOAD, *args]) as proc, \
            watched(proc.pid) as watch:
        out, _ = proc.communicate(timeout=300)
    results = list(out_dir.glob("*/result.json"))
    assert results, f"exit code {proc.returncode}, no result.json:\n{out}"
    case = json.loads(results[0].read_text())["cases"][0]
    return proc.returncode, out, case, watch


def _nothing_left(watch: Watch) -> None:
    _, alive = psutil.wait_procs(list(watch.seen.values()), timeout=10)
    assert not alive, [p.pid for p in alive]


@pytest.mark.slow
def test_paused_worker_is_stopped_then_continued(out_dir: Path) -> None:
    # two workers: the other one goes on while worker-0 is frozen; no --redis-url: a private redis-server
    code, out, case, watch = _run(["--requests", "300", "--workers", "2", "--task-timeout", "2",
                                   "--fault", "pause-worker@1+1.5"], out_dir)
    fault = case["fault"]
    assert fault["injected"] and fault["target"] == "worker-0", (fault, out)
    assert fault["ended"] > fault["at"] and fault["kills"] == []
    assert any("in state stopped" in line and not line.split(": ")[1].startswith("0 of") for line in fault["proof"])
    stopped = [pid for pid, states in watch.worker_states.items() if psutil.STATUS_STOPPED in states]
    assert len(stopped) == 1, watch.worker_states  # the one paused, seen stopped by the watcher too
    assert len(watch.worker_states[stopped[0]]) > 1, "and running again after SIGCONT"
    assert case["summary"]["lost"] == 0 and fault["timeline"], case["summary"]
    assert code == 0, out
    _nothing_left(watch)


@pytest.mark.slow
def test_repeated_kills_kill_and_restart_the_worker_each_time(out_dir: Path) -> None:
    code, out, case, watch = _run(["--requests", "800", "--task-timeout", "2", "--fault", "kill-worker@0.8/1.5"],
                                  out_dir)
    fault = case["fault"]
    kills = len(fault["kills"])
    assert fault["injected"] and kills >= 2, (fault, out)
    assert len(fault["restarts_ready_s"]) == kills
    assert sum(line.startswith("kill ") and "code -9" in line for line in fault["proof"]) == kills
    assert len(watch.worker_states) >= kills + 1, watch.worker_states  # a new worker pid after each kill
    assert f"killed {kills} times" in out
    load_end = fault["load_start"] + case["load"]["elapsed_s"]
    assert max(fault["kills"]) < load_end + 0.5, "no kill once the load ended (the drain runs undisturbed)"
    assert case["summary"]["lost"] == 0, case["summary"]  # arq keeps them (at-least-once)
    assert code == 0, out
    _nothing_left(watch)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own: the stall pauses every client of it (never the machine's)."""
    server = EmbeddedRedis(tmp_path / "private-redis.log")
    server.start(dict(os.environ))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.slow
def test_stalled_broker_answers_nothing_until_the_stall_ends(private_redis: str, out_dir: Path) -> None:
    # a probe of our own PINGs the broker all along: a PING sent during the stall is answered only after it
    probes: list[tuple[float, float]] = []
    stop = threading.Event()

    def probe() -> None:
        client = redis.Redis.from_url(private_redis, socket_timeout=30)
        while not stop.is_set():
            sent = time.time()
            with contextlib.suppress(redis.exceptions.RedisError):
                client.ping()
                probes.append((sent, time.time()))
            stop.wait(0.05)
        client.close()

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        code, out, case, watch = _run(["--redis-url", private_redis, "--requests", "400",
                                       "--fault", "stall-broker@1+2"], out_dir)
    finally:
        stop.set()
        thread.join(35)
    fault = case["fault"]
    assert fault["injected"] and fault["target"] == "broker", (fault, out)
    at, ended = fault["at"], fault["ended"]
    assert any("did not answer a PING" in line for line in fault["proof"]), fault["proof"]
    # a PING sent before the pause may be read a moment after it began (the probe thread's turn): only
    # those sent during the pause count
    assert not [answered for sent, answered in probes if at < sent and answered < ended - 0.05], (at, ended)
    held = [(sent, answered) for sent, answered in probes if sent < ended - 0.1 and answered >= ended - 0.05]
    assert held and held[0][0] < at + 0.1, (held, at, ended)  # the PING in flight waited out the stall
    assert case["summary"]["lost"] == 0, case["summary"]
    assert code == 0, out
    _nothing_left(watch)


def test_stall_of_a_broker_the_harness_does_not_own_is_refused(out_dir: Path) -> None:
    # the machine's RabbitMQ, named: never frozen (without --broker-url the harness starts a private one)
    with harness_cli(["run", "--backends", "celery", "--broker", "rabbitmq", "--output", str(out_dir),
                      "--broker-url", "amqp://guest:guest@127.0.0.1:5672/",
                      "--requests", "100", "--fault", "stall-broker@1+1"]) as proc:
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "stall-broker" in out and "did not start" in out and "Traceback" not in out, out


def test_stall_of_a_server_the_harness_started_freezes_its_process(tmp_path: Path) -> None:
    # a private nats-server standing for a RabbitMQ/NATS server the harness started: SIGSTOP, then SIGCONT
    from taskbench.harness.faults.actions import stall_broker
    from taskbench.harness.faults.context import Broker, FaultContext
    from taskbench.harness.faults.kinds import Fault
    from taskbench.harness.processes.process_set import ProcessSet
    from taskbench.net import free_port
    from taskbench.results import FaultRecord
    from taskbench.wait import wait_until

    binary = shutil.which("nats-server")
    if binary is None:
        pytest.skip("nats-server is not installed")
    port = free_port()
    # 3 s: wide enough that the test's own look falls inside the stall on a busy machine (1 s did not)
    fault = Fault.parse("stall-broker@1+3")
    with ProcessSet(dict(os.environ), stop_timeout=5) as procs:
        server = procs.start("nats", [binary, "-a", "127.0.0.1", "-p", str(port)], tmp_path / "nats.log")
        wait_until(lambda: _answers(port), 10, what="nats-server to answer")
        record = FaultRecord(fault=fault.describe(), target=fault.target)
        ctx = FaultContext(fault=fault, procs=procs, record=record, ready=lambda _: True, restarted=lambda _: None,
                           ready_timeout=5, broker=Broker("nats", f"nats://127.0.0.1:{port}", proc=server))
        thread = threading.Thread(target=stall_broker, args=(ctx,))
        thread.start()
        wait_until(lambda: record.injected, 5, what="the stall")
        states = {psutil.Process(server.pid).status()}
        silent = not _answers(port)
        thread.join(10)
        assert psutil.STATUS_STOPPED in states and silent, (states, record.proof)
        assert record.ended is not None and "1 of 1 process(es) in state stopped" in record.proof[0]
        assert psutil.Process(server.pid).status() != psutil.STATUS_STOPPED and _answers(port)
        pid = server.pid
    assert not psutil.pid_exists(pid)


def _answers(port: int) -> bool:
    """nats-server greets every new connection with INFO: a frozen one does not."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3) as sock:
            return sock.recv(4).startswith(b"INFO")
    except OSError:
        return False


@pytest.mark.slow
def test_interrupt_during_a_pause_continues_and_stops_everything(out_dir: Path) -> None:
    # a Ctrl-C while worker-0 is frozen: it gets SIGCONT, then the stop; no stopped process is left behind
    args = ["run", "--backends", "arq", "--output", str(out_dir), *LOAD, "--duration", "60", "--requests", "6000",
            "--fault", "pause-worker@1+60"]
    with harness_cli(args) as proc, watched(proc.pid) as watch:
        from taskbench.wait import wait_until

        wait_until(lambda: any(psutil.STATUS_STOPPED in s for s in watch.worker_states.values()), 120,
                   what="worker-0 paused", interval=0.05)
        proc.send_signal(2)  # SIGINT
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    _nothing_left(watch)


@pytest.mark.slow
def test_restart_workers_starts_a_worker_that_died_outside_the_harness_again(out_dir: Path) -> None:
    # an OOM kill, say: the test SIGKILLs worker-0 itself, the harness did not; --restart-workers starts
    # it again as `restart: on-failure` would, and the run loses nothing
    args = ["run", "--backends", "arq", "--output", str(out_dir), *LOAD, "--requests", "1500", "--task-timeout", "2",
            "--restart-workers"]
    with harness_cli(args) as proc, watched(proc.pid) as watch:
        from taskbench.wait import wait_until

        first = wait_until(lambda: next(iter(watch.worker_states), None), 120, what="worker-0", interval=0.05)
        # into the load (15 s at 100 requests/s), after the warm-up, whose end the harness prints: a fixed
        # sleep landed in the warm-up on a slow machine, where a dead worker fails the run by design
        assert proc.stdout is not None
        seen: list[str] = []
        for line in iter(proc.stdout.readline, ""):
            seen.append(line)
            if "warm-up: done" in line or len(seen) > 2_000:
                break
        assert any("warm-up: done" in line for line in seen), "".join(seen)
        time.sleep(1.0)
        os.kill(first, 9)
        rest, _ = proc.communicate(timeout=300)
        out = "".join(seen) + rest
    results = list(out_dir.glob("*/result.json"))
    assert results, out
    (case,) = json.loads(results[0].read_text())["cases"]
    assert len(case["revived"]) == 1, (case["revived"], out)
    assert f"(pid {first}) exited on its own with code -9" in case["revived"][0]
    assert len(watch.worker_states) == 2, watch.worker_states  # the killed worker and the one started again
    # arq acks after the task ran: the killed worker's task in flight may run again (a duplicate is inside
    # the bound "duplicates allowed": status ok), a loss would fail the case
    summary = case["summary"]
    assert summary["lost"] == 0 and not case["failures"], (summary, case["failures"])
    assert case["status"] == "ok", (summary, case["status"])
    assert proc.returncode == 0, out
    _nothing_left(watch)


def test_revive_starts_an_exited_process_again(tmp_path: Path) -> None:
    import sys

    from taskbench.harness.processes.process_set import ProcessSet
    from taskbench.wait import wait_until

    script = tmp_path / "once.py"  # exits with 3 the first time, then stays up
    script.write_text("import os, sys, time\n"
                      f"mark = {str(tmp_path / 'ran')!r}\n"
                      "if not os.path.exists(mark):\n    open(mark, 'w').close(); sys.exit(3)\n"
                      "time.sleep(60)\n")
    with ProcessSet(dict(os.environ), stop_timeout=5) as procs:
        old = procs.start("worker-0", [sys.executable, str(script)], tmp_path / "w.log")
        wait_until(lambda: not old.alive(), 30, what="the first run to exit")
        assert [p.name for p in procs.dead()] == ["worker-0"]
        new, code = procs.revive("worker-0")
        assert code == 3 and new.pid != old.pid and new.alive()
        assert procs.dead() == [] and procs.get("worker-0") is new
        pid = new.pid
    assert not psutil.pid_exists(pid)
