"""``taskbench parity``'s figures: per published benchmark and library, the script's rate, the drain's
ledger off and on (medians with their ranges), the CPU a task, and three rankings side by side (the
published one, the script's here, the drain's here), made from ``parity.json`` alone.

Two libraries are ordered by a measure only where that measure's ranges do not overlap (:func:`order`):
a shared machine moves single runs by tens of percent, and two close libraries may swap places
between runs without either measure being wrong.
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

#: taskbench's figure differs from the script's by more than this share: the docs explain each one
DISAGREES = 0.15


def spread(values: list[float]) -> dict[str, float] | None:
    """Median, lowest and highest of the runs' figures; None without any."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def summarize(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A row per (source, library), in the sources' order: each kind's rate and CPU a task as
    :func:`spread`, ``on_off`` (ledger on ÷ off, of the medians), ``off_vs_script`` (drain off ÷ script
    - 1), the published rate on the author's hardware."""
    out = []
    for source in result["sources"]:
        for shape in source["shapes"]:
            runs = [r for r in result["rows"] if r["source"] == source["name"] and r["library"] == shape["library"]]
            if not runs:
                continue
            row: dict[str, Any] = {"source": source["name"], "library": shape["library"],
                                   "tasks": runs[0].get("tasks") or result.get("tasks_override") or shape["tasks"],
                                   "concurrency": shape["concurrency"], "published_per_s": shape["published_per_s"],
                                   "version": next((r.get("version") for r in runs if r.get("version")), None)
                                   or _installed(result, shape["library"])}
            for kind in ("script", "off", "on"):
                mine = [r for r in runs if r["kind"] == kind]
                row[kind] = spread([r["tasks_per_s"] for r in mine if r.get("tasks_per_s")])
                row[f"cpu_{kind}"] = spread([r["worker_cpu_us_per_task"] for r in mine
                                             if r.get("worker_cpu_us_per_task")])
            scripts = [r for r in runs if r["kind"] == "script" and not r.get("error")]
            # the script's own two clocks, as SAQ's benchmarks/simple.py prints them ("enqueue N s", "process N s")
            row["script_enqueue_s"] = spread([r["enqueue_s"] for r in scripts if r.get("enqueue_s") is not None])
            row["script_drain_s"] = spread([r["drain_s"] for r in scripts if r.get("drain_s") is not None])
            row["on_off"] = _ratio(row["on"], row["off"])
            ratio = _ratio(row["off"], row["script"])
            row["off_vs_script"] = None if ratio is None else ratio - 1
            out.append(row)
    return out


def _installed(result: dict[str, Any], library: str) -> str | None:
    """The library's version in the environment the run used (a script-only run has no drain to name it)."""
    for key, env in (result.get("environments") or {}).items():
        if key.split("@")[0] == library and isinstance(env, dict):
            version = (env.get("packages") or {}).get(library)
            if version:
                return str(version)
    return None


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Several ``parity.json`` as one (runs of different sources or libraries, made one after another):
    the sources in their first order, each with its shapes, and every row."""
    sources: dict[str, dict[str, Any]] = {}
    for result in results:
        for found in result["sources"]:
            known = sources.setdefault(found["name"], {**found, "shapes": []})
            have = {s["library"] for s in known["shapes"]}
            known["shapes"] += [s for s in found["shapes"] if s["library"] not in have]
    sets = {r.get("versions", "lock") for r in results}
    return {"sources": list(sources.values()), "rows": [{**row, "tasks": row.get("tasks") or r.get("tasks_override")}
                                                   for r in results for row in r["rows"]],
            "tasks_override": None, "folders": [r.get("folder") for r in results],
            "versions": sets.pop() if len(sets) == 1 else "mixed",
            "environments": {k: v for r in results for k, v in (r.get("environments") or {}).items()}}


def _ratio(top: dict[str, float] | None, bottom: dict[str, float] | None) -> float | None:
    return top["median"] / bottom["median"] if top and bottom and bottom["median"] else None


def separated(a: dict[str, float] | None, b: dict[str, float] | None) -> int:
    """1: ``a`` above ``b`` with their ranges apart; -1: below; 0: the ranges overlap (or a figure is missing)."""
    if not a or not b:
        return 0
    if a["min"] > b["max"]:
        return 1
    if a["max"] < b["min"]:
        return -1
    return 0


def order(rows: list[dict[str, Any]], first: str = "script", second: str = "off") -> dict[str, list[str]]:
    """The pairs of one source's libraries that ``first`` orders (its ranges apart): ``agree`` when
    ``second`` orders them the same way with its ranges apart, ``contradict`` when it orders them the
    other way with its ranges apart, ``within`` when ``second``'s ranges overlap (no order to compare)."""
    found: dict[str, list[str]] = {"agree": [], "contradict": [], "within": []}
    for a, b in itertools.combinations(rows, 2):
        by_first = separated(a[first], b[first])
        if not by_first:
            continue
        high, low = (a, b) if by_first > 0 else (b, a)
        pair = f"{high['library']} > {low['library']}"
        by_second = separated(high[second], low[second])
        found["agree" if by_second > 0 else "contradict" if by_second < 0 else "within"].append(pair)
    return found


