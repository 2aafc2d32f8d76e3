"""Per-backend virtual environments, built from the project's uv.lock on first use and cached.

The backends' libraries cannot share one environment (arq pins redis-py below 6, kombu needs 6.4
or later, taskiq-redis needs 8), so each backend's API and workers run in their own environment
holding exactly the versions the lock file resolved for that backend's extra.

A *pinned* environment (:func:`ensure_pinned`) holds an article's library versions instead: a uv
project of its own under ``pinned/<name>/`` (its pyproject.toml and uv.lock), without taskbench, whose
processes import taskbench's modules from the checkout's ``src/`` (:func:`pinned_pythonpath`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

from taskbench.harness import HarnessError

_VERSIONS = (
    "import importlib.metadata as m, json, sys; "
    "print(json.dumps({'python': sys.version.split()[0], 'packages': "
    "{d.metadata['Name']: d.version for d in m.distributions()}}))"
)


def project_root() -> Path | None:
    """The checkout this package runs from, if it is one (pyproject.toml and uv.lock beside src/)."""
    root = Path(__file__).resolve().parents[4]
    if (root / "pyproject.toml").is_file() and (root / "uv.lock").is_file():
        return root
    return None


def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise HarnessError("uv is needed to build backend environments: pip install uv")


def _fingerprint(project: Path, name: str) -> str:
    digest = hashlib.sha256(name.encode())
    for part in ("uv.lock", "pyproject.toml"):
        digest.update((project / part).read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def env_dir(extra: str) -> Path:
    base = os.environ.get("TASKBENCH_ENV_DIR")
    if base:
        return Path(base) / extra
    root = project_root()
    if root is None:
        return Path.home() / ".cache" / "taskbench" / "envs" / extra
    return root / ".taskbench" / "envs" / extra


def ensure_env(extra: str, *, quiet: bool = False) -> Path:
    """Return the Python of ``extra``'s environment, building or updating it if needed."""
    root = project_root()
    if root is None:
        # An installed package (no checkout): the current interpreter must already have the extra.
        return Path(sys.executable)
    argv = [uv_binary(), "sync", "--frozen", "--no-dev", "--extra", extra, "--python", sys.executable,
            "--project", str(root)]
    return _built(env_dir(extra), _fingerprint(root, extra), argv, f"the '{extra}' environment", quiet=quiet)


def _built(target: Path, fingerprint: str, argv: list[str], what: str, *, quiet: bool) -> Path:
    """The Python of the environment at ``target``, synced by ``argv`` (a ``uv sync``) unless its stamp says
    it was, from the same lock, by the same Python."""
    stamp = target / ".taskbench-stamp"
    python = target / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return python
    if not quiet:
        print(f"preparing {what} in {target} (first use; cached after)", file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}  # not the harness's venv
    env["UV_PROJECT_ENVIRONMENT"] = str(target)
    result = subprocess.run([*argv, "--quiet"] if quiet else argv, env=env, check=False)
    if result.returncode != 0:
        raise HarnessError(f"building {what} failed (uv exit {result.returncode})")
    stamp.write_text(fingerprint)
    return python


def pinned_names() -> tuple[str, ...]:
    """The pinned environments of the checkout (``pinned/<name>/uv.lock``)."""
    root = project_root()
    if root is None:
        return ()
    return tuple(sorted(p.parent.name for p in (root / "pinned").glob("*/uv.lock")))


def pinned_pythonpath() -> str:
    """What a process of a pinned environment puts on PYTHONPATH to import taskbench: the checkout's src/."""
    return str(Path(__file__).resolve().parents[3])


def ensure_pinned(name: str, *, quiet: bool = False) -> Path:
    """The Python of the pinned environment ``name`` (``pinned/<name>/``), built from its uv.lock on
    first use and cached as the backends' environments are."""
    root = project_root()
    if root is None:
        raise HarnessError(f"the pinned environment {name!r} needs a checkout of taskbench (pinned/{name}/uv.lock)")
    project = root / "pinned" / name
    if not (project / "uv.lock").is_file():
        known = ", ".join(pinned_names()) or "none"
        raise HarnessError(f"no pinned environment {name!r} (pinned/{name}/uv.lock); known: {known}")
    argv = [uv_binary(), "sync", "--frozen", "--no-dev", "--python", sys.executable, "--project", str(project)]
    return _built(env_dir(name), _fingerprint(project, name), argv, f"the pinned '{name}' environment", quiet=quiet)


def environment_key(backend: str, versions: str) -> str:
    """A result's ``environments`` key: the backend, or ``backend@<pinned set>`` for a seed's versions."""
    return backend if versions == "lock" else f"{backend}@{versions}"


def _pinned_settings(name: str) -> dict[str, object]:
    """A pinned environment's ``[tool.taskbench]`` table."""
    import tomllib

    root = project_root()
    if root is None:
        raise ValueError(f"the pinned environment {name!r} needs a checkout of taskbench (pinned/{name}/)")
    path = root / "pinned" / name / "pyproject.toml"
    if not path.is_file():
        known = ", ".join(pinned_names()) or "none"
        raise ValueError(f"no pinned environment {name!r} ({path}); known: {known}")
    with path.open("rb") as handle:
        table = tomllib.load(handle).get("tool", {}).get("taskbench", {})
    return table if isinstance(table, dict) else {}


def pinned_backends(name: str) -> tuple[str, ...]:
    """The backends a pinned environment holds the libraries of (its pyproject's ``[tool.taskbench] backends``;
    none for a set that pins no queue library, as article-004)."""
    held = _pinned_settings(name).get("backends", [])
    return tuple(str(item) for item in held) if isinstance(held, list) else ()


def pinned_requires(name: str) -> dict[str, dict[str, object]]:
    """The settings each backend must run with on a pinned environment's versions (its pyproject's
    ``[tool.taskbench.requires]``: Celery 5.3.6 on the prefork pool)."""
    table = _pinned_settings(name).get("requires", {})
    if not isinstance(table, dict):
        return {}
    return {str(backend): dict(values) for backend, values in table.items() if isinstance(values, dict)}


def pinned_max_concurrency(name: str) -> dict[str, int]:
    """The highest ``--concurrency`` each backend takes on a pinned environment's versions (its pyproject's
    ``[tool.taskbench.max-concurrency]``: FastStream 0.4's subscriber runs one message at a time)."""
    table = _pinned_settings(name).get("max-concurrency", {})
    return {str(key): int(value) for key, value in table.items()} if isinstance(table, dict) else {}


@cache
def versions(python: str) -> dict[str, object]:
    """Python version and every installed distribution of an environment."""
    out = subprocess.run(
        [python, "-c", _VERSIONS], capture_output=True, text=True, check=False, timeout=60
    )
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:]}
    parsed: dict[str, object] = json.loads(out.stdout)
    return parsed
