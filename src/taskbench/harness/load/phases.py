"""A run's load as phases (``--phases``, a scenario's ``[[phases]]``): kind, duration, offered rate.

``--phases "warmup:10s@500,steady:30s@1000,burst:10s@x1.5,pause-workers:10s,recovery:30s"``: each entry
is ``KIND:DURATION[@RATE]``. DURATION is seconds (``30``, ``30s``, ``2m``); RATE is requests per second
offered (the open model: arrivals on a schedule, whatever the answers) or ``xM``, M times the steady rate
(the last steady phase before it, else the first one). The kinds (:data:`KINDS`):

- ``warmup``: load before the measurement; its tasks are left out of every figure (their ids start
  with ``wp``, which the audit ignores as it does the warm-up's ``w``);
- ``steady``: the reference rate (a RATE is required);
- ``burst``: a multiple of the steady rate (``@x1.5``) or a rate of its own;
- ``pause-workers``: the workers' process groups are SIGSTOPped for the phase while the load goes on
  (a deploy, a frozen node): the backlog builds;
- ``stall-broker``: the broker answers nothing for the phase (as the ``stall-broker`` fault);
- ``recovery``: the load goes on; its row says how long the backlog took to come back to its level
  before the disruption.

Without ``@RATE``, a phase offers the steady rate. The phases become the driver's rate schedule, one
:class:`~taskbench.driver.load_spec.Stage` each, in one load: its arrivals are one schedule across them
(:mod:`taskbench.driver.arrivals`), so ten phases of 0.5 s at 1/s send 5 requests, as 5 s at 1/s does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskbench import units
from taskbench.driver.arrivals import stretches
from taskbench.driver.load_spec import MAX_DURATION_S, Stage

__all__ = ["KINDS", "WARMUP_IDS", "Phase", "PhaseError", "describe", "from_table", "parse", "stages"]

#: kind -> what it does (``taskbench run --help`` and the docs say the same)
KINDS: dict[str, str] = {
    "warmup": "load before the measurement, left out of every figure",
    "steady": "the reference rate (needs @RATE)",
    "burst": "a multiple of the steady rate (@xM) or a rate of its own",
    "pause-workers": "SIGSTOP every worker's process group for the phase while the load goes on",
    "stall-broker": "the broker answers nothing for the phase while the load goes on",
    "recovery": "the load goes on; says how long the backlog took to return to its earlier level",
}
#: the kinds that disrupt the stack (injected on a thread while the load runs)
DISRUPTIONS = ("pause-workers", "stall-broker")
#: the prefix of a warm-up phase's task ids (starts with the audit's ``w``: never audited)
WARMUP_IDS = "wp"
MAX_RATE = 1e6


class PhaseError(ValueError):
    """A broken phase: ``index`` is its place in the list, ``key`` the field at fault ("" for the entry)."""

    def __init__(self, index: int, key: str, message: str) -> None:
        super().__init__(message)
        self.index, self.key = index, key


@dataclass(frozen=True, kw_only=True)
class Phase:
    kind: str
    duration: float
    #: requests per second offered (resolved: a multiple is already multiplied)
    rate: float
    #: ``xM`` as given (None: an absolute rate, or the steady rate by default)
    multiple: float | None = None

    @property
    def measured(self) -> bool:
        return self.kind != "warmup"

    def describe(self) -> str:
        rate = f"x{self.multiple:g} = {self.rate:g}/s" if self.multiple is not None else f"{self.rate:g}/s"
        return f"{self.kind}:{self.duration:g}s@{rate}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "duration": self.duration, "rate": self.rate, "multiple": self.multiple}


def _duration(value: object, index: int) -> float:
    if isinstance(value, bool):
        raise PhaseError(index, "duration", f"duration must be seconds, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        try:
            seconds = units.parse_duration(str(value))
        except ValueError:
            raise PhaseError(index, "duration",
                             f"duration {value!r} is not a number of seconds (30, 30s, 2m)") from None
    if not 0 < seconds <= MAX_DURATION_S:
        raise PhaseError(index, "duration", f"duration must be in (0, {MAX_DURATION_S:.0f}] seconds, got {value!r}")
    return seconds


def _rate(value: object, index: int) -> tuple[float | None, float | None]:
    """(absolute rate, multiple): one of them, or both None (the steady rate)."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise PhaseError(index, "rate", f"rate must be a number or xM, got {value!r}")
    text = str(value).strip()
    multiple = text.startswith("x")
    try:
        number = float(text[1:] if multiple else text)
    except ValueError:
        raise PhaseError(index, "rate", f"rate {value!r} is neither requests per second (1000) nor a multiple "
                                        "of the steady rate (x1.5)") from None
    if not (0 <= number <= MAX_RATE) or number != number:
        raise PhaseError(index, "rate", f"rate must be in [0, {MAX_RATE:g}], got {value!r}")
    return (None, number) if multiple else (number, None)


