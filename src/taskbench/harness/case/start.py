"""The start step's helpers: a broker prepared before the API and the workers race for it, and
``--broker-delay``'s proxy in front of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from taskbench.harness import HarnessError
from taskbench.harness.brokers.delay_proxy import target_of
from taskbench.harness.faults.context import Broker
from taskbench.harness.processes.stack import Stack
from taskbench.net import listening
from taskbench.procgroup import forget_group, watch_group

Say = Callable[[str], None]


def prepare(python: Path, env_vars: dict[str, str], logs: Path, say: Say = print) -> None:
    """Prepare the case's broker from the backend's environment (``taskbench prepare``: a PostgreSQL
    queue's schema) before its API and workers start; a failure is a HarnessError with its output."""
    started = time.monotonic()
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "prepare.log").open("wb") as log:
        proc = subprocess.Popen([str(python), "-m", "taskbench", "prepare"], env={**os.environ, **env_vars},
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        watch_group(proc.pid)  # dies with the harness
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        finally:
            forget_group(proc.pid)
    if code != 0:
        tail = (logs / "prepare.log").read_text(errors="replace").strip().splitlines()[-5:]
        raise HarnessError(f"preparing the broker failed ({'timed out after 120 s' if code is None else f'exit {code}'}"
                           f", {logs / 'prepare.log'}): " + " / ".join(tail))
    say(f"broker prepared in {time.monotonic() - started:.1f} s (the library's schema)")


def start_delay_proxy(stack: Stack, port: int, broker: Broker, delay_ms: float, logs: Path, say: Say) -> str:
    """Start ``--broker-delay``'s proxy in front of ``broker`` (before the API and the workers) and wait
    until it listens; its line."""
    target = target_of(broker.url, broker.facts.default_port)
    stack.start("broker-delay", [sys.executable, "-m", "taskbench.harness.brokers.delay_proxy", "--port", str(port),
                                 "--target", f"{target[0]}:{target[1]}", "--delay-ms", f"{delay_ms:g}"],
                logs / "broker-delay.log")
    stack.wait_ready(lambda: listening(port), timeout=30, what=f"the delay proxy on 127.0.0.1:{port}")
    line = f"broker behind a delay proxy: {delay_ms:g} ms each way (127.0.0.1:{port} -> {target[0]}:{target[1]})"
    say(line)
    return line
