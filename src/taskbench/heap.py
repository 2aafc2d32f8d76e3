"""``gc.freeze()`` once a process has started: the collector stops rescanning what start-up built.

CPython's full collection walks every tracked object. A served request's objects that live across a
few turns of the event loop (100 requests in flight) survive the young generations, so under load
full collections come every few hundred requests, and each one walks the whole start-up heap
(FastAPI's routes and models, the libraries' modules: ~85,000 objects, 35-50 ms on the 2-core
development machine). ``gc.freeze()`` moves the start-up heap into the permanent generation, which
collections skip; what requests allocate is collected as before. It is the standard library's own
remedy (see the ``gc`` module's documentation) and changes nothing a request sees. The cost it
removes is taskbench's more than the library's (taskbench's processes import more), so it is on by
default (``TASKBENCH_GC_FREEZE``); docs/benchmarks.md shows the floors with and without it.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("taskbench.heap")


def freeze(enabled: bool = True) -> None:
    """Collect once, then freeze every object alive now (call it when start-up is over)."""
    if not enabled:
        return
    gc.collect()
    gc.freeze()
    log.debug("gc: %d objects frozen", gc.get_freeze_count())
