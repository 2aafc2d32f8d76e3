"""CPU pinning of this process (and so of the driver processes it spawns) for a load phase."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def pinned(cpus: list[int] | None) -> Iterator[None]:
    """Pin this process (and so the driver processes it spawns) for the load phase."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
