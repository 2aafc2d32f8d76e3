"""The rules a skeptic can check on docs/results.md without rerunning anything.

- Every verdict table has the same columns, and each row an id (``000-B7``) of its seed.
- A verdict cell is one short sentence (at most 60 words); so are "ours" and "what differs".
- Each part of an "ours" cell (split at "; ") cites a kept run in ``docs/runs/`` and holds only figures
  that file holds; "—" where no run bears on the claim. The same holds for each claim's "**Ours.**" on
  its details page.
- Every row links to its section on a details page (``docs/claims/``), and every section there is a row's.
- No run is named that the repository does not keep.
- The scoreboard at the top has one line per claim, with the row's verdict, under its group, and the file,
  source or reason behind it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.results.test_results_doc import DOC, NOT_COUNTED, VERDICTS, verdict_table_rows, verdict_word
from tests.results.test_run_provenance import CITED, ROOT, RUNS, unsourced

CLAIMS = DOC.parent / "claims"
HEADER = ["#", "the article's claim", "verdict", "ours", "the article's", "what differs", "details"]
ID = re.compile(r"(\d{3})-(?:T\d+-|B)?\d+[a-z]?")
WORDS = {"verdict": 60, "ours": 60, "what differs": 40}
DETAILS = re.compile(r"^\[details\]\((claims/[\w.-]+\.md)#([\w-]+)\)$")
#: a run's id as the harness names its directory (20261203T142343-5615): a file in docs/runs/ must carry it
RUN_ID = re.compile(r"\b\d{8}T\d{6}(?:-\d+)?\b")
NONE = "—"

#: the scoreboard's groups and the verdicts each holds
GROUPS = {
    "Got right": ("confirmed",),
    "Partly right": ("partly",),
    "Got wrong": ("refuted",),
    "Outdated": ("outdated",),
    "Unsettled": ("not reproduced", "unsettled", "untested"),
}
BULLET = re.compile(r"^- \*\*(?P<word>[a-z ]+)\*\* \[(?P<id>[\w-]+)\]\((?P<link>[^)]+)\): (?P<text>.+)$")


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text(encoding="utf-8")


def rows(text: str) -> list[tuple[str, dict[str, str]]]:
    """Each verdict row as (its seed, {column: cell})."""
    out: list[tuple[str, dict[str, str]]] = []
    for seed, _, header, table in verdict_table_rows(text):
        out.extend((seed, dict(zip(header, row, strict=True))) for row in table)
    return out


def words(cell: str) -> int:
    return len(cell.split())


def uncited(cell: str) -> list[str]:
    """The problems of an "ours" text: a part that cites no kept run, or a figure its runs do not hold."""
    if cell.strip() in (NONE, "-"):
        return []
    problems = []
    for part in cell.split("; "):
        relatives = CITED.findall(part)
        if not relatives:
            problems.append(f"cites no kept run: {part!r}")
            continue
        missing = [r for r in relatives if not (ROOT / r).is_file()]
        if missing:
            problems.append(f"cites files not in docs/runs/: {missing}")
            continue
        figures = unsourced(CITED.sub("", part), [ROOT / r for r in relatives])
        if figures:
            problems.append(f"{figures} in none of {[Path(r).name for r in relatives]}: {part!r}")
    return problems


def test_every_verdict_table_has_the_columns(text: str) -> None:
    for _seed, heading, header, _ in verdict_table_rows(text):
        assert header == HEADER, f"{heading}: {header}"


def test_every_row_has_an_id_of_its_seed_once(text: str) -> None:
    seen: set[str] = set()
    for seed, row in rows(text):
        match = ID.fullmatch(row["#"])
        assert match and match.group(1) == seed, f"seed {seed}: {row['#']!r} is not an id of this seed (000-B7)"
        assert row["#"] not in seen, f"{row['#']} twice"
        seen.add(row["#"])


def test_cells_are_short(text: str) -> None:
    long = [f"{row['#']} {column}: {words(row[column])} words (at most {most})"
            for _, row in rows(text) for column, most in WORDS.items() if words(row[column]) > most]
    assert not long, "\n".join(long)


def test_every_part_of_ours_cites_a_kept_run_holding_its_figures(text: str) -> None:
    wrong = [f"{row['#']}: {p}" for _, row in rows(text) for p in uncited(row["ours"])]
    assert not wrong, "\n".join(wrong)


def sections(page: Path) -> dict[str, str]:
    """A details page's claim sections: {id: text}, each opened by ``<a id="..."></a>`` and a ``## ID:`` heading."""
    found: dict[str, str] = {}
    parts = re.split(r'^<a id="([\w-]+)"></a>\n', page.read_text(encoding="utf-8"), flags=re.M)
    for anchor, body in zip(parts[1::2], parts[2::2], strict=True):
        heading = body.splitlines()[0] if body else ""
        assert re.match(rf"## {re.escape(anchor)}:", heading, flags=re.I), \
            f"{page.name}: anchor {anchor} is not followed by its '## ID: ...' heading: {heading!r}"
        found[anchor] = body.split("\n## ")[0]
    return found