def ranking(rows: list[dict[str, Any]], key: str) -> list[str]:
    """The libraries by ``key`` (``published`` or a kind's median), fastest first."""
    def value(row: dict[str, Any]) -> float:
        figure = row["published_per_s"] if key == "published" else (row[key] or {}).get("median")
        return float(figure or 0.0)
    return [r["library"] for r in sorted(rows, key=value, reverse=True) if value(r)]


def rate_text(figure: dict[str, float] | None) -> str:
    """``2,177 (2,100–2,240)``, or ``–``."""
    if not figure:
        return "–"
    text = f"{figure['median']:,.0f}"
    return text if figure["runs"] < 2 else f"{text} ({figure['min']:,.0f}–{figure['max']:,.0f})"


def _us(figure: dict[str, float] | None) -> str:
    return "–" if not figure else f"{figure['median']:,.0f}"


def _seconds(figure: dict[str, float] | None) -> str:
    """``18.3 (17.9–19.0)``, or ``–``."""
    if not figure:
        return "–"
    text = f"{figure['median']:,.1f}"
    return text if figure["runs"] < 2 else f"{text} ({figure['min']:,.1f}–{figure['max']:,.1f})"


def markdown(result: dict[str, Any]) -> str:
    """Per source: the rates and CPU a task of every library and the rankings side by side, as markdown."""
    rows = summarize(result)
    parts = []
    for source in result["sources"]:
        mine = [r for r in rows if r["source"] == source["name"]]
        if not mine:
            continue
        parts += [f"### {source['name']}: {source['repo']} @ {source['commit'][:10]}", "",
                  f"Published: {source['results']}; {source['setup']}.", "",
                  "| library | tasks, concurrency | published tasks/s (their machine) | its own script here, tasks/s "
                  "| drain ledger off | ledger on | on ÷ off | worker CPU µs a task: script · off → on "
                  "| drain off vs script | its own script: enqueue s · drain s |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
        for r in mine:
            ratio = "–" if r["on_off"] is None else f"{r['on_off']:.2f}"
            diff = "–" if r["off_vs_script"] is None else f"{r['off_vs_script']:+.0%}"
            flag = " ⚠" if r["off_vs_script"] is not None and abs(r["off_vs_script"]) > DISAGREES else ""
            published = "–" if not r["published_per_s"] else f"{r['published_per_s']:,.0f}"
            parts.append(f"| {r['library']} | {r['tasks']:,}, {r['concurrency']} | {published} | "
                         f"{rate_text(r['script'])} | {rate_text(r['off'])} | {rate_text(r['on'])} | {ratio} | "
                         f"{_us(r['cpu_script'])} · {_us(r['cpu_off'])} → {_us(r['cpu_on'])} | {diff}{flag} | "
                         f"{_seconds(r['script_enqueue_s'])} · {_seconds(r['script_drain_s'])} |")
        for r in result["rows"]:
            if r["source"] == source["name"] and r.get("error"):
                parts += ["", f"Failed: {r['library']}'s own script, {r['tasks']:,} tasks, at its {r['stage']}: "
                          f"{r['error']} ({r['enqueued']:,} enqueued in {r['enqueue_s']:.1f} s)."]
        named = [f"{r['library']} {r['version']}" for r in mine if r.get("version")]
        if named:
            where = result.get("versions", "lock")
            parts += ["", f"Versions here: {', '.join(named)} "
                      f"({'uv.lock' if where == 'lock' else f'the pinned environment {where}'})."]
        ranks = {key: ranking(mine, key) for key in ("published", "script", "off", "on")}
        parts += ["", "| rank | published | its own script here | drain ledger off here | drain ledger on here |",
                  "| ---: | --- | --- | --- | --- |"]
        for n in range(max(len(v) for v in ranks.values())):
            cells = [ranks[k][n] if n < len(ranks[k]) else "–" for k in ("published", "script", "off", "on")]
            parts.append(f"| {n + 1} | " + " | ".join(cells) + " |")
        checked = order(mine)
        parts += ["", "Order where the script's ranges are apart: "
                  + ("; ".join(f"{k}: {', '.join(v)}" for k, v in checked.items() if v) or "none apart"), ""]
    return "\n".join(parts)
