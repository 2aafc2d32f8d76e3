"""The most each of a few counts reached over a stretch (the load): read now and then on a thread.

Two users: :meth:`taskbench.harness.processes.stack.Stack.measure` (the processes of each component's
tree) and the HTTP scenarios (the TCP connections established to the server)::

    with Peaks(lambda: {"server": established(port)}, interval=0.5) as connections:
        run_load(...)
    connections.most  # {"server": 10000}
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from types import TracebackType


class Peaks:
    """``read`` (name -> its count now) at the start, every ``interval`` s on a thread of its own and at the
    end; ``most`` is the highest count each name reached. A read that raises, or a count of None, is a
    missing sample: the figures stand beside the run, they never stop it."""

    def __init__(self, read: Callable[[], Mapping[str, int | None]], *, interval: float, name: str) -> None:
        self._read = read
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"taskbench-{name}", daemon=True)
        self.most: dict[str, int] = {}

    def _sample(self) -> None:
        with contextlib.suppress(Exception):
            for key, count in self._read().items():
                if count is not None:
                    self.most[key] = max(count, self.most.get(key, 0))

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> Peaks:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
