"""PostgreSQL as a broker: its facts, its check (a login) and its durability (``fsync`` and
``synchronous_commit``, as the server reports them).

With no ``--broker-url`` every case gets a private server (it is embedded, as Redis is):
:class:`taskbench.harness.brokers.postgres.PrivatePostgres`, configured by ``--postgres-durability``.
"""

from __future__ import annotations

from typing import Any

from taskbench.brokers.base import Broker
from taskbench.brokers.durability import Durability
from taskbench.errors import HarnessError

__all__ = ["POSTGRES_DURABILITY", "Postgres", "check_postgres", "judge"]

#: the PostgreSQL settings of ``--postgres-durability``: (fsync, synchronous_commit) of the private server
POSTGRES_DURABILITY = {
    "fsync": ("on", "on"),  # PostgreSQL's defaults: a commit returns once its WAL is flushed
    "async-commit": ("on", "off"),  # a crash may lose the last commits (up to 3 × wal_writer_delay)
    "none": ("off", "off"),  # nothing is flushed: a crash may lose or corrupt anything
}


def judge(fsync: str | None, synchronous_commit: str | None) -> Durability:
    """From the broker PostgreSQL's ``SHOW fsync`` and ``SHOW synchronous_commit`` (None: it would not say)."""
    if fsync is None or synchronous_commit is None:
        return Durability(False, "unknown: the broker PostgreSQL did not report fsync/synchronous_commit")
    if fsync != "on":
        return Durability(False, "fsync off: a crash of the PostgreSQL server may lose or corrupt any task")
    if synchronous_commit == "off":
        return Durability(False, "synchronous_commit off: a crash of the PostgreSQL server may lose the last "
                                 "commits (up to 3 × wal_writer_delay)")
    return Durability(True, f"fsync on, synchronous_commit {synchronous_commit}: a committed task is on disk")


def check_postgres(url: str, timeout: float = 3.0) -> None:
    """A login to a PostgreSQL server; its refusal (password, database, not running) in one line."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=max(1, round(timeout))).close()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"cannot use {Postgres().describe(url)}: {first}") from None


class Postgres(Broker):
    name = "postgres"
    label = "PostgreSQL"
    default_port = 5432
    schemes = ("postgresql", "postgres")
    private_per_case = True
    reads_durability = True
    sized_by_schema = True
    server = "taskbench.harness.brokers.postgres:PrivatePostgres"
    server_options = (("durability", "postgres_durability"),)

    def check(self, url: str, timeout: float = 3.0) -> None:
        """The scheme, then a login."""
        wrong = self.check_scheme(url)
        if wrong:
            raise HarnessError(wrong)
        check_postgres(url, timeout)

    def read_durability(self, *, client: Any = None, url: str = "") -> Durability:
        """From the server at ``url``: ``SHOW fsync`` and ``SHOW synchronous_commit``."""
        import psycopg

        try:
            with psycopg.connect(url, connect_timeout=5) as conn:
                fsync = (conn.execute("SHOW fsync").fetchone() or [None])[0]
                commit = (conn.execute("SHOW synchronous_commit").fetchone() or [None])[0]
        except psycopg.Error:
            return judge(None, None)
        return judge(fsync, commit)

    async def read_durability_async(self, *, client: Any = None, url: str = "") -> Durability:
        import psycopg

        try:
            async with await psycopg.AsyncConnection.connect(url, connect_timeout=5) as conn:
                fsync = (await (await conn.execute("SHOW fsync")).fetchone() or [None])[0]
                commit = (await (await conn.execute("SHOW synchronous_commit")).fetchone() or [None])[0]
        except Exception:  # not answering: unknown is not durable
            return judge(None, None)
        return judge(fsync, commit)
