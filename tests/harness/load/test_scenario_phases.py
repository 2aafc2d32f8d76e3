"""A scenario's ``[[phases]]``: every queue case gets them as its load; a broken entry names its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskbench.scenarios import ScenarioError
from taskbench.scenarios.parse import load
from taskbench.scenarios.run import queue_config

HEAD = '''name = "phased"
description = "two backends through the same phases"
kind = "queue"

[defaults]
workload = "io/simple"
users = 50

[matrix]
backend = ["arq", "saq"]
'''

PHASES = '''
[[phases]]
kind = "warmup"
duration = "5s"
rate = 100

[[phases]]
kind = "steady"
duration = 20
rate = 400

[[phases]]
kind = "burst"
duration = 5
rate = "x2"
'''


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "phased.toml"
    path.write_text(text)
    return path


def test_every_case_runs_the_phases(tmp_path: Path) -> None:
    scenario = load(_write(tmp_path, HEAD + PHASES))
    assert [c.params["backend"] for c in scenario.cases] == ["arq", "saq"]
    for case in scenario.cases:
        assert [(p.kind, p.duration, p.rate) for p in case.phases] == [
            ("warmup", 5, 100), ("steady", 20, 400), ("burst", 5, 800)]
        config = queue_config(case, tmp_path, None)
        assert config.phases == case.phases
        assert config.load.model == "open" and config.load.users == 50
        assert [s.rate for s in config.load.schedule] == [100, 400, 800]


@pytest.mark.parametrize(("broken", "replacement", "line", "message"), [
    ('kind = "burst"', 'kind = "nap"', 23, "phase 3: unknown phase kind 'nap'"),
    ('rate = "x2"', 'rate = "fast"', 25, "phase 3: rate 'fast' is neither"),
    ('duration = 20', 'duration = "long"', 19, "phase 2: duration 'long' is not a number of seconds"),
    ('duration = 20\n', '', 17, "phase 2: a phase needs 'duration'"),
    ('duration = 20', 'pace = 20', 19, "phase 2: unknown key 'pace' in a phase"),
    ('rate = 400', 'rate = 400\nspeed = 2', 21, "phase 2: unknown key 'speed'"),
    ('rate = 400', 'rate = true', 20, "phase 2: rate must be a number or xM"),
])
def test_a_broken_phase_names_its_line(tmp_path: Path, broken: str, replacement: str, line: int,
                                       message: str) -> None:
    path = _write(tmp_path, HEAD + PHASES.replace(broken, replacement))
    with pytest.raises(ScenarioError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:{line}: {message}")


def test_the_phases_decide_the_cases_rate_and_length(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD.replace("users = 50", "users = 50\nduration = 10.0") + PHASES)
    with pytest.raises(ScenarioError, match="leave out 'duration'"):
        load(path)
    http = HEAD.replace('kind = "queue"', 'kind = "http"').replace('workload = "io/simple"', 'endpoint = "hello"')
    http = http.replace('backend = ["arq", "saq"]', 'server = ["uvicorn"]')
    with pytest.raises(ScenarioError, match=r"phased.toml:12: phases are a queue scenario's load"):
        load(_write(tmp_path, http + PHASES))
