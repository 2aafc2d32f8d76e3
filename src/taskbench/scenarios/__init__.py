"""Scenarios: the seed articles' experiments as TOML files a user runs, copies and edits.

``taskbench scenarios`` lists the shipped files; ``taskbench run --scenario NAME|PATH`` runs one.

The scenario files' reader (:mod:`.parse`) is imported when first used, not with the package: the
HTTP scenarios' app (:mod:`.apps`) is imported by a server in an environment that may hold only
FastAPI and its server, at the versions of an article (``article-004``, docs/results.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskbench.scenarios.parse import Scenario, ScenarioError, load

FILES = Path(__file__).parent / "files"


def shipped() -> list[Path]:
    return sorted(FILES.glob("*.toml"))


def resolve(name_or_path: str, profile: str | None = None) -> Scenario:
    """A shipped scenario by name, or a file by path; ``profile``: apply its ``[profile.NAME]``."""
    from taskbench.scenarios.parse import ScenarioError, load

    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if not candidate.exists():
            raise ScenarioError(f"{candidate}: no such scenario file")
        return load(candidate, profile)  # a folder or a FIFO: load says what it is
    path = FILES / f"{name_or_path}.toml"
    if not path.is_file():
        names = ", ".join(p.stem for p in shipped())
        raise ScenarioError(f"unknown scenario {name_or_path!r}; shipped: {names} (or give a path to a .toml file)")
    return load(path, profile)


def select(scenario: Scenario, text: str) -> list[int]:
    """``--cases``: the case numbers that ``text`` names, in the scenario's order.

    Comma-separated items, each a case number (``3``), a range (``7-13``) or words that a case's label
    contains (``restart-broker``, ``arq on redis``; any case, whole label). Raises ValueError naming the
    item that selects nothing or is out of range."""
    count = len(scenario.cases)
    chosen: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        first, dash, last = item.partition("-")
        if first.strip().isdigit() and (not dash or last.strip().isdigit()):
            low, high = int(first), int(last) if dash else int(first)
            if low > high or high >= count:
                raise ValueError(f"--cases {item!r}: the scenario has cases 0..{count - 1}")
            chosen.update(range(low, high + 1))
            continue
        found = {c.index for c in scenario.cases if item.lower() in c.label.lower()}
        if not found:
            raise ValueError(f"--cases {item!r}: no case number, range or label matches it "
                             "(`taskbench scenarios` lists the cases)")
        chosen |= found
    if not chosen:
        raise ValueError(f"--cases {text!r} selects no case")
    return sorted(chosen)


def __getattr__(name: str) -> Any:
    if name in ("Scenario", "ScenarioError", "load"):
        from taskbench.scenarios import parse

        return getattr(parse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FILES", "Scenario", "ScenarioError", "load", "resolve", "select", "shipped"]
