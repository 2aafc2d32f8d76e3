"""The docs and the source say how things are now: no "issue N" and no dated heading in them.

The history belongs in CHANGELOG.md and the evidence in result files (docs/runs/). A reader of the docs
has no tracker to look "issue 34" up in, and a heading like "2026-11-24 pass" says when a section was
written, not what it measures.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: "issue 34", "Issue #5", "issues 13 and 16": a tracker's number; "celery/celery#7950" (a library's own
#: thread, a source) and ".../issues/343" (a link) are not matched
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
#: a date in a heading: 2026-11-24, or 2026-11
DATE = re.compile(r"\b(?:19|20)\d{2}-\d{2}(?:-\d{2})?\b")
#: an ATX heading, outside a fenced code block (a shell comment in a block is not one)
HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
LEFT_OUT: set[str] = set()


def _docs() -> list[Path]:
    found = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [path for path in found if path.is_file() and _name(path) not in LEFT_OUT]


def _source() -> list[Path]:
    src = REPO / "src"
    return sorted([*src.rglob("*.py"), *src.rglob("*.toml")])


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _issues(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in ISSUE.finditer(line):
                found.append(f"{_name(path)}:{number}: {match.group(0)!r}")
    return found


def _dated_headings(path: Path) -> list[str]:
    found, fenced = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fence = FENCE.match(line)
        if fence and fenced is None:
            fenced = fence.group(1)
        elif fence and line.lstrip().startswith(fenced or ""):
            fenced = None
        elif fenced is None and HEADING.match(line) and DATE.search(line):
            found.append(f"{_name(path)}:{number}: {line.strip()}")
    return found


def test_the_docs_cite_no_issue_numbers() -> None:
    found = _issues(_docs())
    assert not found, ("the docs say the reason itself, not its issue's number (history: CHANGELOG.md):\n"
                       + "\n".join(found))


def test_the_source_cites_no_issue_numbers() -> None:
    found = _issues(_source())
    assert not found, "a comment says the reason itself in a line, not its issue's number:\n" + "\n".join(found)


def test_no_heading_is_dated() -> None:
    found = [hit for path in _docs() for hit in _dated_headings(path)]
    assert not found, ("a heading says what its section measures; a measurement's date goes beside its "
                       "figure, the history in CHANGELOG.md:\n" + "\n".join(found))


def test_the_checks_see_what_they_look_for() -> None:
    # the patterns themselves, so that a check that matches nothing cannot pass for a clean tree
    assert ISSUE.search("see issue 34") and ISSUE.search("Issue #5") and ISSUE.search("issues 13 and 16")
    assert not ISSUE.search("celery/celery#7950") and not ISSUE.search("arq/issues/343")
    assert DATE.search("### Sixth pass (2026-11-25, night)") and not DATE.search("### 5,000 tasks")
    assert HEADING.match("## A heading") and not HEADING.match("#34) in a table") and not HEADING.match("#!/bin/sh")
