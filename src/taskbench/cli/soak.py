"""``taskbench run --soak [DURATION]``: the load becomes one long open-model stretch, sampled and judged for
drift (:mod:`taskbench.harness.soak`); its options and the bare ``--soak``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskbench.units import Percent

if TYPE_CHECKING:
    from taskbench.harness.config import RunConfig
    from taskbench.harness.soak.plan import SoakSpec

#: options that may be given without their value, and the value they then take
OPTIONAL_VALUES = {"--soak": "30m"}
#: a soak's rate source until the search has found its rate
SEARCHED = "the search"

Soak = Annotated[str | None, typer.Option(
    help="a soak: one steady open load for DURATION (30m, 90s, 2h; `--soak` alone: 30m) at --rate (without it: "
         "--soak-share of the lowest sustainable rate, searched first), sampling "
         "the task processes' memory and CPU, the broker, the backlog and the end-to-end latency, each with "
         "its growth per hour; a drift beyond its bound fails the case (docs/soak.md)")]
SoakShare = Annotated[float, typer.Option(
    help="with --soak and no --rate: the percentage of the sustainable rate offered",
    **Percent(0, 100, above=True).settings())]
SoakMemoryBound = Annotated[float, typer.Option(
    help="with --soak: the task processes' memory may grow this many MB per hour")]
SoakLatencyBound = Annotated[float, typer.Option(
    help="with --soak: the end-to-end p95 may grow this percentage of its level per hour (and 50 ms/h)",
    **Percent(0, 1000, above=True).settings())]


def with_optional_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of an option of :data:`OPTIONAL_VALUES` given alone filled in (``--soak``
    last, or followed by another option): click takes no option whose value may be left out."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg == "--":
            out += argv[i + 1:]
            break
        if arg in OPTIONAL_VALUES and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(OPTIONAL_VALUES[arg])
    return out


def soak_load(soak: str | None, load: dict[str, Any], *, share: float, memory_bound: float,
              latency_bound: float) -> tuple[dict[str, Any], SoakSpec | None]:
    """The run's load options and its soak: ``--soak`` makes the load open at ``--rate`` for the soak's
    duration (``share`` and ``latency_bound`` in percent). A ValueError (one line) for what does not go
    together."""
    if soak is None:
        return load, None
    from taskbench.harness.soak.plan import SoakSpec, parse_duration

    duration = parse_duration(soak)
    if load.get("requests") is not None or load.get("duration") is not None:
        raise ValueError("--soak sets the load's length: leave out --requests and --duration")
    if load.get("model") not in (None, "closed", "open"):
        raise ValueError("--soak runs the open model at --rate: leave out --model ramp")
    searched = load.get("rate") is None  # the rate comes from the search (at_sustainable_rate): 1/s meanwhile
    spec = SoakSpec(duration_s=duration, fraction=share / 100, rate_source=SEARCHED if searched else "--rate",
                    memory_mb_per_h=memory_bound, latency_share_per_h=latency_bound / 100)
    return {**load, "model": "open", "duration": duration, "rate": 1.0 if searched else load["rate"]}, spec


def at_sustainable_rate(config: RunConfig, say: Callable[[str], None]) -> RunConfig:
    """A soak without ``--rate``: the search for each backend's highest sustainable rate first
    (:func:`taskbench.harness.commands.rate_search.find_max_rate`, its default objective), then one load for
    every backend at ``--soak-share`` of the lowest rate found. A ValueError when a backend has none."""
    from taskbench.harness.commands.rate_search import find_max_rate

    assert config.soak is not None
    found = find_max_rate(replace(config, soak=None), say=say)
    rates = {name: found[name].rate for name in config.backends if name in found and found[name].rate}
    missing = [name for name in config.backends if name not in rates]
    if missing:
        raise ValueError(f"no sustainable rate found for {', '.join(missing)} (see the search's result): give --rate")
    lowest = min(rates, key=lambda name: rates[name] or 0.0)
    rate = config.soak.fraction * (rates[lowest] or 0.0)
    listed = ", ".join(f"{name} {value:.3g}/s" for name, value in rates.items())
    source = f"{100 * config.soak.fraction:g} % of the lowest sustainable rate ({listed})"
    say(f"soak at {rate:.3g}/s: {source}")
    return replace(config, load=replace(config.load, rate=rate), soak=replace(config.soak, rate_source=source))
