"""A user's task in every backend's environment: ``--with`` packages installed, the callable checked.

``--with PACKAGE`` is installed into each backend's environment with ``uv pip install``, constrained to
the versions ``uv.lock`` pins for that environment (``uv export``): the library under test keeps its
locked version, and a package that needs another one is refused by uv's resolver, named in one line,
rather than changing what is measured. A later ``uv sync`` of the environment (``uv.lock`` changed)
removes the package; the next run installs it again.

Then every environment imports the callable once (``python -m taskbench.user_task SPEC``) before any
process starts: an environment that cannot is one line naming it and the import error. The check runs in a
process group of its own, killed once it answered: what the module started at import goes with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from taskbench.harness import HarnessError
from taskbench.harness.processes.envs import project_root, uv_binary
from taskbench.procgroup import forget_group, watch_group

Say = Callable[[str], None]
#: seconds an install, and an import check, may take
INSTALL_TIMEOUT = 600
CHECK_TIMEOUT = 120


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else "no output"


def install(python: Path, extra: str, packages: tuple[str, ...], say: Say) -> None:
    """``packages`` into the environment of ``python`` (the ``extra``'s), its locked pins held."""
    if not packages:
        return
    root = project_root()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    with tempfile.TemporaryDirectory(prefix="taskbench-with-") as folder:
        argv = [uv_binary(), "pip", "install", "--quiet", "--python", str(python), *packages]
        if root is not None:
            pins = Path(folder) / "constraints.txt"
            exported = subprocess.run(
                [uv_binary(), "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "--extra", extra,
                 "--project", str(root), "--output-file", str(pins), "--quiet"],
                env=env, capture_output=True, text=True, check=False, timeout=CHECK_TIMEOUT)
            if exported.returncode != 0:
                raise HarnessError(f"--with: could not read the '{extra}' environment's pins: "
                                   f"{_last_line(exported.stderr)}")
            argv += ["--constraint", str(pins)]
        say(f"--with: installing {' '.join(packages)} into the '{extra}' environment")
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        raise HarnessError(f"--with {' '.join(packages)}: the '{extra}' environment ({python.parent.parent}): "
                           f"{_last_line(done.stderr)}")


def check(python: Path, extra: str, spec: str, task_path: str | None) -> str:
    """``sync`` or ``async``: the callable imports in this environment; HarnessError in one line if not."""
    env: Mapping[str, str] = {**os.environ, "TASKBENCH_TASK_PATH": task_path or ""}
    code, out, err = _run_alone([str(python), "-m", "taskbench.user_task", spec], env)
    if code is None:
        raise HarnessError(f"the '{extra}' environment: importing {spec} took more than {CHECK_TIMEOUT} s")
    answer = out.strip().splitlines()
    if code == 0 and answer and answer[-1].startswith("ok "):
        return answer[-1].removeprefix("ok ")
    why = answer[-1] if answer else _last_line(err)
    raise HarnessError(f"the '{extra}' environment ({python.parent.parent}) cannot use your task: {why}")


def _run_alone(argv: list[str], env: Mapping[str, str]) -> tuple[int | None, str, str]:
    """``argv`` in a process group of its own, killed whole when its leader exits (or at the timeout):
    (its exit code or None at the timeout, its stdout, its stderr). The output goes to files, not pipes, so
    a child that the user's module forked at import and that holds them open does not hold the check."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        watch_group(proc.pid)
        try:
            code: int | None = proc.wait(timeout=CHECK_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            forget_group(proc.pid)
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def prepare(pythons: Mapping[str, Path], extras: Mapping[str, str], *, spec: str, task_path: str | None,
            packages: tuple[str, ...], say: Say) -> dict[str, str]:
    """Install ``packages`` into, and check ``spec`` in, every backend's environment (each once);
    returns backend -> sync | async."""
    kinds: dict[str, str] = {}
    done: dict[Path, str] = {}
    for name, python in pythons.items():
        if python not in done:
            install(python, extras[name], packages, say)
            done[python] = check(python, extras[name], spec, task_path)
        kinds[name] = done[python]
    return kinds
