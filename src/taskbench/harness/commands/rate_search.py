"""The highest sustainable rate per backend, as a Python API (``taskbench run --find-max-rate`` is the
same run from the command line; ``taskbench choose`` calls :func:`find_max_rate`).

::

    from taskbench.harness.commands.rate_search import find_max_rate
    from taskbench.harness.config import RunConfig
    from taskbench.harness.load.search import Objective

    found = find_max_rate(RunConfig(backends=("arq", "saq")), objective=Objective(max_e2e_p95_ms=500))
    found["arq"].rate, found["arq"].confidence, found["arq"].steps

Each backend runs in a fresh stack (API, workers, the run's brokers), warmed up as any case, then the
search's steps (:mod:`.search_steps`); the whole search is audited as one load. The result file is
written as for any run (``Runner.result_path()``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from taskbench.harness.commands.run import Runner
from taskbench.harness.config import RunConfig
from taskbench.harness.load.search import Objective
from taskbench.results import QueueCase, Result
from taskbench.results.load import RateSearch

__all__ = ["Objective", "find_max_rate", "search_run"]


def search_run(config: RunConfig, backends: Sequence[str] | None = None, *, objective: Objective | None = None,
               say: Callable[[str], None] = print, run_id: str | None = None) -> Result:
    """Run the search for ``backends`` (default: the config's) under ``objective`` (default: the config's
    ``rate_search``, else :class:`Objective`'s defaults); the whole :class:`~taskbench.results.Result`."""
    cfg = replace(config, backends=tuple(backends or config.backends), phases=(),
                  rate_search=objective or config.rate_search or Objective())
    return Runner(cfg, say=say, run_id=run_id).run()


def find_max_rate(config: RunConfig, backends: Sequence[str] | None = None, *, objective: Objective | None = None,
                  say: Callable[[str], None] = print, run_id: str | None = None) -> dict[str, RateSearch]:
    """Per backend: the highest rate that met the objective (``rate``; None if none did), the lowest that
    missed it (``upper``), how far to trust it (``confidence``, ``note``) and every step of the search
    (``steps``: rate offered, accepted and executed per second, backlog slope ± its standard error, e2e
    p95, errors, verdict and reasons). A backend whose case failed before the search ran is absent."""
    result = search_run(config, backends, objective=objective, say=say, run_id=run_id)
    return {case.backend: case.rate_search for case in result.cases
            if isinstance(case, QueueCase) and case.rate_search is not None}
