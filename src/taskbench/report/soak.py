"""A soak's figures in every rendering: one line per judged series for the terminal and the page, and the
page's plots of the series over time, each judged series with its fitted line over the part it was fitted on.

Every word of a line comes from the record: the slope and interval, the bound and how it was made, and
whether the slope is beyond it (``Growth.drift``, decided by the harness).
"""

from __future__ import annotations

import math

from taskbench.report import plots
from taskbench.results.soak import Growth, SoakRecord

#: the judged series first, then those shown only
ORDER = ("tasks_mb", "e2e_p95_ms", "backlog", "broker_mb", "broker_keys", "e2e_p50_ms")
LABELS = {
    "tasks_mb": "task processes' memory", "e2e_p95_ms": "e2e p95", "backlog": "backlog",
    "broker_mb": "broker memory", "broker_keys": "broker keys", "e2e_p50_ms": "e2e median",
}


def _num(value: float) -> str:
    return f"{value:+.3g}" if abs(value) < 1000 else f"{value:+,.0f}"


def growth_text(name: str, found: Growth) -> str:
    """``task processes' memory +159 MB/h (95 % 151..164), bound 20 MB/h: DRIFT``."""
    text = (f"{LABELS.get(name, name)} {_num(found.slope_per_h)} {found.unit}/h "
            f"(95 % {found.low_per_h:.3g}..{found.high_per_h:.3g}) at {found.level:.4g} {found.unit}")
    if found.bound_per_h is None:
        return text + ", not judged"
    return text + f", bound {found.bound_per_h:.3g} {found.unit}/h: " + ("DRIFT" if found.drift else "ok")


def summary_lines(record: SoakRecord) -> list[str]:
    """The soak's head line, then one line per series in :data:`ORDER` that was fitted."""
    minutes = record.duration_s / 60
    head = (f"soak {minutes:.3g} min at {record.rate:g}/s ({record.rate_source}), points every "
            f"{record.interval_s:g} s; " + ("drift: " + str(len(record.drift)) if record.drift else "nothing drifted"))
    lines = [head]
    for name in ORDER:
        if name in record.growth:
            lines.append(growth_text(name, record.growth[name]))
    if record.broker_source:
        lines.append(f"broker figures: {record.broker_source}")
    return lines


def _values(values: list[float | None]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _fit_line(record: SoakRecord, name: str, color: str) -> plots.Line | None:
    found = record.growth.get(name)
    if found is None:
        return None
    middle = (found.from_s + found.to_s) / 2
    # many points: the timeline draws steps, and a line of 60 steps reads as the slope it is
    xs = [found.from_s + (found.to_s - found.from_s) * i / 60 for i in range(61)]
    ys = [found.level + found.slope_per_h * (x - middle) / 3600 for x in xs]
    return plots.Line(f"fit {_num(found.slope_per_h)} {found.unit}/h", xs, ys, style="--", color=color)


def soak_plots(record: SoakRecord) -> list[str]:
    """Memory, CPU, backlog and broker keys, and end-to-end latency over the soak (captions: the growth)."""
    from taskbench.report.page import figure

    t = record.t_s
    out: list[str] = []

    def plot(title: str, names: list[str], unit: str, fitted: str | None = None) -> None:
        lines = [plots.Line(name.split(":", 1)[-1] if ":" in name else LABELS.get(name, name), t,
                            _values(record.series[name])) for name in names if name in record.series]
        if not lines:
            return
        if fitted is not None:
            fit = _fit_line(record, fitted, "#d62728")
            if fit is not None:
                lines.append(fit)
        caption = "; ".join(growth_text(n, record.growth[n]) for n in names if n in record.growth
                            and not n.startswith(("mem:", "cpu:")))
        out.append(figure(plots.timeline(title, lines, unit), caption))

    memory = [f"mem:{p}" for p in record.processes]
    plot("Memory of the task processes (PSS)", [*memory, "tasks_mb"] if len(memory) > 1 else ["tasks_mb"],
         "MB", fitted="tasks_mb")
    plot("CPU of the task processes", [f"cpu:{p}" for p in record.processes], "% of a core")
    plot("End-to-end latency over the soak", ["e2e_p50_ms", "e2e_p95_ms"], "ms", fitted="e2e_p95_ms")
    plot("Backlog (enqueued, not yet run)", ["backlog"], "tasks", fitted="backlog")
    plot("Broker memory", ["broker_mb"], "MB", fitted="broker_mb")
    plot("Broker keys (rows)", ["broker_keys"], "keys")
    return out
