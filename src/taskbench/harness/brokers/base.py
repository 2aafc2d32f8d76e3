"""A server the harness starts privately for a run: the base class of every broker server it owns.

A private server runs on 127.0.0.1 and a free port, in its own process group (stopped by its id),
with its log and data in the run's folder and a secret made for the run (a password or a token) in a
config file of mode 0600, never on the command line. :class:`PrivateServer` does what all of them do:
start and wait until the server is ready, kill it with a signal (SIGKILL: a crash; SIGTERM: a clean
stop), start it again on the same port with the same secret and data (``restart-broker``,
:mod:`taskbench.harness.faults.broker_restart`), stop it; ``stall-broker`` freezes its process group.
A subclass says what differs: its binary and argv, its config files, its environment, when it is
ready and how it stops:

- :class:`~.redis.EmbeddedRedis`: ``redis-server``, the ledger's and the broker's (AOF per ``--redis-fsync``);
- :class:`~.rabbitmq.PrivateRabbit`: ``rabbitmq-server``, for a fault on a RabbitMQ broker;
- :class:`~.nats.PrivateNats`: ``nats-server -js``, for a fault on a NATS broker;
- :class:`~.postgres.PrivatePostgres`: ``postgres``, every PostgreSQL broker without ``--broker-url``.

The machine's shared brokers are never touched: a fault that stops, freezes or restarts one runs on a
private server (:func:`taskbench.harness.brokers.provide_broker`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
from pathlib import Path
from typing import Any

from taskbench.harness import HarnessError
from taskbench.net import free_port, listening
from taskbench.procgroup import Managed
from taskbench.redaction import redact  # re-exported: the servers' URLs are recorded redacted
from taskbench.wait import WaitTimeoutError, wait_until

__all__ = ["PrivateServer", "group_members", "redact", "write_secret"]


def write_secret(path: Path, text: str) -> None:
    """Write ``text`` to a file of mode 0600 (a config file that holds a password or a token)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def group_members(pgid: int) -> list[int]:
    """The processes still in process group ``pgid``."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
    return found


class PrivateServer:
    """A server the harness owns: start (until ready), kill (a signal to its group), start again, stop.

    The port and the secret are chosen once; a restart (:meth:`start_again`) keeps them, and the
    config files and data that :meth:`configure` wrote, so the clients reconnect to the same URL.
    """

    kind = ""  # the broker's name, as in taskbench.brokers.BROKERS (whose ``server`` names this class)
    program = ""  # the server's binary, looked up on PATH (and in /usr/sbin)
    #: what :meth:`start_again` proves of the new process (the restart's proof line)
    answers = "listened"
    #: the stop's first signal, and how long it waits before the SIGKILL
    stop_signal = signal.SIGTERM
    stop_timeout = 15.0
    #: a kill waits until every process of the group is gone (a start script's VM outlives the script)
    wait_for_group = True
    #: the user the server runs as (None: the harness's)
    run_as: str | None = None

    def __init__(self, folder: Path, cpus: list[int] | None = None, *, name: str | None = None,
                 log_path: Path | None = None) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.name = name or f"{self.kind}-broker"
        self.log_path = log_path or folder / f"{self.kind}.log"
        self.cpus = cpus
        self._take_port()
        self.secret = secrets.token_urlsafe(24)
        self.binary = self.find()
        self.env: dict[str, str] = {}
        self.restarts: list[tuple[int, int]] = []  # (old pid, new pid) per restart
        self.configure()
        self.proc = self._managed(cpus)

    # -- what differs per server -----------------------------------------------------------------

    @classmethod
    def for_broker(cls, folder: Path, cpus: list[int] | None = None, **options: Any) -> PrivateServer:
        """The broker's private server of a run or a case, its log and data in ``folder``, not started;
        ``options``: the broker's :attr:`~taskbench.brokers.base.Broker.server_options`."""
        return cls(folder, cpus, **options)

    @classmethod
    def locate(cls) -> str:
        """The server's binary; a HarnessError naming what is missing."""
        found = shutil.which(cls.program) or shutil.which(cls.program, path="/usr/sbin:/usr/local/sbin")
        if not found:
            raise HarnessError(f"{cls.program} is not installed: a fault on the {cls.kind} broker runs on a private "
                               f"server the harness starts (or pass --broker-url for a fault that does not stop it)")
        return found

    def find(self) -> str:
        """The binary this server runs (:meth:`locate`)."""
        return self.locate()

    def configure(self) -> None:
        """Write what the server reads at each start (config files, data folders), before the first."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def server_env(self) -> dict[str, str]:
        """The server's own variables, on top of the environment :meth:`start` was given."""
        return {}

    def ready(self) -> bool:
        """Whether the started server can be used: here, that it listens on its port."""
        return listening(self.port)

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def persistence(self) -> str:
        """What survives a restart, in words."""
        return ""

    @property
    def fsync(self) -> str | None:
        """What survives a restart, for the result's ``broker_restart.fsync`` (None: nothing)."""
        return self.persistence

    # -- lifecycle -------------------------------------------------------------------------------

    def _take_port(self) -> None:
        self.port = free_port()

    def _managed(self, cpus: list[int] | None) -> Managed:
        return Managed(name=self.name, argv=self.argv(), log_path=self.log_path, cpus=cpus, user=self.run_as)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, env: dict[str, str], timeout: float = 60.0) -> None:
        """Start the server with ``env`` (and :meth:`server_env`) and wait until it is :meth:`ready`."""
        self.env = dict(env)
        self.proc.start({**env, **self.server_env()})
        try:
            wait_until(self.ready, timeout, interval=0.1,
                       what=f"the private {self.kind} server to listen on {self.address}",
                       abort=lambda: None if self.proc.alive() else f"{self.program} exited")
        except WaitTimeoutError:
            self.proc.stop(timeout=5.0)
            raise HarnessError(f"the private {self.kind} server ({self.binary}) did not start on "
                               f"{self.address}; its log ({self.log_path}) ends:\n{self.proc.tail(8)}") from None

    def kill(self, sig: signal.Signals = signal.SIGKILL, timeout: float = 30.0) -> tuple[int, int | None]:
        """Stop the server's group with ``sig`` (SIGKILL: a crash; SIGTERM: a clean stop; SIGKILL follows
        when it outlasts ``timeout``); returns its pid and exit code. With :attr:`wait_for_group`, it
        returns once every process of the group is gone: the Erlang VM under RabbitMQ's start script
        outlives the script by a moment, holding its port and its store."""
        pid = self.proc.pid
        code = self.proc.stop(timeout=timeout, first=sig)
        if self.wait_for_group:
            with contextlib.suppress(WaitTimeoutError):
                wait_until(lambda: not group_members(pid), 10.0, interval=0.01,
                           what=f"the {self.kind} group to exit")
        return pid, code

    def start_again(self, timeout: float = 60.0) -> int:
        """Start the server again on the same port with the same secret, config and data; its new pid."""
        old = self.proc
        self.proc = self._managed(old.cpus)
        self.start(self.env, timeout=timeout)
        self.restarts.append((old.pid, self.proc.pid))
        return self.proc.pid

    def members(self) -> list[int]:
        """The server's processes, the leader first: its process group (a server whose children leave the
        group, as PostgreSQL's do, names them itself). A stall freezes all of them, a crash kills all."""
        pid = self.proc.pid
        return [pid, *(p for p in group_members(pid) if p != pid)]

    def exit_note(self, lines: int = 4) -> str | None:
        """None while the server runs; once it exited on its own, one line with its exit code and the
        end of its log, which holds the real cause (``Short write while writing to the AOF file``: a full
        disk), where its clients only saw a refused connection."""
        if self.proc.popen is None or self.proc.alive():
            return None
        tail = " | ".join(line.strip() for line in self.proc.tail(lines).splitlines() if line.strip())
        return (f"{self.name}-server exited (code {self.proc.exit_code()}) during the case; its log "
                f"({self.log_path}) ends: {tail or '(empty)'}")

    def stop(self) -> None:
        self.proc.stop(timeout=self.stop_timeout, first=self.stop_signal)
