"""taskbench's own figures in docs/results.md come from result files kept beside the doc.

A run whose figures the doc quotes keeps its result file in ``docs/runs/`` (a scenario's ``result.json``,
or a ``parity.json``). A line of the doc that says a table is "rendered from `docs/runs/NAME.json`" is
followed by a table every line of which is a line of what ``taskbench report NAME.json --format
markdown`` (or ``taskbench parity --from NAME.json``) prints today; a verdict row whose case cell names
such a file in a part of its "ours" cell (the cell split at "; ") has every figure of that part in that
file (as rendered, or as a value the file holds, rounded); and every file in ``docs/runs/`` is cited (by this doc or another page of docs/, its details pages in docs/claims/ too).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.results.test_results_doc import DOC, verdict_table_rows

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "runs"
CITED = re.compile(r"`(docs/runs/[\w.+-]+\.json)`")
RENDERED = re.compile(r"rendered from `(docs/runs/[\w.+-]+\.json)`", re.IGNORECASE)
NUMBER = re.compile(r"\d[\d,.]*\d|\d")
VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")


@cache
def rendered(path: Path) -> str:
    """What taskbench prints of the kept result file, as markdown."""
    data = json.loads(path.read_text())
    if "kind" not in data and {"sources", "rows"} <= data.keys():
        from taskbench.report.parity import markdown as parity_markdown

        return parity_markdown(data)
    if data.get("kind") == "run":  # a plain `run` has no markdown table: its figures are the values it holds
        return ""
    from taskbench.report import scenario
    from taskbench.results import load

    return scenario.markdown(load(path))


def _values(data: Any) -> set[str]:
    """Every number the file holds, as the doc may round it (0, 1 or 2 decimals)."""
    out: set[str] = set()
    if isinstance(data, dict):
        for value in data.values():
            out |= _values(value)
    elif isinstance(data, list):
        for value in data:
            out |= _values(value)
    elif isinstance(data, int | float) and not isinstance(data, bool):
        out |= {f"{data:.0f}", f"{data:.1f}", f"{data:.2f}", f"{data:g}"}
    elif isinstance(data, str) and VERSION.fullmatch(data):  # a library's version: 0.54.0, named 0.54 too
        out |= {data, ".".join(data.split(".")[:2])}
    return out


@cache
def figures_of(path: Path) -> frozenset[str]:
    found = {_plain(n) for n in NUMBER.findall(rendered(path))}
    return frozenset(found | _values(json.loads(path.read_text())))


def _plain(number: str) -> str:
    return number.rstrip(".,").replace(",", "")


def unsourced(cell: str, paths: list[Path]) -> list[str]:
    """The figures of ``cell`` that none of the files holds."""
    held = frozenset().union(*(figures_of(p) for p in paths))
    return [n for n in (_plain(x) for x in NUMBER.findall(cell.replace("\u202f", "").replace(" 000", "000")))
            if n not in held]


def rendered_tables(text: str) -> list[tuple[int, str, list[str]]]:
    """Each (line number, file, table lines) that the doc says was rendered from a kept file."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        for relative in RENDERED.findall(line):
            start = next((j for j in range(i + 1, min(i + 6, len(lines))) if lines[j].startswith("|")), None)
            assert start is not None, f"line {i + 1}: 'rendered from {relative}' with no table under it"
            end = start
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            out.append((i + 1, relative, lines[start:end]))
    return out


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_kept_run_is_cited_and_every_cited_run_is_kept(text: str) -> None:
    kept = {f"docs/runs/{p.name}" for p in RUNS.glob("*.json")}
    cited = set(CITED.findall(text))
    # another page may keep its evidence there too (docs/choose.md its choose runs)
    anywhere = cited.union(*(CITED.findall(page.read_text(encoding="utf-8")) for page in DOC.parent.rglob("*.md")))
    assert kept, "docs/runs/ holds the result files the doc quotes"
    assert not cited - kept, f"cited but not in docs/runs/: {sorted(cited - kept)}"
    assert not kept - anywhere, f"kept but never cited by a page of docs/: {sorted(kept - anywhere)}"


def test_a_table_rendered_from_a_kept_run_is_what_taskbench_prints_of_it(text: str) -> None:
    tables = rendered_tables(text)
    assert tables, "the doc renders at least one table from a kept run"
    for number, relative, table in tables:
        printed = set(rendered(ROOT / relative).splitlines())
        missing = [row for row in table if row not in printed]
        assert not missing, f"line {number}: rows not printed by taskbench from {relative}:\n" + "\n".join(missing)


def cited_segments(cell: str) -> list[tuple[str, list[Path]]]:
    """The parts of an "ours" cell (split at "; ") that name a kept run, each without the names, with
    the files it names: a part's figures are that run's."""
    out = []
    for part in cell.split("; "):
        relatives = CITED.findall(part)
        if relatives:
            out.append((CITED.sub("", part), [ROOT / r for r in relatives]))
    return out


def test_a_verdict_row_part_citing_a_kept_run_has_only_that_runs_figures(text: str) -> None:
    checked, wrong = 0, []
    for seed, _, header, rows in verdict_table_rows(text):
        ours = next(i for i, name in enumerate(header) if name.startswith("ours"))
        for row in rows:
            for part, paths in cited_segments(row[ours]):
                checked += 1
                for figure in unsourced(part, paths):
                    wrong.append(f"seed {seed} row {row[0]}: {figure} is in none of {[p.name for p in paths]}: {part}")
    assert checked, "some verdict row's figures name a kept run"
    assert not wrong, "\n".join(wrong)


def test_a_figure_the_run_does_not_hold_is_found(tmp_path: Path) -> None:
    run = {"sources": [{"name": "saq", "repo": "tobymao/saq", "commit": "fe86758c50", "results": "r", "setup": "s",
                        "shapes": [{"library": "arq", "tasks": 1000, "concurrency": 10, "published_per_s": None}]}],
           "rows": [{"source": "saq", "library": "arq", "kind": "script", "round": 0, "tasks": 300_000,
                     "tasks_per_s": 98.64, "enqueue_s": 61.23, "drain_s": 3041.5, "executed": 300_000}],
           "tasks_override": 300_000}
    target = tmp_path / "parity.json"
    target.write_text(json.dumps(run))
    assert unsourced("300,000 in 3,041.5 s (99 tasks/s), enqueued in 61.2 s", [target]) == []
    assert unsourced("300 000 tasks, 98.6 a second", [target]) == []
    assert unsourced("300,000 in 3,100 s", [target]) == ["3100"]
    cell = "98.6 tasks/s (one run, `docs/runs/x-300000.json`); 810 (747–810) (3 rounds)"
    assert cited_segments(cell) == [("98.6 tasks/s (one run, )", [ROOT / "docs/runs/x-300000.json"])]
    assert any(line.startswith("| arq | 300,000, 10 |") for line in rendered(target).splitlines())
