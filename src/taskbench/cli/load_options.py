"""``taskbench run --phases`` and ``--find-max-rate``: their options, and the load they make
(:mod:`taskbench.harness.load`; docs/load.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskbench.units import Duration, Percent

if TYPE_CHECKING:
    from taskbench.harness.load.phases import Phase
    from taskbench.harness.load.search import Objective

Phases = Annotated[str | None, typer.Option(
    help="the load as phases of the open model, KIND:DURATION\\[@RATE] separated by commas, e.g. "
         "'warmup:10s@500,steady:30s@1000,burst:10s@x1.5,pause-workers:10s,recovery:30s'; kinds: warmup (in no "
         "figure), steady, burst (@xM: M times the steady rate), pause-workers (SIGSTOP every worker), "
         "stall-broker, recovery; without @RATE the steady rate; a row of figures per phase")]
FindMaxRate = Annotated[bool, typer.Option(
    help="search each backend's highest sustainable rate: a ramp of open-model steps, then a bisection, against "
         "the objective (--max-e2e-p95, --max-backlog-growth); the steps and the rate with its confidence")]
MaxE2eP95 = Annotated[float, typer.Option(
    help="with --find-max-rate: the end-to-end p95 a sustainable rate keeps, ms",
    **Duration(0, 3_600_000, "ms").settings())]
MaxBacklogGrowth = Annotated[float, typer.Option(
    help="with --find-max-rate: the backlog may grow by at most this % of the offered rate per second",
    **Percent(0, 100, above=True).settings())]
StepDuration = Annotated[float, typer.Option(
    help="with --find-max-rate: seconds each step offers its rate (its first 3 s settle, the rest is fitted)",
    **Duration(3, 600).settings())]
StartRate = Annotated[float, typer.Option(help="with --find-max-rate: the ramp's first rate, requests per second")]


def load_modes(phases: str | None, find_max_rate: bool, load: dict[str, Any], *, max_e2e_p95: float,
               max_backlog_growth: float, step_duration: float,
               start_rate: float) -> tuple[tuple[Phase, ...], Objective | None]:
    """The run's phases and search objective from the options; a ValueError (one line) for what does not
    go together (the phases and the search decide the load's rate and length themselves)."""
    from taskbench.harness.load import phases as load_phases
    from taskbench.harness.load.search import Objective

    given = [f"--{name}" for name in ("rate", "requests", "duration") if load.get(name) is not None]
    mode = "--phases" if phases is not None else "--find-max-rate" if find_max_rate else None
    if mode is not None and given:
        raise ValueError(f"{mode} sets the load's rate and length: leave out {', '.join(given)}")
    if mode is not None and load.get("model") not in (None, "closed", "open"):
        raise ValueError(f"{mode} runs the open model: leave out --model {load.get('model')}")
    found = load_phases.parse(phases) if phases is not None else ()
    objective = None
    if find_max_rate:
        objective = Objective(max_e2e_p95_ms=max_e2e_p95, max_growth_pct=max_backlog_growth, step_s=step_duration,
                              start_rate=start_rate)
    return found, objective
