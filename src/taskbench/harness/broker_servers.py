"""Private RabbitMQ and NATS servers for one run, so a fault may stop, freeze or restart them.

The machine's shared brokers are never touched by a fault: ``--fault restart-broker@T`` or
``stall-broker@T+D`` with ``--broker rabbitmq|nats`` and no ``--broker-url`` starts a private server
for the run, on 127.0.0.1 and a free port, in its own process group, with its data in the run's
folder, and a user and password (RabbitMQ) or token (NATS) made for the run, written in a config
file of mode 0600 (never on the command line). The interface is :class:`~.redis_server.EmbeddedRedis`'s,
so :mod:`.broker_restart` restarts any of the three the same way:

- RabbitMQ: ``rabbitmq-server`` (Debian's wrapper is skipped: it would switch to the rabbitmq user)
  as node ``taskbench-<port>@localhost``, no plugins, its Mnesia and message store in the run's
  folder; a restart finds its durable queues and persistent messages there. It registers with the
  machine's epmd like any other node.
- NATS: ``nats-server -js`` with its JetStream store (file storage) in the run's folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from taskbench.harness import HarnessError
from taskbench.harness.processes import Managed
from taskbench.net import free_port, listening
from taskbench.wait import WaitTimeoutError, wait_until

__all__ = ["PrivateBroker", "PrivateNats", "PrivatePostgres", "PrivateRabbit", "find_broker_server",
           "needs_private_broker", "private_broker", "provide_private_broker"]


def _write_secret(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _group_members(pgid: int) -> list[int]:
    """The processes still in process group ``pgid``."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
    return found


class PrivateBroker:
    """A broker server the harness owns: start, kill (a signal to its group), start again, stop."""

    kind = ""
    program = ""
    #: what survives a restart (the result's ``broker_restart.fsync`` column)
    persistence = ""

    def __init__(self, folder: Path, cpus: list[int] | None = None) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.name = f"{self.kind}-broker"
        self.log_path = folder / f"{self.kind}.log"
        self.port = free_port()
        self.secret = secrets.token_urlsafe(24)
        self.binary = self.find()
        self.env: dict[str, str] = {}
        self.proc = self._managed(cpus)
        self.restarts: list[tuple[int, int]] = []

    # -- what differs per broker ------------------------------------------------------------------

    def find(self) -> str:
        return find_broker_server(self.kind)

    def argv(self) -> list[str]:
        raise NotImplementedError

    def server_env(self) -> dict[str, str]:
        return {}

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def fsync(self) -> str:  # broker_restart's record names what the server keeps
        return self.persistence

    # -- lifecycle -------------------------------------------------------------------------------

    def _managed(self, cpus: list[int] | None) -> Managed:
        return Managed(name=self.name, argv=self.argv(), log_path=self.log_path, cpus=cpus)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, env: dict[str, str], timeout: float = 60.0) -> None:
        self.env = dict(env)
        self.proc.start({**env, **self.server_env()})
        try:
            wait_until(lambda: listening(self.port), timeout, interval=0.1,
                       what=f"the private {self.kind} server to listen on {self.address}",
                       abort=lambda: None if self.proc.alive() else f"{self.program} exited")
        except WaitTimeoutError:
            self.proc.stop(timeout=5.0)
            raise HarnessError(f"the private {self.kind} server ({self.binary}) did not start on "
                               f"{self.address}; its log ({self.log_path}) ends:\n{self.proc.tail(8)}") from None

    def kill(self, sig: signal.Signals = signal.SIGKILL, timeout: float = 30.0) -> tuple[int, int | None]:
        """Stop the server's group with ``sig`` (SIGKILL after ``timeout``), and wait until every process
        of the group is gone: the Erlang VM under RabbitMQ's start script outlives the script by a
        moment, holding its port and its store."""
        pid = self.proc.pid
        code = self.proc.stop(timeout=timeout, first=sig)
        with contextlib.suppress(WaitTimeoutError):
            wait_until(lambda: not _group_members(pid), 10.0, interval=0.01, what=f"the {self.kind} group to exit")
        return pid, code

    def start_again(self, timeout: float = 60.0) -> int:
        old = self.proc
        self.proc = self._managed(old.cpus)
        self.start(self.env, timeout=timeout)
        self.restarts.append((old.pid, self.proc.pid))
        return self.proc.pid

    def stop(self) -> None:
        self.proc.stop(timeout=15.0)


