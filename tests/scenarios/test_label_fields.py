"""A scenario label substitutes a parameter's name and nothing else; every other field is an error with its line."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result as CliResult

from taskbench.scenarios import ScenarioError, resolve
from tests.helpers import assert_one_line_error

Cli = Callable[..., CliResult]


def _file(folder: Path, label: str) -> Path:
    path = folder / "labels.toml"
    path.write_text(textwrap.dedent(f"""\
        name = "labels"
        description = "labels"
        kind = "queue"

        [defaults]
        workload = "io/simple"
        requests = 10
        io_delay = 0.25

        [[case]]
        backend = "arq"

        [[case]]
        backend = "saq"
        label = {json.dumps(label)}
        """))
    return path


@pytest.mark.parametrize("label", [
    "{backend:>299999999}",  # a format spec: 300 MB of padding
    "{backend.__class__}",  # an attribute
    "{backend.__class__.__init__.__globals__}",
    "{backend[0]}",  # an index
    "{0}", "{}", "{1:>9}",  # positional fields
    "{backend!r}", "{backend!s:^20}",  # a conversion
    "{backend:{workload}}",  # a nested field in a spec
    "{io_delay:.0f}",
    "{Backend}", "{back end}",  # no parameter's name
    "a { b", "{backend", "x {backend}}",  # an unbalanced brace
])
def test_a_label_field_that_is_not_a_name_is_an_error_naming_its_line(label: str, tmp_path: Path,
                                                                     cli: Cli) -> None:
    path = _file(tmp_path, label)
    with pytest.raises(ScenarioError, match=re.escape(f"{path}:15: label ")) as raised:
        resolve(str(path))
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 400
    assert_one_line_error(cli("run", "--scenario", str(path), "--output", str(tmp_path / "out")), f"{path}:15: label")


@pytest.mark.parametrize(("label", "shown"), [
    ("{backend}", "saq"),
    ("{backend} at {io_delay} s", "saq at 0.25 s"),
    ("{{backend}} is {backend}", "{backend} is saq"),  # doubled braces are braces
    ("{workload}/{backend}/{requests}", "io/simple/saq/10"),
    ("no field}", "no field}"),  # without a field, a label is its text
])
def test_a_label_substitutes_named_fields_only(label: str, shown: str, tmp_path: Path) -> None:
    cases = resolve(str(_file(tmp_path, label))).cases
    assert cases[1].label == shown


def test_a_label_naming_a_parameter_the_case_does_not_set_names_it(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="names 'limits', which this case does not set"):
        resolve(str(_file(tmp_path, "{backend} {limits}")))
