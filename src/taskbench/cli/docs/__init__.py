"""The documentation pages generated from the code, and their check: ``python -m taskbench.docs``.

    python -m taskbench.docs            rewrite docs/reference.md, docs/promises.md and docs/help.txt
    python -m taskbench.docs --check    exit 1 naming each page that is out of date

A page is the same on every machine (no date, no path, no machine fact), so the check holds anywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from taskbench.cli.docs import help_text, promises, reference
from taskbench.files import write_atomic

DOCS = Path(__file__).resolve().parents[4] / "docs"
#: a page's file name -> what renders it
#: (help.txt: what ./taskbench --help prints before the environment is built)
PAGES: dict[str, Callable[[], str]] = {"reference.md": reference.render, "promises.md": promises.render,
                                       "help.txt": help_text.render}


def stale() -> list[Path]:
    """The pages whose file differs from what the code renders now."""
    return [DOCS / name for name, render in PAGES.items()
            if not (DOCS / name).is_file() or (DOCS / name).read_text(encoding="utf-8") != render()]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        found = stale()
        for path in found:
            print(f"{path} is out of date: run python -m taskbench.docs", file=sys.stderr)
        return 1 if found else 0
    for name, render in PAGES.items():
        path, text = DOCS / name, render()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            write_atomic(path, text)  # atomically: never a half-written page
            print(f"wrote {path}")
    return 0
