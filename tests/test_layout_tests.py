"""The tests mirror the source: ``tests/a/b/`` holds the tests of ``taskbench.a.b`` (a package, or a module
``a/b.py``), so a module's tests are found where the module is, and a new folder cannot drift from it."""

from __future__ import annotations

from pathlib import Path

import taskbench

SOURCE = Path(taskbench.__file__).parent
TESTS = Path(__file__).parent
REPO = TESTS.parent

#: test folders for code outside src/taskbench: each mirrors a folder of the repository
OUTSIDE = {
    "probe": "probe",  # the probe, a package of its own (probe/src/taskbench_probe), installed alone
    "deploy": "deploy",  # the compose stack, its Prometheus configuration and its Grafana dashboard
}

#: folders of data the tests read, not tests
DATA = {
    "results/samples",  # result files as older versions wrote them, read by tests/results/
}


def _folders() -> list[str]:
    found = {path.parent.relative_to(TESTS).as_posix() for path in TESTS.rglob("*")
             if path.is_file() and "__pycache__" not in path.parts}
    return sorted(found - {"."})


def _mirrors(folder: str) -> bool:
    top = folder.split("/", 1)[0]
    if top in OUTSIDE:
        return (REPO / OUTSIDE[top]).is_dir()
    return (SOURCE / folder / "__init__.py").is_file() or (SOURCE / f"{folder}.py").is_file()


def test_every_test_folder_mirrors_a_package_or_module() -> None:
    strays = [f"tests/{folder}/" for folder in _folders() if folder not in DATA and not _mirrors(folder)]
    assert not strays, (f"{strays}: no package or module of that name in src/taskbench; move the tests "
                        "beside the module they test (tests/harness/faults/ for taskbench.harness.faults)")


def test_every_test_folder_is_a_package() -> None:
    # imported by package name, two folders may hold a test file of the same name
    missing = [f"tests/{folder}/__init__.py" for folder in _folders()
               if folder not in DATA and not (TESTS / folder / "__init__.py").is_file()]
    assert not missing, missing


def test_a_subpackages_tests_are_in_its_folder() -> None:
    # tests/test_brokers.py would test the package taskbench.brokers from beside it, not from tests/brokers/
    packages = {path.parent.name for path in SOURCE.glob("*/__init__.py")}
    misplaced = [path.name for path in TESTS.glob("test_*.py") if path.stem.removeprefix("test_") in packages]
    assert not misplaced, f"{misplaced}: move to tests/<package>/"


def test_the_exceptions_are_still_needed() -> None:
    folders = _folders()
    assert set(folders) >= DATA, DATA - set(folders)
    assert set(OUTSIDE) <= {folder.split("/", 1)[0] for folder in folders}
