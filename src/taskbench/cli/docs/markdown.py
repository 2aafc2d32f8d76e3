"""Markdown tables of the generated pages, their cells escaped so any help text fits in one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: object) -> str:
    """``text`` in one table cell: a ``|`` escaped, newlines joined; outside code spans ``<`` and ``*`` too,
    so that ``pinned/<name>/`` is not read as an HTML tag nor ``TASKBENCH_*`` as emphasis. A help text's
    ``\\[`` (escaped for rich's markup in ``--help``) is a plain ``[`` here."""
    parts = " ".join(str(text).replace("\\[", "[").split()).split("`")
    for nth in range(0, len(parts), 2):  # the even parts are outside `code`
        parts[nth] = parts[nth].replace("\\", "\\\\").replace("<", "\\<").replace("*", "\\*")
    return "`".join(parts).replace("|", "\\|")


def code(text: object) -> str:
    """``text`` as inline code (empty: nothing)."""
    shown = str(text)
    return f"`{shown}`" if shown else ""


def number(value: float) -> str:
    """A bound as written in the code: ``10000000``, ``0.001``, not ``1e+07``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A table's lines; each row's cells escaped with :func:`cell` (give code spans as ``code()``)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return lines
