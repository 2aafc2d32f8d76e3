"""A scenario file's library settings: ``[options.LIB]`` for every case, ``options.LIB.KEY`` merged key by key
over it, each checked by the library's model with its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from taskbench.scenarios import ScenarioError, load

HEAD = 'name = "t"\ndescription = "d"\nkind = "queue"\n'


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def test_the_top_level_table_applies_to_every_case(tmp_path: Path) -> None:
    scenario = load(_write(tmp_path, """
        [options.rq]
        worker_ttl = 17
        maintenance_interval = 2

        [defaults]
        workload = "io/simple"
        duration = 1.0

        [matrix]
        backend = ["rq", "rq-retry"]

        [[case]]
        backend = "arq"
    """))
    assert [c.params["options"] for c in scenario.cases] == [{"rq": {"worker_ttl": 17, "maintenance_interval": 2}}] * 3
    assert "options" not in scenario.varying  # the same in every case: no label shows it


def test_a_case_overrides_one_key_and_keeps_the_others(tmp_path: Path) -> None:
    """case over matrix over defaults over the table, a key at a time; the label and the record show the result."""
    scenario = load(_write(tmp_path, """
        [options.rq]
        worker_ttl = 17
        maintenance_interval = 2

        [options.saq]
        retries = 2

        [defaults]
        workload = "io/simple"
        duration = 1.0
        options.rq.maintenance_interval = 5

        [[matrix]]
        backend = ["rq"]
        options.rq.worker_ttl = 30

        [[case]]
        backend = "rq"
        options.rq.maintenance_interval = 9

        [[case]]
        backend = "saq"
        options.saq.retries = 3
    """))
    block, case, saq = scenario.cases
    assert block.params["options"] == {"rq": {"worker_ttl": 30, "maintenance_interval": 5}, "saq": {"retries": 2}}
    assert case.params["options"] == {"rq": {"worker_ttl": 17, "maintenance_interval": 9}, "saq": {"retries": 2}}
    assert saq.params["options"] == {"rq": {"worker_ttl": 17, "maintenance_interval": 5}, "saq": {"retries": 3}}
    # the automatic label names the case's own library's settings, as merged
    assert block.label == "rq, rq.worker_ttl=30, rq.maintenance_interval=5"
    assert case.label == "rq, rq.worker_ttl=17, rq.maintenance_interval=9"
    assert saq.label == "saq, saq.retries=3"


def test_the_record_and_the_run_take_the_merged_options(tmp_path: Path) -> None:
    from taskbench.scenarios.run import queue_config

    scenario = load(_write(tmp_path, """
        [options.rq]
        worker_ttl = 17
        maintenance_interval = 2

        [[case]]
        backend = "rq"
        workload = "io/simple"
        duration = 1.0
        options.rq.worker_ttl = 30
    """))
    (case,) = scenario.cases
    config = queue_config(case, tmp_path, None)
    assert config.library_options("rq").model_dump() == {"worker_ttl": 30, "maintenance_interval": 2}


def test_a_profile_merges_its_options_too(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        [options.rq]
        worker_ttl = 17
        maintenance_interval = 2

        [defaults]
        backend = "rq"
        workload = "io/simple"
        duration = 1.0

        [profile.slow]
        options.rq.maintenance_interval = 600
    """)
    (case,) = load(path, "slow").cases
    assert case.params["options"] == {"rq": {"worker_ttl": 17, "maintenance_interval": 600}}


@pytest.mark.parametrize(
    ("body", "line", "fragment"),
    [
        ("[options.saq]\nretries = 3\ntries = 2\n", 6, "options.saq has no setting 'tries'; its settings: retries"),
        ("[options.saq]\nretries = 0\n", 5, "options.saq.retries: Input should be greater than or equal to 1"),
        ("[options.kue]\nx = 1\n", 4, "no library 'kue' takes settings"),
        ("options = 3\n", 4, "'options' must be a table per library"),
        ("[defaults]\nworkload = 'io/simple'\nduration = 1\noptions.saq.retries = 2\noptions.saq.retry = 2\n", 8,
         "options.saq has no setting 'retry'"),
        ("[defaults]\nworkload = 'io/simple'\nduration = 1\n[[case]]\nbackend = 'arq'\n[[case]]\nbackend = 'saq'\n"
         "options.saq = { retries = 'many' }\n", 11, "options.saq.retries: Input should be a valid integer"),
        ("[[matrix]]\nbackend = ['arq']\nworkload = 'io/simple'\nduration = 1\nusers = 2\n"
         "options.rq.worker_ttl = 1\n", 9, "options.rq.worker_ttl: Input should be greater than or equal to 16"),
    ],
)
def test_a_bad_library_key_or_value_names_its_line(tmp_path: Path, body: str, line: int, fragment: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(HEAD + body)
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    assert fragment in str(err.value)
