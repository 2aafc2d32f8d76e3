"""The HTML report's plots: matplotlib figures written as inline SVG (no file, no network, no JS runtime).

Every function returns one ``<svg>`` element as text. The Figure API is used without pyplot, so no
GUI backend and no global figure state is involved; text stays text in the SVG (selectable, small).
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # never a GUI backend, whatever the environment says

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter

from taskbench.histogram import Histogram

matplotlib.rcParams.update({
    "svg.fonttype": "none",  # text as <text>, not paths
    "svg.hashsalt": "taskbench",  # stable ids: the same result gives the same file
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
})

WIDTH, HEIGHT = 6.4, 2.8  # inches; the page scales the SVG to its column
#: the comparison spans the page: twice a plot's width keeps its text the size of theirs
WIDE = 12.0
#: characters per line of a bar's label
LABEL_WIDTH = 42
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Line:
    label: str
    x: Sequence[float]
    y: Sequence[float]
    style: str = "-"
    color: str | None = None


@dataclass
class Mark:
    """A vertical line on a timeline (a fault, a recovery), with its label."""

    x: float
    label: str
    color: str = "#d62728"
    style: str = "--"


@dataclass
class Band:
    """A stretch of a timeline (a phase of ``--phases``), shaded, its label upright at its left edge."""

    start: float
    end: float
    label: str
    color: str = "#1f77b4"
    hatch: str | None = None


@dataclass
class Bar:
    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    article: float | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class Rates:
    """A case of the comparison: tasks per second accepted at the API and executed by the workers, and
    the end-to-end p95 (ms); None where the case has no such figure."""

    label: str
    accepted: float | None
    executed: float | None
    e2e_p95: float | None


def _plain() -> FuncFormatter:
    """A log axis's ticks as numbers (100, 1,000), not powers of ten (one per axis: it is bound to it)."""
    return FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}")


def _svg(fig: Figure, css_class: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    start = text.index("<svg")
    svg = text[start:]
    # scale with the page: drop the fixed size, keep the viewBox
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', rf'<svg\1 class="{css_class}"', svg, count=1)
    return compact(svg)


_FONT = re.compile(r"font-family: ([^;\"]*);? ?")
_GEOMETRY = re.compile(r' (d|x|y|x1|x2|y1|y2|viewBox|transform|points)="([^"]*)"')
_DIGITS = re.compile(r"(\d\.\d)\d+")
_BARE_GROUP = re.compile(r"<g>\n(<[^<>]*/>|<text[^<>]*>[^<>]*</text>|<g>\n)\n?</g>\n?")


def compact(svg: str) -> str:
    """The same drawing in a third of the text (a fault run's page of a hundred cases was 5 MB):
    no metadata, the font family stated once instead of on every label, no ids on groups (nothing
    refers to them), coordinates to a tenth of a point (the page draws them at under one pixel per
    point), path data on one line; labels' text is left as it is."""
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    family = _FONT.search(svg)
    if family:
        svg = _FONT.sub("", svg)
        svg = svg.replace("<style type=\"text/css\">", f"<style type=\"text/css\">text{{font-family: {family[1]}}}\n",
                          1)
    svg = svg.replace(' transform="rotate(-0 ', ' data-r="').replace(' style=""', "")
    svg = re.sub(r' data-r="[^"]*"', "", svg)
    svg = re.sub(r'<g id="(?!tb-)[^"]*">', "<g>", svg)  # "tb-": ids the report set (gid) to name a part
    svg = _GEOMETRY.sub(lambda m: " {}=\"{}\"".format(m[1], _DIGITS.sub(r"\1", " ".join(m[2].split()))), svg)
    svg = re.sub(r"\n\s+", "\n", svg)
    while True:  # a bare group around one element (matplotlib's artist wrappers): the element alone
        unwrapped = _BARE_GROUP.sub(r"\1", svg)
        if unwrapped == svg:
            return svg
        svg = unwrapped


def _figure(height: float = HEIGHT) -> Figure:
    return Figure(figsize=(WIDTH, height), layout="constrained")


def timeline(title: str, lines: list[Line], ylabel: str, *, marks: Sequence[Mark] = (),
             right: list[Line] | None = None, right_label: str = "", bands: Sequence[Band] = (),
             ymax: float | None = None) -> str:
    """Values per second over the run; ``marks`` are vertical lines (a fault and its recovery), ``bands``
    shaded stretches (the phases of a load), each labelled at its left edge; ``ymax``: the top of the axis
    (the same for every case of a page; None: this plot's own)."""
    fig = _figure()
    ax = fig.add_subplot()
    for band in bands:
        ax.axvspan(band.start, band.end, color=band.color, alpha=0.15, hatch=band.hatch, linewidth=0)
        ax.annotate(band.label, (band.start, 0.98), xycoords=("data", "axes fraction"), xytext=(2, 0),
                    textcoords="offset points", ha="left", va="top", rotation=90, fontsize=7, color=band.color)
    for i, line in enumerate(lines):
        ax.plot(line.x, line.y, line.style, label=line.label, color=line.color or COLORS[i % len(COLORS)],
                linewidth=1.5, drawstyle="steps-post" if len(line.x) > 1 else "default", marker="." if
                len(line.x) <= 2 else None)
    ax.set_title(title, loc="left")
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0, top=ymax)
    ax.set_xlim(left=0)
    for mark in marks:
        ax.axvline(mark.x, color=mark.color, linestyle=mark.style, linewidth=1.2, label=mark.label)
    if marks:
        ax.set_xlim(right=max(ax.get_xlim()[1], max(m.x for m in marks) * 1.05 + 0.1))
    handles, labels = ax.get_legend_handles_labels()
    if right:
        ax2 = ax.twinx()
        ax2.grid(False)
        for line in right:
            ax2.plot(line.x, line.y, ":", label=line.label, color=line.color or "#7f7f7f", drawstyle="steps-post")
        ax2.set_ylabel(right_label)
        ax2.set_ylim(bottom=0)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if labels:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.12 if right else 1.0, 1.0), fontsize=8)
    return _svg(fig, "plot timeline")


