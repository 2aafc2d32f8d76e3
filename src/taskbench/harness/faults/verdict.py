"""The verdict of a fault case: its figures against the bounds of its backend's promise.

Each figure a fault may cost (tasks lost, tasks run twice, executions that never came back) is allowed
by the promise's bounds that cover it (:mod:`taskbench.backends.bounds`, resolved for the case in
:class:`~taskbench.results.Promise`): the sum of their limits, any number where one has none, nothing
where none does. A figure inside it is a line of ``within`` (the case stays ``ok``, the figure and the
bound it used are shown); beyond it, a line of ``broken`` that names the figure, the limit and every
bound that allowed part of it, with its source. So the exit status means one thing: a library broke the
promise taskbench states for it, not that a kill landed in a window the library leaves open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from taskbench.backends.bounds import DUPLICATED, LOST, NO_RECOVERY
from taskbench.results import Promise, PromiseBound


@dataclass
class Verdict:
    broken: list[str] = field(default_factory=list)
    within: list[str] = field(default_factory=list)
    #: executions never came back and no bound allows it (the caller words it: it knows the rates)
    unrecovered: bool = False


def _limit(bounds: list[PromiseBound], kills: int) -> int | None:
    total = 0
    for bound in bounds:
        limit = bound.limit(kills)
        if limit is None:
            return None
        total += limit
    return total


def _named(bounds: list[PromiseBound], kills: int) -> str:
    parts = []
    for bound in bounds:
        limit = bound.limit(kills)
        many = "any number" if limit is None else f"up to {limit}" + (f" ({bound.tasks} per kill, {kills} "
                                                                       f"kill(s))" if bound.per_kill else "")
        parts.append(f"{many}: {bound.text} [source: {bound.source}]")
    return "; ".join(parts)


def judge(promise: Promise, *, lost: int, duplicated: int, recovered: bool | None = None, kills: int = 1,
          cause: str = "") -> Verdict:
    """``lost``, ``duplicated`` and ``recovered`` (False: never came back) of a case against ``promise``
    (``kills``: how many times the fault struck; ``cause``: a fault the harness did not inject)."""
    verdict = Verdict()
    for figure, count, what in ((LOST, lost, "accepted task(s) lost"), (DUPLICATED, duplicated, "task(s) ran twice")):
        if not count:
            continue
        bounds = [b for b in promise.bounds if b.figure == figure]
        limit = _limit(bounds, kills)
        if limit is None or count <= limit:
            verdict.within.append(f"{count} {what}{cause}: within the bound of {promise.text}: {_named(bounds, kills)}")
        elif not bounds:
            verdict.broken.append(f"{count} {what}{cause}, which {promise.text} promises "
                                  f"{'to keep' if figure == LOST else 'not to do'} (no bound allows any)")
        else:
            verdict.broken.append(f"{count} {what}{cause}, beyond the bound of {promise.text} (at most {limit}): "
                                  f"{_named(bounds, kills)}")
    if recovered is False:
        bounds = [b for b in promise.bounds if b.figure == NO_RECOVERY]
        if bounds:
            verdict.within.append(f"no recovery{cause}: within the bound of {promise.text}: {_named(bounds, kills)}")
        else:
            verdict.unrecovered = True
    return verdict
