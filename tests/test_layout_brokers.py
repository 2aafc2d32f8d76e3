"""A broker is asked, never compared by name: outside :mod:`taskbench.brokers` no source compares a
broker's name (``broker == "redis"``, ``kind in ("rabbitmq", "nats")``, ``"redis" in names``); it asks
the broker's module instead (``brokers.info(broker).can_be_ledger``). A dict keyed by broker name,
looked up, is fine: only comparisons are found."""

from __future__ import annotations

import ast
from pathlib import Path

from taskbench import brokers

SRC = Path(__file__).resolve().parents[1] / "src" / "taskbench"
#: where the brokers live: the one place that may name them
OWN = ("brokers/",)
#: areas being rewritten that still compare names; each is emptied as its owner moves to the brokers' API
PENDING: set[str] = set()
_OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _names_in(node: ast.expr) -> list[str]:
    """The broker names ``node`` is or holds: a string, or a tuple/list/set literal of strings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in brokers.BROKERS else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for element in node.elts for name in _names_in(element)]
    return []


def comparisons(source: str) -> list[tuple[int, str]]:
    """(line, the comparison's text) of each comparison of a broker's name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, _OPS) for op in node.ops):
            continue
        if any(_names_in(operand) for operand in [node.left, *node.comparators]):
            found.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return found


def _exempt(relative: str) -> bool:
    return relative.startswith(OWN) or relative.startswith(tuple(PENDING))


def test_no_source_outside_the_brokers_compares_a_broker_name() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if _exempt(relative):
            continue
        found += [f"src/taskbench/{relative}:{line}: {text}" for line, text in comparisons(path.read_text())]
    assert not found, "ask the broker (taskbench.brokers.info(name).…) instead of comparing its name:\n" + \
        "\n".join(found)


def test_the_scan_finds_each_kind_of_comparison() -> None:
    source = "\n".join([
        'a = broker == "redis"', 'b = "postgres" != kind', 'c = kind in ("rabbitmq", "nats")',
        'd = kind not in ["redis"]', 'e = "redis" in names', 'f = {"redis": 1}["redis"]', 'g = x == "api"',
    ])
    assert [line for line, _ in comparisons(source)] == [1, 2, 3, 4, 5]


def test_every_pending_area_still_exists() -> None:
    # an area that is gone, or clean, leaves the list: the exemption never outlives its reason
    for area in PENDING:
        folder = SRC / area
        assert folder.exists(), f"PENDING names {area}, which is gone: remove it"
        assert any(comparisons(p.read_text()) for p in folder.rglob("*.py")), \
            f"{area} compares no broker name any more: remove it from PENDING"