def test_every_row_links_to_its_section_and_every_section_is_a_rows(text: str) -> None:
    linked: dict[Path, set[str]] = {}
    for _, row in rows(text):
        match = DETAILS.match(row["details"])
        assert match, f"{row['#']}: details cell is not [details](claims/PAGE.md#id): {row['details']!r}"
        page, anchor = DOC.parent / match.group(1), match.group(2)
        assert anchor == row["#"].lower(), f"{row['#']}: links to #{anchor}"
        assert page.is_file(), f"{row['#']}: {match.group(1)} does not exist"
        assert anchor in sections(page), f"{row['#']}: {page.name} has no section {anchor}"
        linked.setdefault(page, set()).add(anchor)
    for page, anchors in linked.items():
        orphans = set(sections(page)) - anchors
        assert not orphans, f"{page.name}: sections no row links to: {sorted(orphans)}"


def test_every_ours_on_a_details_page_cites_a_kept_run_holding_its_figures() -> None:
    pages = sorted(CLAIMS.glob("*.md"))
    assert pages, "docs/claims/ holds the verdicts' details"
    wrong, checked = [], 0
    for page in pages:
        for anchor, body in sections(page).items():
            ours = re.search(r"^\*\*Ours\.\*\* (.+?)(?:\n\n|\Z)", body, flags=re.M | re.S)
            assert ours, f"{page.name} {anchor}: no '**Ours.**' paragraph"
            checked += 1
            wrong += [f"{page.name} {anchor}: {p}" for p in uncited(" ".join(ours.group(1).split()))]
    assert checked
    assert not wrong, "\n".join(wrong)


def test_no_run_is_named_that_is_not_kept(text: str) -> None:
    kept = " ".join(p.name for p in RUNS.iterdir())
    for page in [DOC, *sorted(CLAIMS.glob("*.md"))]:
        named = set(RUN_ID.findall(page.read_text(encoding="utf-8")))
        missing = sorted(n for n in named if n not in kept)
        assert not missing, f"{page.name} names runs docs/runs/ does not keep: {missing}"


def scoreboard(text: str) -> list[tuple[str, re.Match[str]]]:
    """The scoreboard's lines, each with the group heading it is under."""
    start = text.index("## Scoreboard")
    end = text.index("\n## ", start + 1)
    group, out = "", []
    for line in text[start:end].splitlines():
        heading = re.match(r"^\*\*(.+?)\*\*", line) or re.match(r"^#### (.+)$", line)
        if heading and heading.group(1).rstrip(":.") in GROUPS:
            group = heading.group(1).rstrip(":.")
        if line.startswith("- **"):
            match = BULLET.match(line)
            assert match, f"a scoreboard line not as '- **word** [ID](link): sentence. source': {line!r}"
            out.append((group, match))
    return out


def test_the_scoreboard_has_every_claim_once_with_its_verdict_under_its_group(text: str) -> None:
    verdicts = {row["#"]: verdict_word(row["verdict"]) for _, row in rows(text)}
    claims = {i for i, w in verdicts.items() if w not in NOT_COUNTED}
    lines = scoreboard(text)
    ids = [m.group("id") for _, m in lines]
    assert len(ids) == len(set(ids)), "a claim twice on the scoreboard"
    assert set(ids) == claims, f"missing: {sorted(claims - set(ids))}; not a claim: {sorted(set(ids) - claims)}"
    for group, match in lines:
        word, claim = match.group("word"), match.group("id")
        assert word == verdicts[claim], f"{claim}: the scoreboard says {word}, its row {verdicts[claim]}"
        assert word in GROUPS.get(group, ()), f"{claim} ({word}) under {group!r}"
        assert match.group("link").endswith(f"#{claim.lower()}"), f"{claim}: links to {match.group('link')}"