class PrivateRabbit(PrivateBroker):
    kind = "rabbitmq"
    program = "rabbitmq-server"
    persistence = "durable queues, persistent messages (Mnesia and message store on disk)"

    def __init__(self, folder: Path, cpus: list[int] | None = None) -> None:
        self.dist_port = 0
        super().__init__(folder, cpus)
        self.dist_port = free_port()
        self.node = f"taskbench-{self.port}@localhost"
        self.user = "taskbench"
        for sub in ("home", "mnesia", "log"):
            (folder / sub).mkdir(exist_ok=True)
        (folder / "enabled_plugins").write_text("[].\n")
        _write_secret(folder / "rabbitmq.conf", "\n".join([
            f"listeners.tcp.local = 127.0.0.1:{self.port}",
            f"default_user = {self.user}", f"default_pass = {self.secret}",
            "log.console = true", "log.file = false",
        ]) + "\n")
        self.proc = self._managed(cpus)

    def find(self) -> str:
        found = Path(super().find()).resolve()
        if found.name == "rabbitmq-script-wrapper":  # Debian's: su to the rabbitmq user, logs elsewhere
            found = found.with_name("rabbitmq-server")
        return str(found)

    def argv(self) -> list[str]:
        return [self.binary]

    def server_env(self) -> dict[str, str]:
        folder = self.folder
        return {
            "HOME": str(folder / "home"),  # its own Erlang cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(folder / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(folder / "rabbitmq-env.conf"),  # not the machine's
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(folder / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(folder / "log"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    @property
    def url(self) -> str:
        return f"amqp://{self.user}:{self.secret}@127.0.0.1:{self.port}/"


class PrivateNats(PrivateBroker):
    kind = "nats"
    program = "nats-server"
    persistence = "JetStream file storage"

    def __init__(self, folder: Path, cpus: list[int] | None = None) -> None:
        super().__init__(folder, cpus)
        store = folder / "jetstream"
        store.mkdir(exist_ok=True)
        _write_secret(folder / "nats.conf", "\n".join([
            "host: 127.0.0.1", f"port: {self.port}",
            f'jetstream {{ store_dir: "{store}" }}',
            f'authorization {{ token: "{self.secret}" }}',
        ]) + "\n")

    def argv(self) -> list[str]:
        return [self.binary, "-c", str(self.folder / "nats.conf")]

    @property
    def url(self) -> str:
        return f"nats://{self.secret}@127.0.0.1:{self.port}"


def private_broker(kind: str, folder: Path, cpus: list[int] | None = None, **options: str) -> PrivateBroker:
    """A private server of ``kind`` (rabbitmq | nats | postgres), not started yet."""
    cls = _classes().get(kind)
    if cls is None:
        raise ValueError(f"no private server for broker {kind!r}")
    return cls(folder, cpus, **options)


def _classes() -> dict[str, type[PrivateBroker]]:
    return {"rabbitmq": PrivateRabbit, "nats": PrivateNats, "postgres": PrivatePostgres}


def find_broker_server(kind: str) -> str:
    """The server binary a private ``kind`` broker would run; a HarnessError naming it when it is missing."""
    if kind == "postgres":
        if _pg_binaries() is None:
            PrivatePostgres.find(PrivatePostgres.__new__(PrivatePostgres))  # raises, naming what is missing
        return "postgres"
    cls = _classes()[kind]
    found = shutil.which(cls.program) or shutil.which(cls.program, path="/usr/sbin:/usr/local/sbin")
    if not found:
        raise HarnessError(f"{cls.program} is not installed: a fault on the {kind} broker runs on a private "
                           f"server the harness starts (or pass --broker-url for a fault that does not stop it)")
    return found


def needs_private_broker(broker: str, broker_url: str | None, fault_target: str | None) -> bool:
    """A fault that stops, freezes or restarts a RabbitMQ/NATS broker, with no --broker-url: a private server.
    A PostgreSQL broker with no --broker-url is always a private server (it is embedded, as Redis is)."""
    if broker == "postgres":
        return not broker_url
    return broker in _classes() and not broker_url and fault_target == "broker"


@contextlib.contextmanager
def provide_private_broker(kind: str, folder: Path, *, cpus: list[int] | None = None,
                           say: Callable[[str], None] = lambda _: None, **options: str) -> Iterator[PrivateBroker]:
    """A private ``kind`` server for the block, started and always stopped (its group, by its id)."""
    server = private_broker(kind, folder, cpus, **options)
    started = time.monotonic()
    server.start(dict(os.environ))
    say(f"private {kind} server {server.binary} on {server.address} (ready in "
        f"{time.monotonic() - started:.1f} s; keeps {server.persistence})")
    try:
        yield server
    finally:
        server.stop()


#: the PostgreSQL settings of ``--postgres-durability``: (fsync, synchronous_commit) of the private server
POSTGRES_DURABILITY = {
    "fsync": ("on", "on"),  # PostgreSQL's defaults: a commit returns once its WAL is flushed
    "async-commit": ("on", "off"),  # a crash may lose the last commits (up to 3 × wal_writer_delay)
    "none": ("off", "off"),  # nothing is flushed: a crash may lose or corrupt anything
}


def _pg_binaries() -> tuple[str, str] | None:
    """``initdb`` and ``postgres``: on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin."""
    initdb, postgres = shutil.which("initdb"), shutil.which("postgres")
    if initdb and postgres:
        return initdb, postgres
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name),
                         reverse=True):
        if (folder / "initdb").exists() and (folder / "postgres").exists():
            return str(folder / "initdb"), str(folder / "postgres")
    return None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _server_user() -> str | None:
    """PostgreSQL refuses to run as root: a harness running as root starts it as ``postgres`` (Debian's
    package makes that user) or ``nobody``; None when not root."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise HarnessError("PostgreSQL refuses to run as root and this machine has no postgres or nobody user")


class PrivatePostgres(PrivateBroker):
    """A private PostgreSQL: ``initdb`` a cluster in a folder of its own, ``postgres`` on 127.0.0.1 and a
    free port, a user ``taskbench`` with a random password (scram-sha-256; the password reaches initdb
    in a file of mode 0600, never argv), no Unix socket, ``fsync``/``synchronous_commit`` from
    ``--postgres-durability``. Its log is in the run's folder; its data folder is a private temporary
    one (a harness running as root hands it to the ``postgres`` user, who could not enter a root-only
    pytest or run folder), kept across a restart and deleted at the stop."""

    kind = "postgres"
    program = "postgres"

    def __init__(self, folder: Path, cpus: list[int] | None = None, durability: str = "fsync") -> None:
        if durability not in POSTGRES_DURABILITY:
            raise HarnessError(f"unknown PostgreSQL durability {durability!r}; known: "
                               f"{', '.join(POSTGRES_DURABILITY)}")
        self.durability = durability
        self.user_name = "taskbench"
        self.run_as = _server_user()
        import tempfile

        self.data_root = Path(tempfile.mkdtemp(prefix="taskbench-pg-"))
        self.data = self.data_root / "data"
        super().__init__(folder, cpus)
        self._initdb()

    @property
    def persistence(self) -> str:  # type: ignore[override]
        fsync, commit = POSTGRES_DURABILITY[self.durability]
        return f"fsync {fsync}, synchronous_commit {commit}"

    def find(self) -> str:
        found = _pg_binaries()
        if found is None:
            raise HarnessError("PostgreSQL is not installed (no initdb/postgres on PATH or in /usr/lib/postgresql): "
                               "install it (Debian: apt-get install postgresql) or pass --broker-url "
                               "postgresql://USER:PASSWORD@HOST:PORT/DB")
        self.initdb_binary = found[0]
        return found[1]

    def _chown(self, path: Path) -> None:
        if self.run_as is not None:
            import pwd

            entry = pwd.getpwnam(self.run_as)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _initdb(self) -> None:
        import subprocess

        self._chown(self.data_root)
        pwfile = self.data_root / "pwfile"
        _write_secret(pwfile, self.secret + "\n")
        self._chown(pwfile)
        try:
            out = subprocess.run(
                [self.initdb_binary, "-D", str(self.data), "-U", self.user_name, f"--pwfile={pwfile}",
                 "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                capture_output=True, text=True, check=False, timeout=120, user=self.run_as,
                start_new_session=True, env={**os.environ, "LC_ALL": "C"},
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if out.returncode != 0:
            raise HarnessError(f"initdb ({self.initdb_binary}) failed for the private PostgreSQL: "
                               f"{(out.stderr or out.stdout).strip()[-600:]}")
        fsync, commit = POSTGRES_DURABILITY[self.durability]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n".join([
                "# taskbench: a private server for one run",
                "listen_addresses = '127.0.0.1'", f"port = {self.port}", "unix_socket_directories = ''",
                f"fsync = {fsync}", f"synchronous_commit = {commit}", "full_page_writes = on",
                "max_connections = 400", "logging_collector = off",
            ]) + "\n")

    def argv(self) -> list[str]:
        return [self.binary, "-D", str(self.data)]

    def _managed(self, cpus: list[int] | None) -> Managed:
        return Managed(name=self.name, argv=self.argv(), log_path=self.log_path, cpus=cpus, user=self.run_as)

    def start(self, env: dict[str, str], timeout: float = 60.0) -> None:
        super().start(env, timeout)
        import psycopg

        def accepts() -> bool:  # listening is not enough: "the database system is starting up"
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
            except psycopg.Error:
                return False
            return True

        try:
            wait_until(accepts, timeout, interval=0.1, what=f"the private PostgreSQL on {self.address} to accept",
                       abort=lambda: None if self.proc.alive() else "postgres exited")
        except WaitTimeoutError:
            self.proc.stop(timeout=5.0)
            raise HarnessError(f"the private PostgreSQL ({self.binary}) did not accept connections on "
                               f"{self.address}; its log ({self.log_path}) ends:\n{self.proc.tail(8)}") from None

    @property
    def url(self) -> str:
        return f"postgresql://{self.user_name}:{self.secret}@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        # SIGTERM is PostgreSQL's "smart" shutdown, which waits for every client to leave; SIGINT ("fast")
        # ends their sessions and checkpoints: the workers are stopped by then anyway
        self.proc.stop(timeout=15.0, first=signal.SIGINT)
        shutil.rmtree(self.data_root, ignore_errors=True)
