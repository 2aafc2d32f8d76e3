"""Scenarios: the seed articles' experiments as TOML files a user runs, copies and edits.

``taskbench scenarios`` lists the shipped files; ``taskbench run --scenario NAME|PATH`` runs one.
"""

from __future__ import annotations

from pathlib import Path

from taskbench.scenarios.spec import Scenario, ScenarioError, load

FILES = Path(__file__).parent / "files"


def shipped() -> list[Path]:
    return sorted(FILES.glob("*.toml"))


def resolve(name_or_path: str, profile: str | None = None) -> Scenario:
    """A shipped scenario by name, or a file by path; ``profile``: apply its ``[profile.NAME]``."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if not candidate.is_file():
            raise ScenarioError(f"{candidate}: no such scenario file")
        return load(candidate, profile)
    path = FILES / f"{name_or_path}.toml"
    if not path.is_file():
        names = ", ".join(p.stem for p in shipped())
        raise ScenarioError(f"unknown scenario {name_or_path!r}; shipped: {names} (or give a path to a .toml file)")
    return load(path, profile)


__all__ = ["FILES", "Scenario", "ScenarioError", "load", "resolve", "shipped"]
