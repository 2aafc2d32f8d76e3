"""A matrix block's backends chosen by what they declare: the registry's order, a mistake named with its line,
and a backend declared later joining the fault matrix with no edit to faults.toml."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from taskbench import backends
from taskbench.scenarios import ScenarioError, load, resolve
from taskbench.scenarios.selector import SelectorError, select

HEAD = 'name = "t"\ndescription = "d"\nkind = "queue"\n[defaults]\nworkload = "io/simple"\nduration = 1.0\n'


def test_a_selector_picks_by_declaration_in_registry_order() -> None:
    assert select({"broker": "postgres"}) == ["procrastinate", "pgqueuer", "saq-postgres"]
    assert select({"broker": "postgres", "guarantee": "at-most-once"}) == ["procrastinate", "saq-postgres"]
    assert select({"broker": "redis", "threading": "forked"}) == ["rq", "rq-retry"]
    assert select({"broker": "rabbitmq"}) == ["faststream", "celery", "taskiq"]
    assert select({"quick_recovery": True}) == ["pgqueuer", "rq", "rq-retry"]
    # the unsafe seed wirings only when asked for, as --backends all leaves them out
    assert "faststream-pubsub" not in select({"broker": "redis"})
    assert select({"unsafe": True}) == ["faststream-pubsub"]
    assert select({"worker": False}) == ["background"]
    assert select({"threading": "forked", "also": ["huey"], "except": ["rq"]}) == ["rq-retry", "huey"]


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ({"brokers": "redis"}, "no key 'brokers'"),
        ({"threading": "fork"}, "threading = 'fork': one of 'loop', 'threads', 'forked'"),
        ({"worker": 1}, "worker = 1: one of true, false"),
        ({"except": ["kue"]}, "except = 'kue'"),
        ({"broker": "nats", "threading": "forked"}, "selects no backend"),
    ],
)
def test_a_wrong_selector_is_one_line(selector: dict[str, object], fragment: str) -> None:
    with pytest.raises(SelectorError) as err:
        select(selector)
    assert fragment in str(err.value)


def test_a_block_s_selector_becomes_its_list_and_a_mistake_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(HEAD + '[[matrix]]\nfault = ["kill-worker@1"]\nbackend = { broker = "postgres" }\n')
    assert [c.params["backend"] for c in load(path).cases] == ["procrastinate", "pgqueuer", "saq-postgres"]
    path.write_text(HEAD + '[[matrix]]\nbackend = ["arq"]\n[[matrix]]\nfault = ["kill-worker@1"]\n'
                           'backend = { broker = "redis", threading = "fork" }\n')
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}:11: backend selector threading = 'fork'"), str(err.value)
    path.write_text(HEAD + '[[case]]\nbackend = { broker = "redis" }\n')
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}:8: a backend selector"), str(err.value)


def test_a_backend_declared_later_joins_the_fault_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two new backends, one on Redis's event loop and one forking: each joins its rows of faults.toml."""
    registry = dict(backends.REGISTRY)
    registry["newq"] = replace(registry["arq"], name="newq", rank=85)  # arq's modules: implemented
    registry["forkq"] = replace(registry["rq"], name="forkq", rank=135)
    ranked = dict(sorted(registry.items(), key=lambda item: item[1].rank))
    monkeypatch.setattr(backends, "_registry", lambda: ranked)
    scenario = resolve("faults")
    rows = {name: {c.label.removeprefix(name) for c in scenario.cases if c.params["backend"] == name}
            for name in ("arq", "newq", "rq", "forkq")}
    assert len(rows["arq"]) == 10 and rows["newq"] == rows["arq"]
    assert len(rows["rq"]) == 3 and rows["forkq"] == rows["rq"]
    assert len(scenario.cases) == 100 + 10 + 3