def _phase(index: int, kind: object, duration: object, rate: object) -> tuple[str, float, float | None, float | None]:
    if kind not in KINDS:
        raise PhaseError(index, "kind", f"unknown phase kind {kind!r}; known: {', '.join(KINDS)}")
    assert isinstance(kind, str)
    absolute, multiple = _rate(rate, index)
    if kind == "steady" and absolute is None:
        raise PhaseError(index, "rate", "a steady phase needs its rate in requests per second: steady:30s@1000")
    if kind == "burst" and absolute is None and multiple is None:
        raise PhaseError(index, "rate", "say the burst's rate: a multiple of the steady rate (burst:10s@x1.5) "
                                        "or requests per second")
    return kind, _duration(duration, index), absolute, multiple


def _resolve(raw: Sequence[tuple[str, float, float | None, float | None]]) -> tuple[Phase, ...]:
    """Every phase with its rate: a multiple or a missing rate refers to the steady phase before it,
    else to the first steady phase of the list."""
    if not raw:
        raise PhaseError(0, "", "no phase given")
    steady_rates = [(i, r) for i, (kind, _, r, _) in enumerate(raw) if kind == "steady"]
    out = []
    for index, (kind, duration, absolute, multiple) in enumerate(raw):
        if absolute is None:
            before = [r for i, r in steady_rates if i < index]
            reference = before[-1] if before else steady_rates[0][1] if steady_rates else None
            if reference is None:
                what = f"@x{multiple:g}" if multiple is not None else "no @RATE"
                raise PhaseError(index, "rate", f"{kind} with {what} takes the steady rate, and no phase is "
                                                "steady: add steady:DURATION@RATE or give this phase @RATE")
            rate = reference * (multiple if multiple is not None else 1.0)
        else:
            rate = absolute
        if rate > MAX_RATE:
            raise PhaseError(index, "rate", f"{kind}'s rate {rate:g}/s is beyond {MAX_RATE:g}/s")
        out.append(Phase(kind=kind, duration=duration, rate=rate, multiple=multiple))
    total = sum(p.duration for p in out)
    if total > MAX_DURATION_S:
        raise PhaseError(len(out) - 1, "duration", f"the phases last {total:g} s; at most {MAX_DURATION_S:.0f} s")
    if not any(p.measured for p in out):
        raise PhaseError(0, "", "every phase is a warm-up: nothing would be measured")
    offered = [s.count for s in stretches(stages(out))]  # one schedule across the phases
    if not any(n for n, p in zip(offered, out, strict=True) if p.measured):
        raise PhaseError(0, "", f"the measured phases offer no request ({describe(out)}): give one a rate "
                                "above 0, or a longer duration")
    return tuple(out)


def parse(text: str) -> tuple[Phase, ...]:
    """``--phases``: ``KIND:DURATION[@RATE]`` entries separated by commas; a ValueError names the entry."""
    raw = []
    entries = [e.strip() for e in text.split(",")]
    try:
        for index, entry in enumerate(entries):
            kind, sep, rest = entry.partition(":")
            if not sep:
                raise PhaseError(index, "", "expected KIND:DURATION[@RATE], e.g. steady:30s@1000")
            duration, at, rate = rest.partition("@")
            raw.append(_phase(index, kind.strip(), duration, rate if at else None))
        return _resolve(raw)
    except PhaseError as exc:
        entry = entries[exc.index] if exc.index < len(entries) else ""
        raise ValueError(f"--phases: phase {exc.index + 1} ({entry!r}): {exc}") from None


def from_table(entries: Sequence[Mapping[str, Any]]) -> tuple[Phase, ...]:
    """A scenario's ``[[phases]]`` tables (``kind``, ``duration``, optional ``rate``); a
    :class:`PhaseError` says which entry and which key."""
    raw = []
    for index, entry in enumerate(entries):
        unknown = set(entry) - {"kind", "duration", "rate"}
        if unknown:
            raise PhaseError(index, sorted(unknown)[0], f"unknown key {sorted(unknown)[0]!r} in a phase; known: "
                                                        "kind, duration, rate")
        for key in ("kind", "duration"):
            if key not in entry:
                raise PhaseError(index, "", f"a phase needs {key!r}")
        raw.append(_phase(index, entry["kind"], entry["duration"], entry.get("rate")))
    return _resolve(raw)


def stages(phases: Sequence[Phase]) -> tuple[Stage, ...]:
    """The driver's rate schedule: one stage per phase, a warm-up's ids under :data:`WARMUP_IDS`."""
    return tuple(Stage(duration=p.duration, rate=p.rate, id_prefix="" if p.measured else WARMUP_IDS) for p in phases)


def describe(phases: Sequence[Phase]) -> str:
    return ", ".join(p.describe() for p in phases)