# the percentile axis of the classic HDR plot: x = 1 / (1 - q), labelled as percentiles
_NINES = [0.0, 90.0, 99.0, 99.9, 99.99, 99.999]


def _nines(q: float) -> float:
    return 1.0 / max(1e-6, 1.0 - q / 100.0)


def percentiles(title: str, histograms: list[tuple[str, Histogram]], unit: str = "ms", *,
                ymax: float | None = None) -> str:
    """Latency by percentile (the HdrHistogram plot): where the tail bends is where the trouble is."""
    fig = _figure()
    ax = fig.add_subplot()
    top = 99.9
    for i, (label, hist) in enumerate(histograms):
        if hist.count == 0:
            continue
        # up to the percentile that still has one observation beyond it
        last = 100.0 * (1.0 - 1.0 / hist.count) if hist.count > 1 else 0.0
        top = max(top, min(99.999, last))
        qs = [100.0 * (1.0 - 10 ** (-k / 20)) for k in range(0, 101)]
        qs = [q for q in qs if q <= max(last, 0.0)] or [0.0]
        xs = [_nines(q) for q in qs] + [_nines(min(99.9999, last + (100 - last) / 2))]
        ys = [hist.percentile(q) / 1000.0 for q in qs] + [hist.max / 1000.0]
        ax.plot(xs, ys, label=label, color=COLORS[i % len(COLORS)], linewidth=1.5)
    ax.set_xscale("log")
    ticks = [q for q in _NINES if q <= top + 1e-9]
    ax.xaxis.set_major_locator(FixedLocator([_nines(q) for q in ticks]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{100.0 * (1.0 - 1.0 / x):g}%"))
    ax.xaxis.set_minor_locator(FixedLocator([]))
    ax.set_xlim(1.0, _nines(top) * 2)
    ax.set_ylim(bottom=0, top=ymax)
    ax.set_title(title, loc="left")
    ax.set_xlabel("percentile")
    ax.set_ylabel(unit)
    if len(histograms) > 1 or histograms:
        ax.legend(loc="upper left", fontsize=8)
    return _svg(fig, "plot percentiles")


def regroup(hist: Histogram, low: float, high: float, bins: int = 40) -> list[int]:
    """The histogram's observations in ``bins`` log-spaced bins from ``low`` to ``high`` (its unit, µs);
    those outside in the first or the last bin."""
    counts = [0] * bins
    for b_low, b_high, count in hist.buckets():
        mid = max(low, min(high * 0.999, (b_low + b_high) / 2))
        counts[min(bins - 1, int(bins * math.log(mid / low) / math.log(high / low)))] += count
    return counts


def span_of(histograms: Sequence[Histogram]) -> tuple[float, float]:
    """The value range a distribution of these (non-empty) histograms covers, in their unit."""
    low = max(1.0, min(h.min for h in histograms))
    return low, max(low * 1.01, max(h.max for h in histograms) + 1)


def distribution(title: str, histograms: list[tuple[str, Histogram]], unit: str = "ms", bins: int = 40, *,
                 span: tuple[float, float] | None = None, ymax: float | None = None) -> str:
    """How many observations at each value, on a log axis (the HDR buckets, regrouped); ``span``: the
    value range of the axis, in the histograms' unit (µs; None: :func:`span_of` these histograms)."""
    fig = _figure()
    ax = fig.add_subplot()
    found = [h for _, h in histograms if h.count]
    if found:
        low, high = span or span_of(found)
        edges = [low * (high / low) ** (i / bins) for i in range(bins + 1)]
        for i, (label, hist) in enumerate(histograms):
            ax.stairs(regroup(hist, low, high, bins), [e / 1000.0 for e in edges], label=label,
                      color=COLORS[i % len(COLORS)], fill=len(histograms) == 1,
                      alpha=0.6 if len(histograms) == 1 else 1.0)
        ax.set_xscale("log")
        ax.set_xlim(low / 1000.0, high / 1000.0)
        ax.xaxis.set_major_formatter(_plain())
    ax.set_ylim(bottom=0, top=ymax)
    ax.set_title(title, loc="left")
    ax.set_xlabel(unit + " (log scale)")
    ax.set_ylabel("tasks")
    if len(histograms) > 1:  # one histogram's label would only repeat the axis's (and hide its tallest bar)
        ax.legend(loc="upper right", fontsize=8)
    return _svg(fig, "plot distribution")


def bars(title: str, items: list[Bar], ylabel: str, *, article_label: str = "article") -> str:
    """One bar per case, the spread of repeated runs as an error bar, the article's figure beside it."""
    # a case's label wrapped to a third of the width: long labels (a scenario's are up to ~120 characters)
    # would otherwise leave the bars no room at all
    labels = [textwrap.fill(b.label, LABEL_WIDTH) for b in items]
    lines = sum(label.count("\n") + 1 for label in labels)
    per_line = 0.17
    height = 1.0 + max((0.5 if any(b.article is not None for b in items) else 0.3) * len(items), per_line * lines)
    fig = _figure(height)
    ax = fig.add_subplot()
    with_article = any(b.article is not None for b in items)
    size = 0.4 if with_article else 0.7
    ys = list(range(len(items)))
    ours = [b.value or 0.0 for b in items]
    err_low = [max(0.0, (b.value or 0.0) - b.low) if b.low is not None else 0.0 for b in items]
    err_high = [max(0.0, b.high - (b.value or 0.0)) if b.high is not None else 0.0 for b in items]
    offset = size / 2 if with_article else 0.0
    ax.barh([y - offset for y in ys], ours, height=size, color=COLORS[0], label="ours",
            xerr=[err_low, err_high], error_kw={"ecolor": "#333", "capsize": 3, "linewidth": 1})
    if with_article:
        ax.barh([y + offset for y in ys], [b.article or 0.0 for b in items], height=size, color="#bbbbbb",
                label=article_label, hatch="//", edgecolor="#888")
    for y, b in zip(ys, items, strict=True):
        if b.value is not None:
            ax.annotate(f"{b.value:,.0f}" if b.value >= 10 else f"{b.value:.1f}", (b.high or b.value, y - offset),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(ys, labels, fontsize=7 if lines > len(items) else None)
    ax.invert_yaxis()
    ax.set_xlabel(ylabel)
    ax.set_title(title, loc="left")
    ax.grid(axis="y", visible=False)
    if with_article or any(b.low is not None for b in items):
        ax.legend(loc="lower right", fontsize=8)
    return _svg(fig, "plot bars")


def comparison(items: list[Rates], *, log_spread: float = 10.0) -> str:
    """The cases side by side on shared axes: per case the tasks accepted per second at the API beside those
    the workers executed (one axis for every bar), and the end-to-end p95 (one axis; log scale once the
    highest is ``log_spread`` times the lowest). The parts carry ids the page's tests read: ``tb-rates``
    and ``tb-e2e`` (the two axes), ``tb-case-N-accepted``, ``-executed`` and ``-e2e`` (case N's bars)."""
    labels = [textwrap.fill(item.label, 30) for item in items]
    lines = sum(label.count("\n") + 1 for label in labels)
    fig = Figure(figsize=(WIDE, 0.95 + max(0.42 * len(items), 0.17 * lines)), layout="constrained")
    rates, e2e = fig.subplots(1, 2, sharey=True, width_ratios=(2.3, 1))
    rates.set_gid("tb-rates")
    e2e.set_gid("tb-e2e")
    size = 0.4
    top = max([v for i in items for v in (i.accepted, i.executed) if v is not None], default=1.0) or 1.0
    kinds = (("accepted", COLORS[0], "accepted/s at the API"), ("executed", COLORS[2], "executed/s by the workers"))
    for n, item in enumerate(items):
        for offset, value, (key, color, label) in zip((-size / 2, size / 2), (item.accepted, item.executed), kinds,
                                                      strict=True):
            bar = rates.barh(n + offset, value or 0.0, height=size, color=color, label=label if n == 0 else None)
            bar.patches[0].set_gid(f"tb-case-{n}-{key}")
            rates.annotate("–" if value is None else f"{value:,.0f}/s", (value or 0.0, n + offset), xytext=(3, 0),
                           textcoords="offset points", va="center", fontsize=8)
    rates.set_yticks(range(len(items)), labels)
    rates.invert_yaxis()
    rates.set_xlim(0, top * 1.15)
    rates.set_xlabel("tasks per second")
    rates.set_title("Tasks per second", loc="left")
    rates.grid(axis="y", visible=False)
    # above the bars, beside the title: inside the axes it would hide the longest bar's figure
    rates.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=2, fontsize=8, borderaxespad=0.2)
    _e2e_bars(e2e, items, log_spread)
    return _svg(fig, "plot comparison")


def _e2e_bars(ax: Axes, items: list[Rates], log_spread: float) -> None:
    """The comparison's second axis: each case's end-to-end p95, log scale past a wide spread."""
    found = [i.e2e_p95 for i in items if i.e2e_p95 is not None and i.e2e_p95 > 0]
    low, high = min(found, default=1.0), max(found, default=1.0)
    log = high >= log_spread * low
    base = 10 ** math.floor(math.log10(low)) if log else 0.0
    for n, item in enumerate(items):
        value = item.e2e_p95
        bar = ax.barh(n, max(0.0, (value or base) - base), left=base, height=0.5, color=COLORS[1])
        bar.patches[0].set_gid(f"tb-case-{n}-e2e")
        ax.annotate("–" if value is None else f"{value:,.0f} ms", (value or base, n), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=8)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(base, high * 4)
    else:
        ax.set_xlim(0, high * 1.3)
    ax.xaxis.set_major_formatter(_plain())
    ax.set_xlabel("ms" + (" (log scale)" if log else ""))
    ax.set_title("End-to-end p95 (request → task finished)", loc="left")
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="y", left=False)


def cpu(title: str, utilizations: list[float], *, threshold: float = 0.9) -> str:
    """The load driver's processes: share of one core each used; past the line the driver limits the figure."""
    fig = _figure(max(1.4, 0.8 + 0.3 * len(utilizations)))
    ax = fig.add_subplot()
    ys = list(range(len(utilizations)))
    colors = ["#d62728" if u >= threshold else COLORS[2] for u in utilizations]
    ax.barh(ys, [100 * u for u in utilizations], color=colors, height=0.6)
    ax.axvline(100 * threshold, color="#d62728", linestyle="--", linewidth=1, label="saturated")
    ax.set_yticks(ys, [f"driver {i}" for i in ys])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of one core")
    ax.set_title(title, loc="left")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(fig, "plot cpu")


def scaling(lines: list[Line], *, rate: float | None = None, max_workers: int = 1) -> str:
    """Each backend's drain rate against its number of workers, on one pair of axes; ``rate``: the rate
    asked, a horizontal line."""
    fig = _figure()
    ax = fig.add_subplot()
    for i, line in enumerate(lines):  # more lines than colours: the next round of them drawn dashed, squares
        ax.plot(line.x, line.y, "-o" if i < len(COLORS) else "--s", label=line.label, linewidth=1.5, markersize=4,
                color=line.color or COLORS[i % len(COLORS)])
    if rate is not None:
        ax.axhline(rate, color="#d62728", linestyle="--", linewidth=1.2, label=f"the rate asked, {rate:,.0f}/s")
    ax.set_title("drain rate of your task by workers (no HTTP)", loc="left")
    ax.set_xlabel("workers")
    ax.set_ylabel("tasks/s")
    ax.set_xticks(range(1, max(max_workers, *(int(max(line.x, default=1)) for line in lines), 1) + 1))
    ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _svg(fig, "plot scaling")
