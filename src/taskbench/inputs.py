"""What a user hands the tool: a file read with a bound, and JSON text nested no deeper than a limit.

Every file a command reads because a user named it (a payload, a result, a scenario, a collector's log,
a parity.json) is read by :func:`read_bytes`: a regular file only (a FIFO would wait for a writer,
``/dev/zero`` never ends), and at most its limit plus one byte, so a huge file costs that and no more.
:func:`too_deep` finds JSON nested deeper than a limit before a parser recurses into it.

Neutral: imports nothing of taskbench.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Final

__all__ = ["InputError", "TooLargeError", "read_bytes", "read_text", "too_deep"]

#: what a file that is not a regular one is, for the error
_KINDS: Final = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
#: a JSON string, escapes included: its brackets are text, not nesting
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


class InputError(ValueError):
    """A file that cannot be read as asked: the reason in one line, without the file's name (the caller
    words the error with it)."""


class TooLargeError(InputError):
    """The file holds more than the limit: the caller may say what the limit is for."""


def read_bytes(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; an :class:`InputError` for a file
    that is missing, unreadable, not a regular file or larger than ``limit``."""
    try:
        # O_NONBLOCK: opening a FIFO without a writer would wait for one; a regular file reads as ever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InputError(getattr(exc, "strerror", None) or str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise InputError(f"not a regular file ({kind})")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if size > limit:
        raise TooLargeError(f"larger than {limit:,} bytes")
    return b"".join(chunks)


def read_text(path: str | Path, limit: int) -> str:
    """:func:`read_bytes` as UTF-8 text; an :class:`InputError` naming the first byte that is not."""
    raw = read_bytes(path, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (line {line}, byte {exc.start}: {exc.reason})") from None


def too_deep(text: str | bytes, limit: int) -> bool:
    """Whether the JSON ``text`` nests arrays and objects deeper than ``limit``, without parsing it.

    Python's ``json`` recurses once a level and raises RecursionError near 1,000 levels. This counts
    without recursion, in C-speed passes (one per level, and none when the text holds at most ``limit``
    brackets): the strings out, the brackets kept, then each innermost pair removed at each pass."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    shape = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS).translate(bytes.maketrans(b"{}", b"[]"))
    for _ in range(limit):
        left = shape.replace(b"[]", b"")
        if len(left) == len(shape):  # unbalanced: not JSON, which its parser says
            return False
        shape = left
        if not shape:
            return False
    # what is left after ``limit`` passes is deeper, unless it is only unbalanced brackets
    return shape.replace(b"[]", b"") != shape
