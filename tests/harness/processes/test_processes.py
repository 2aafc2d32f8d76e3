"""Process hygiene: own groups, SIGTERM then SIGKILL, nothing left behind."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

import psutil
import redis

from taskbench.harness.case.stop import stop_failures
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.processes.stack import STOP_MARGIN, Stack
from taskbench.net import free_port, healthy
from taskbench.procgroup import DUMP_SIGNAL, Managed
from taskbench.wait import wait_until

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
"""


def test_sigkill_after_timeout_reaches_grandchildren(tmp_path: Path) -> None:
    with ProcessSet(dict(os.environ), stop_timeout=0.5) as procs:
        proc = procs.start("stubborn", [sys.executable, "-c", STUBBORN], tmp_path / "s.log")
        assert os.getpgid(proc.pid) == proc.pid  # its own process group
        text = wait_until(lambda: proc.log_path.read_text().strip(), 30, what="the grandchild's pid")
        grandchild = int(str(text))
        assert psutil.pid_exists(grandchild)
    assert procs.exit_codes["stubborn"] == -9
    _, alive = psutil.wait_procs([psutil.Process(grandchild)] if psutil.pid_exists(grandchild) else [],
                                    timeout=5)
    assert not alive


def test_polite_process_gets_sigterm(tmp_path: Path) -> None:
    with ProcessSet(dict(os.environ), stop_timeout=10) as procs:
        procs.start("sleeper", [sys.executable, "-c", "import time; time.sleep(300)"], tmp_path / "p.log")
    assert procs.exit_codes["sleeper"] == -15


HUNG = """
import signal, sys, threading, time
from taskbench.procgroup import dump_stacks_on_signal
dump_stacks_on_signal()
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a stop that never finishes

def hang_in_the_broker_call():
    time.sleep(300)

threading.Thread(target=hang_in_the_broker_call, name="consumer").start()
print("ready", flush=True)
time.sleep(300)
"""


def test_a_component_killed_at_stop_writes_its_stacks_to_its_log_first(tmp_path: Path) -> None:
    proc = Managed(name="worker-0", argv=[sys.executable, "-c", HUNG], log_path=tmp_path / "w.log", stack_dump=True)
    proc.start(dict(os.environ))
    wait_until(lambda: "ready" in proc.log_path.read_text(), 30, what="the component to start")
    assert proc.stop(timeout=0.5) == -signal.SIGKILL
    log = proc.log_path.read_text()
    # every thread, the one the stop waited for among them, with the function it is stuck in
    assert "hang_in_the_broker_call" in log and log.count("(most recent call first)") >= 2, log
    assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE


def test_a_process_without_the_handler_is_reported_killed_not_ended_by_the_dump_signal(tmp_path: Path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
               "time.sleep(300)"
    proc = Managed(name="worker-0", argv=[sys.executable, "-c", stubborn], log_path=tmp_path / "w.log",
                   stack_dump=True)
    proc.start(dict(os.environ))
    wait_until(lambda: "ready" in proc.log_path.read_text(), 30, what="the process to start")
    assert proc.stop(timeout=0.2) == -signal.SIGKILL


def test_only_taskbench_components_are_asked_for_their_stacks(tmp_path: Path) -> None:
    def managed(*argv: str) -> Managed:
        return Managed(name="x", argv=list(argv), log_path=tmp_path / "x.log")

    assert managed(sys.executable, "-m", "taskbench", "worker").dumps_stacks
    assert managed(sys.executable, "-m", "taskbench", "serve", "--port", "1").dumps_stacks
    assert not managed(sys.executable, "-m", "taskbench.harness.brokers.delay_proxy", "--port", "1").dumps_stacks
    assert not managed(sys.executable, "-m", "taskbench", "run").dumps_stacks
    assert not managed("redis-server", "--port", "1").dumps_stacks
    told = Managed(name="x", argv=[sys.executable, "-m", "taskbench", "worker"], log_path=tmp_path / "x.log",
                   stack_dump=False)
    assert not told.dumps_stacks


def test_the_real_api_writes_its_stacks_on_the_signal_and_keeps_serving(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    run_id = f"stacks-{uuid.uuid4().hex[:8]}"
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_RUN_ID": run_id}
    with Stack({**os.environ, **env}, name=f"test-stacks-{port}", stop_timeout=5) as stack:
        assert stack.procs.stop_timeout == 5 + STOP_MARGIN  # the SIGKILL comes after the components' grace
        api = stack.start("api", [sys.executable, "-m", "taskbench", "serve", "--port", str(port)],
                          tmp_path / "api.log")
        stack.wait_ready(lambda: healthy(port), timeout=30, what="the API")
        os.kill(api.pid, DUMP_SIGNAL)
        wait_until(lambda: "(most recent call first)" in api.log_path.read_text(), 10, what="the API's stacks in its log")
        assert "uvicorn" in api.log_path.read_text()
        assert healthy(port) and api.alive()
    assert stack.exit_codes["api"] in (0, -15)
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"taskbench:{run_id}:*"):  # only what this API wrote
        client.delete(key)
    client.close()


def test_a_run_names_what_its_stop_had_to_kill_and_where_the_stacks_are(tmp_path: Path) -> None:
    hung = [sys.executable, "-c", HUNG]  # handles the dump signal, as serve and worker do
    deaf = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                  "print('ready', flush=True); time.sleep(300)"]
    with ProcessSet(dict(os.environ), stop_timeout=0.5) as procs:
        procs.start("polite", [sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(300)"],
                    tmp_path / "polite.log")
        procs.start("failing", [sys.executable, "-c", "print('ready', flush=True); import sys; sys.exit(3)"],
                    tmp_path / "failing.log")
        procs.procs.append(Managed(name="worker-0", argv=hung, log_path=tmp_path / "worker-0.log", stack_dump=True))
        procs.procs.append(Managed(name="proxy", argv=deaf, log_path=tmp_path / "proxy.log"))
        for proc in procs.procs[2:]:
            proc.start(procs.env)
        for proc in procs.procs:
            wait_until(lambda p=proc: "ready" in p.log_path.read_text(), 30, what=f"{proc.name} to start")
    assert procs.stacks == {"worker-0": tmp_path / "worker-0.log"}
    assert "hang_in_the_broker_call" in (tmp_path / "worker-0.log").read_text()
    assert sorted(stop_failures(procs)) == sorted([
        "failing exited with code 3 at stop",
        f"worker-0 was killed at stop: still running 0.5 s after SIGTERM (its threads' stacks end "
        f"{tmp_path / 'worker-0.log'})",
        "proxy was killed at stop: still running 0.5 s after SIGTERM",
    ])