def test_every_scoreboard_line_names_what_is_behind_it(text: str) -> None:
    article = {row["#"]: row["the article's claim"] + " " + row["the article's"] for _, row in rows(text)}
    for _, match in scoreboard(text):
        claim, sentence = match.group("id"), match.group("text")
        behind = CITED.findall(sentence)
        if not behind:
            assert "https://" in sentence or "no run:" in sentence, f"{claim}: no kept file, source or reason"
            continue
        assert all((ROOT / r).is_file() for r in behind), f"{claim}: {behind}"
        figures = unsourced(CITED.sub("", sentence), [ROOT / r for r in behind])
        theirs = {n.replace(",", "") for n in re.findall(r"\d[\d,.]*\d|\d", article[claim])}
        assert not set(figures) - theirs, f"{claim}: {set(figures) - theirs} neither in its files nor the article's"


def test_the_groups_hold_every_verdict_word() -> None:
    assert sorted(w for ws in GROUPS.values() for w in ws) == sorted(VERDICTS)


RUNS_HEADER = "| file | what ran | machine: crunch(1000000) | broker | FastAPI | driver CPU, most |"


def _most_driver_cpu(data: object) -> float | None:
    """The highest ``driver_cpu_pct`` anywhere in a result (its cases and their repeats)."""
    found: list[float] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "driver_cpu_pct" and isinstance(value, int | float):
                    found.append(float(value))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    return max(found) if found else None


def runs_row(path: Path) -> str:
    """A kept file's line of the runs table: what ran, on which machine, with which broker and API."""
    import json

    data = json.loads(path.read_text())
    if "sources" in data:  # a parity run: the libraries' own benchmark scripts, no API, no calibration
        what = f"parity, {data.get('versions') or 'lock'}"
        machine, broker, api = "–", "Redis", "–"
    else:
        scenario = data.get("scenario") or {}
        name = scenario.get("name") or data.get("kind", "?")
        profile = f" --profile {scenario['profile']}" if scenario.get("profile") else ""
        count = len(data.get("cases") or [])
        what = f"{name}{profile}, {count} case{'' if count == 1 else 's'}"
        info = data.get("machine") or {}
        ms = (info.get("cpu_calibration") or {}).get("cpu_ms")
        machine = f"{info.get('cpu_model', '?')}, {ms:.0f} ms" if ms else info.get("cpu_model", "?")
        redis = data.get("redis") or {}
        broker = f"{redis['mode']} Redis, fsync {redis['broker_fsync']}" if redis.get("broker_fsync") else "–"
        if data.get("cases") and all(c.get("backend") == "background" for c in data["cases"]):
            broker = "none: BackgroundTasks"  # its io tasks call the ledger's Redis, which keeps nothing
        versions = sorted({env["packages"]["fastapi"] for env in (data.get("environments") or {}).values()
                           if "fastapi" in env.get("packages", {})})
        api = ", ".join(versions) or "–"
    most = _most_driver_cpu(data)
    driver = f"{most:.0f} %" if most is not None else "–"
    return f"| `docs/runs/{path.name}` | {what} | {machine} | {broker} | {api} | {driver} |"


def runs_table(text: str) -> list[str]:
    """The runs table the doc must hold: one line per kept file the doc or its details pages cite."""
    cited = set(CITED.findall(text)).union(*(CITED.findall(p.read_text(encoding="utf-8"))
                                             for p in CLAIMS.glob("*.md")))
    return [RUNS_HEADER, "|---|---|---|---|---|---|", *(runs_row(ROOT / r) for r in sorted(cited))]


def test_the_runs_table_is_what_the_kept_files_say(text: str) -> None:
    expected = runs_table(text)
    lines = text.splitlines()
    assert RUNS_HEADER in lines, "the runs table:\n" + "\n".join(expected)
    start = lines.index(RUNS_HEADER)
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    assert lines[start:end] == expected, "the runs table should read:\n" + "\n".join(expected)



def test_every_practical_rule_rests_on_settled_rows(text: str) -> None:
    """A rule for the reader's service links to rows that decide something, never to an unsettled one."""
    start = text.index("## What this means for your FastAPI service")
    section = text[start : text.index("\n## ", start + 1)]
    verdicts = {row["#"]: verdict_word(row["verdict"]) for _, row in rows(text)}
    rules = [line for line in section.splitlines() if line.startswith("- **")]
    assert rules, "the section lists its rules"
    for rule in rules:
        linked = re.findall(r"\[([\w-]+)\]\(claims/[\w.-]+\.md#[\w-]+\)", rule)
        assert linked, f"a rule with no row behind it: {rule[:80]!r}"
        for claim in linked:
            assert claim in verdicts, f"{claim}: no such row"
            assert verdicts[claim] in ("confirmed", "partly", "refuted", "outdated"), \
                f"a rule rests on {claim}, which is {verdicts[claim]}"


if __name__ == "__main__":  # print the runs table to paste: python -m tests.results.test_verdict_rules
    print("\n".join(runs_table(DOC.read_text(encoding="utf-8"))))
