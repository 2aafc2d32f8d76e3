"""Every figure taskbench attributes to an article comes from the article: each number in the "the
article's" column of docs/results.md's verdict tables, and each figure of a scenario file's
``[[article.rows]]``, appears in that seed's text, or its cell (its row's note) says it is derived and
names figures that do appear (871 / 1178 for a share; a log's two timestamps for a duration).

The seed articles are beside the checkout (``../shared/seeds/NNN_*.txt``), as in CI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.results.test_results_doc import DOC, verdict_table_rows

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"
SCENARIOS = ROOT / "src" / "taskbench" / "scenarios" / "files"
NUMBER = re.compile(r"\d[\d,.:]*\d|\d")


@pytest.fixture(scope="module")
def seeds() -> dict[str, str]:
    found = {p.name[:3]: p.read_text().replace("\u00a0", " ") for p in SEEDS.glob("*.txt")}
    if not found:
        pytest.skip(f"the seed articles are not beside the checkout ({SEEDS})")
    return found


def _in(text: str, number: str) -> bool:
    """``number`` as the article may print it: 1,178 / 1178 / 1 178; 4.12 / 4,12."""
    return any(v in text for v in {number, number.replace(",", ""), number.replace(",", " "),
                                   number.replace(".", ",")})


def _sourced(text: str, figures: list[str], context: str) -> list[str]:
    """The figures that neither appear in ``text`` nor are derived, in ``context``, from figures that do."""
    missing = [f for f in figures if not _in(text, f)]
    if missing and "derived" in context:
        inputs = [f for f in NUMBER.findall(context) if f not in missing and _in(text, f)]
        if len(inputs) >= 2:
            return []
    return missing


#: a library's version (0.25.0, 5.3.6): the article's condition, taken from its repository's lock file
#: (docs/results.md names it), not a figure of its text
VERSION = re.compile(r"\b\d+\.\d+\.\d+\b")


def _numbers(cell: str) -> list[str]:
    return [n.rstrip(".,:") for n in NUMBER.findall(VERSION.sub("", cell))]


def test_the_article_s_figures_in_the_verdict_tables_are_the_article_s(seeds: dict[str, str]) -> None:
    checked, wrong = 0, []
    for seed, _, header, rows in verdict_table_rows(DOC.read_text()):
        column = header.index("the article's")
        for row in rows:
            figures = _numbers(row[column])
            checked += len(figures)
            for figure in _sourced(seeds[seed], figures, row[column]):
                wrong.append(f"seed {seed} row {row[0]}: {figure!r} is not in the article ({row[column]})")
    assert checked > 100, "the tables' article figures were read"
    assert not wrong, "\n".join(wrong)


def test_the_scenario_files_article_figures_are_the_article_s(seeds: dict[str, str]) -> None:
    checked, wrong = 0, []
    for path in sorted(SCENARIOS.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        seed = data.get("seed")
        if seed is None:
            continue
        for row in data.get("article", {}).get("rows", []):
            figures = [f"{v:g}" for k, v in row.items()
                       if k not in ("match", "note") and isinstance(v, int | float) and not isinstance(v, bool)]
            checked += len(figures)
            for figure in _sourced(seeds[seed], figures, str(row.get("note", ""))):
                wrong.append(f"{path.name}: {figure} ({row.get('match')}) is not in seed {seed}'s text")
    assert checked > 30, "the scenario files' article figures were read"
    assert not wrong, "\n".join(wrong)


def test_a_figure_the_article_does_not_print_fails_unless_derived_from_ones_it_does() -> None:
    text = "ARQ 1114, FastStream 1178; 19:30:48,852 received, 19:30:52,975 succeeded"
    assert _sourced(text, ["1178"], "1178 req/s") == []
    assert _sourced(text, ["74"], "Celery 74 % of FastStream") == ["74"]
    assert _sourced(text, ["74"], "74 % (derived: 871 / 1178)") == ["74"], "871 is not in the text"
    assert _sourced(text, ["4.12"], "4.12 s (derived from its log's timestamps 19:30:48,852 → 19:30:52,975)") == []
    assert _in("1 178 req/s", "1,178") and _in("4,12 s", "4.12")
    assert _numbers("227 req/s (arq 0.25.0, concurrency 1)") == ["227", "1"], "a version is a condition, not a figure"
