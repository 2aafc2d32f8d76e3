"""What the PostgreSQL backends share: one schema per run, and the connection settings that select it.

Every run (and every conformance stack) gets its own schema, ``taskbench_<run id>``, and every
connection of the run has it as its ``search_path``: a library's unqualified tables, functions and
triggers are created and found there, so runs on one server never see each other's jobs, and
``purge`` is one ``DROP SCHEMA ... CASCADE``. The ledger stays on Redis.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from taskbench.settings import Settings

_UNSAFE = re.compile(r"[^a-z0-9_]")


def schema(settings: Settings) -> str:
    """The run's schema: ``taskbench_`` and the run id, lower case, other characters as ``_``; a long id
    is cut and given a hash so that two runs never share a name (PostgreSQL keeps 63 bytes)."""
    name = "taskbench_" + _UNSAFE.sub("_", settings.run_id.lower())
    if len(name) > 63 or name != "taskbench_" + settings.run_id:
        digest = hashlib.sha256(settings.run_id.encode()).hexdigest()[:8]
        name = f"{name[:54]}_{digest}"
    return name


def quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def options(settings: Settings) -> str:
    """libpq ``options`` that make the run's schema the connection's ``search_path``."""
    return f"-c search_path={schema(settings)}"


def plain_url(settings: Settings) -> str:
    """The broker's URL without ``options``: each library gets :func:`options` (psycopg's ``options``
    keyword) or the schema as asyncpg's ``server_settings`` beside it."""
    parts = urlsplit(settings.broker_address)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), parts.fragment))


async def create_schema(settings: Settings) -> None:
    """``CREATE SCHEMA IF NOT EXISTS`` the run's schema (psycopg, autocommit)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(plain_url(settings), autocommit=True) as conn:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted(schema(settings))}")


async def drop_schema(settings: Settings) -> None:
    """Everything the run created on the server: its schema, with every table and function in it."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(plain_url(settings), autocommit=True) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {quoted(schema(settings))} CASCADE")
