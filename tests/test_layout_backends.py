"""A backend is one package: what names its library, and its settings, live in ``taskbench/backends/<library>/``."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from taskbench import backends, params
from taskbench.settings import Settings

SRC = Path(__file__).resolve().parents[1] / "src" / "taskbench"
#: the libraries no other part of taskbench needs to name (the others are named by the seeds' scenarios,
#: the published benchmarks and the reports that compare them)
CONFINED = ("pgqueuer", "huey", "rq", "procrastinate")


def _naming(library: str) -> list[str]:
    word = re.compile(rf"(?<![\w-]){re.escape(library)}(?![\w])", re.IGNORECASE)
    own = SRC / "backends" / library
    return [str(path.relative_to(SRC)) for path in sorted(SRC.rglob("*.py"))
            if own not in path.parents and word.search(path.read_text())]


def test_a_confined_library_is_named_only_in_its_own_package() -> None:
    found = {library: _naming(library) for library in CONFINED}
    assert found == {library: [] for library in CONFINED}, found


def test_every_backend_lives_in_the_package_that_declares_it() -> None:
    for meta in backends.REGISTRY.values():
        folder = SRC / "backends" / meta.package
        assert (folder / "__init__.py").is_file(), meta.name
        for module in (meta.module, meta.floor or meta.module):
            path = SRC.parent / (module.replace(".", "/") + ".py")
            assert path.is_file() and folder in path.parents, (meta.name, module)


def test_no_library_setting_is_declared_outside_its_package() -> None:
    """The run's parameters, the processes' settings and RunConfig name no library's setting: each is a field
    of its package's Options model, reached through ``options``."""
    from taskbench.harness.config import RunConfig

    prefixes = tuple(f"{package}_" for package in {meta.package for meta in backends.REGISTRY.values()})
    declared = {
        "params": [p.name for p in params.SCHEMA],
        "Settings": list(Settings.model_fields),
        "RunConfig": [f.name for f in dataclasses.fields(RunConfig)],
    }
    found = {where: [name for name in names if name.startswith(prefixes)] for where, names in declared.items()}
    assert found == {where: [] for where in declared}, found
    models = {meta.package: meta.options for meta in backends.REGISTRY.values()}
    assert set(backends.libraries()) <= set(models)
    for package, model in backends.libraries().items():
        for key, field in model.model_fields.items():
            assert field.description, f"{package}.{key} says nothing of what it does"


def test_no_backend_package_imports_another() -> None:
    """Each package stands on the shared modules of taskbench.backends, never on another library's package:
    so a backend is added or removed with its package alone (a contract of import-linter would have to list
    the packages by name)."""
    import ast

    packages = {meta.package for meta in backends.REGISTRY.values()}
    found = []
    for package in sorted(packages):
        for path in sorted((SRC / "backends" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    parts = name.split(".")
                    if parts[:2] == ["taskbench", "backends"] and len(parts) > 2 and parts[2] in packages - {package}:
                        found.append(f"{path.relative_to(SRC)}: imports {name}")
    assert not found, found
