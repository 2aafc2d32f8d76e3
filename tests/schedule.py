"""How pytest-xdist hands the suite to its test processes: the longest work first.

xdist's ``loadscope`` keeps a module's tests (a class's) in one process, so a module-scoped fixture starts
once; it hands the modules out in the order of their number of tests. Most of this suite's time is spent
waiting on processes it starts (a redelivery timeout, a drain), in a few modules of few tests, so a long
module handed out last kept one process busy while the others had finished. Here:

- a scope's cost is its tests' seconds in ``tests/durations.json`` (written by ``./run-tests
  --store-durations``; a scope not in it counts a second a test), and the costliest scope left goes next
  (longest processing time first);
- the conformance suite's scope is one backend case (its module-scoped parameter), not the whole module:
  each case starts its own stacks anyway, so the cases can run in different processes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

DURATIONS = Path(__file__).with_name("durations.json")

#: modules whose tests are grouped by their module-scoped parameter (the part of the test id in brackets)
BY_PARAMETER = ("tests/backends/test_conformance.py",)


def scope_of(nodeid: str) -> str:
    """A test's scope: its module or class, or its module and parameter for the modules of BY_PARAMETER."""
    scope = nodeid.rsplit("::", 1)[0]
    if scope in BY_PARAMETER and nodeid.endswith("]") and "[" in nodeid:
        return scope + "[" + nodeid.rsplit("[", 1)[1]
    return scope


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


class LongestFirst(LoadScopeScheduling):
    """``loadscope`` with the scopes above, the costliest one handed out first."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._seconds = read_durations()

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def _cost(self, scope: str, tests: dict[str, bool]) -> float:
        return self._seconds.get(scope, float(len(tests)))

    def _assign_work_unit(self, node: Any) -> None:
        costliest = max(self.workqueue, key=lambda scope: self._cost(scope, self.workqueue[scope]))
        self.workqueue.move_to_end(costliest, last=False)
        super()._assign_work_unit(node)


class DurationRecorder:
    """With ``--store-durations``: each scope's seconds (setup, call and teardown of its tests) into
    DURATIONS, merged with the scopes this run did not reach."""

    def __init__(self) -> None:
        self.enabled = False
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def add(self, nodeid: str, duration: float) -> None:
        self.seconds[scope_of(nodeid)] += duration

    def write(self, path: Path = DURATIONS) -> None:
        merged = {**read_durations(path), **{k: round(v, 1) for k, v in self.seconds.items()}}
        path.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
