"""The one way taskbench writes a file a user reads (result.json, report.html, index.html, a compare page).

A results folder may come from an untarred archive, so any name in it may already be a symbolic link.
:func:`write_atomic` never opens the final name: it writes a new file of its own beside it (created
exclusively, never through a link) and renames it over the name. A link planted there is replaced, its
target left alone, and a reader (or an interrupted run) never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_atomic"]

#: O_NOFOLLOW where the platform has it: the temporary name is fresh anyway, this is belt and braces
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def write_atomic(path: Path, data: str | bytes, *, mode: int = 0o666) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically and return ``path``.

    The temporary file is ``.<name>.<random>.tmp`` in the same folder (a rename never crosses file
    systems); ``mode`` passes the process's umask as ``open`` does (``0o600`` for a file holding a
    secret). An existing folder at ``path`` is an ``OSError``, as ``open`` gives; the temporary file
    is removed whatever fails.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, _CREATE, mode)
            break
        except FileExistsError:  # another writer's name, or a planted one: draw again
            continue
    else:
        raise FileExistsError(f"{path.parent}: no fresh temporary name for {path.name}")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path
