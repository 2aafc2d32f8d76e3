"""docs/results.md's verdicts: every row of a verdict table carries one defined word, the counts under
the scoreboard are the counts of the tables (setup and addition rows not counted), and every
article figure of a shipped scenario file is quoted in its seed's verdict tables."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "results.md"

VERDICTS = ("confirmed", "partly", "refuted", "outdated", "not reproduced", "unsettled", "untested")
NOT_COUNTED = ("setup", "addition")
COUNT_COLUMNS = ("claims", *VERDICTS, "not counted")

VERDICT_TABLE = "| # | the article's claim | verdict |"
COUNTS_TABLE = "| seed | claims |"
WORD = re.compile(
    r"(?:\*\*)?(" + "|".join(re.escape(w) for w in (*VERDICTS, *NOT_COUNTED)) + r")(?:\*\*)?(?=$|[:;,]| \()"
)


@dataclass(frozen=True)
class VerdictTable:
    seed: str  # "000", from the section's heading
    heading: str
    rows: list[tuple[str, str]]  # (row id, verdict word)

    def counts(self) -> dict[str, int]:
        words = Counter(word for _, word in self.rows)
        out = {w: words[w] for w in VERDICTS}
        out["claims"] = sum(out.values())
        out["not counted"] = sum(words[w] for w in NOT_COUNTED)
        return out


def cells(line: str) -> list[str]:
    assert line.startswith("|") and line.rstrip().endswith("|"), line
    return [c.strip() for c in line.strip()[1:-1].split("|")]


def table_at(lines: list[str], start: int) -> list[str]:
    """The table whose header is lines[start]: its rows, without the header and the separator."""
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start + 2 : end]


def verdict_word(cell: str) -> str | None:
    m = WORD.match(cell)
    return m.group(1) if m else None


def verdict_table_rows(text: str) -> Iterator[tuple[str, str, list[str], list[list[str]]]]:
    """Each verdict table: its seed ("000"), its section's heading, its header's cells and its rows' cells."""
    lines = text.splitlines()
    heading = ""
    for i, line in enumerate(lines):
        if line.startswith("## "):
            heading = line
        if not line.startswith(VERDICT_TABLE):
            continue
        seed = re.match(r"## Seed (\d{3})\b", heading)
        assert seed, f"a verdict table (line {i + 1}) outside a '## Seed NNN' section: {heading!r}"
        yield seed.group(1), heading, cells(line), [cells(row) for row in table_at(lines, i)]


def verdict_tables(text: str) -> list[VerdictTable]:
    tables = []
    for seed, heading, header, table in verdict_table_rows(text):
        rows = []
        for parts in table:
            assert len(parts) == len(header), f"{heading}: a row of {len(parts)} cells, the header has {len(header)}"
            word = verdict_word(parts[2])
            assert word is not None, f"{heading}, row {parts[0]}: no defined verdict word: {parts[2][:80]!r}"
            rows.append((parts[0], word))
        tables.append(VerdictTable(seed, heading, rows))
    return tables


def counts_table(text: str) -> list[tuple[str, dict[str, int]]]:
    lines = text.splitlines()
    start = lines.index("## Scoreboard")
    header_at = next(i for i in range(start, len(lines)) if lines[i].startswith(COUNTS_TABLE))
    assert tuple(cells(lines[header_at])[1:]) == COUNT_COLUMNS, cells(lines[header_at])
    out = []
    for row in table_at(lines, header_at):
        parts = cells(row)
        out.append((parts[0], dict(zip(COUNT_COLUMNS, (int(p) for p in parts[1:]), strict=True))))
    return out


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_verdict_word_is_defined_at_the_top(text: str) -> None:
    start = text.index("## How a verdict is given")
    top = text[start : text.index("\n## ", start + 1)]
    for word in (*VERDICTS, *NOT_COUNTED):
        assert f"- **{word}**" in top or f"**{word}** (" in top, word


def test_every_row_of_every_verdict_table_has_one_defined_word(text: str) -> None:
    tables = verdict_tables(text)
    assert len(tables) >= 6
    for table in tables:
        assert table.rows, table.heading
        ids = [row_id for row_id, _ in table.rows]
        assert len(ids) == len(set(ids)), f"{table.heading}: a row number twice: {ids}"
        assert all(re.fullmatch(r"\d{3}-(?:T\d+-|B)?\d+[a-z]?", i) for i in ids), ids


def test_the_counts_at_the_top_are_the_counts_of_the_tables(text: str) -> None:
    tables = verdict_tables(text)
    rows = counts_table(text)
    *per_seed, (total_label, total) = rows
    assert "all" in total_label
    # a seed's rows of counts are its tables' counts, in the order of its tables (seed 000 has two)
    by_seed: dict[str, list[VerdictTable]] = {}
    for table in tables:
        by_seed.setdefault(table.seed, []).append(table)
    labels = [label for label, _ in per_seed]
    assert all(re.match(r"\d{3}\b", label) for label in labels), labels
    assert sorted(label[:3] for label in labels) == sorted(t.seed for t in tables), labels
    for seed, seed_tables in by_seed.items():
        seed_rows = [(label, counts) for label, counts in per_seed if label.startswith(seed)]
        for (label, counts), table in zip(seed_rows, seed_tables, strict=True):
            assert counts == table.counts(), f"{label} ({table.heading}): the table counts {table.counts()}"
    for column in COUNT_COLUMNS:
        assert total[column] == sum(t.counts()[column] for t in tables), column


def test_setup_and_addition_rows_are_not_counted_as_claims(text: str) -> None:
    for table in verdict_tables(text):
        counts = table.counts()
        assert counts["claims"] == sum(1 for _, w in table.rows if w in VERDICTS)
        assert counts["claims"] + counts["not counted"] == len(table.rows)


def test_the_parser_reads_a_verdict_cell_as_the_doc_writes_it() -> None:
    assert verdict_word("not reproduced: the API ran fastapi 0.165") == "not reproduced"
    assert verdict_word("unsettled: the ranges overlap") == "unsettled"
    assert verdict_word("confirmed; 3 runs (*#15*)") == "confirmed"
    assert verdict_word("setup (the figures of 2)") == "setup"
    assert verdict_word("untested") == "untested"
    assert verdict_word("refutedish") is None
    assert verdict_word("partly confirmed") is None


def _forms(value: float) -> tuple[str, ...]:
    """How the doc may write a figure: 1114, 1,114 or 1 114; 0.4."""
    if float(value).is_integer():
        whole = int(value)
        return (str(whole), f"{whole:,}", f"{whole:,}".replace(",", " "))
    return (f"{value:g}",)


def test_every_article_figure_of_a_scenario_file_is_in_its_seed_s_verdict_tables(text: str) -> None:
    """The scenario files' ``[[article.rows]]`` and docs/results.md quote the same articles: each figure of a
    row (RPS, median, p95, ...) appears in the claim or the article's cell of its seed's verdict tables."""
    from taskbench.scenarios import load, shipped

    quoted: dict[str, str] = {}
    for seed, _, header, rows in verdict_table_rows(text):
        columns = [header.index("the article's claim"), header.index("the article's")]
        quoted[seed] = quoted.get(seed, "") + " ".join(row[i] for row in rows for i in columns)
    missing = []
    for path in shipped():
        scenario = load(path)
        for row in scenario.article.get("rows", []):
            for key, value in row.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                cells = quoted.get(scenario.seed or "", "")
                if not any(re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d])", cells) for form in _forms(value)):
                    missing.append(f"{path.name} {row.get('match')} {key} = {value}")
    assert not missing, "figures of the scenario files not quoted in docs/results.md: " + "; ".join(missing)
