"""Files a user names and JSON a user writes: a bounded read of a regular file, a depth limit, one line each."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from taskbench import inputs, payload
from tests.helpers import assert_one_line_error
from tests.report.synthetic import queue_run

Cli = Callable[..., Result]
SCENARIO = 'name = "t"\ndescription = "d"\nkind = "queue"\n[defaults]\nworkload = "io/simple"\nrequests = 10\n' \
           '[[case]]\nbackend = "arq"\n'


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    """A sparse 5 GB file: reading it whole would take the machine's memory."""
    path = tmp_path / "huge.json"
    with path.open("wb") as out:
        out.truncate(5 * 1024 ** 3)
    return path


def _not_files(tmp_path: Path, fifo: Path, huge: Path) -> list[tuple[str, str]]:
    """Each path that is no file a command can read whole, and what its one line says."""
    return [("/dev/zero", "not a regular file (a character device)"),
            ("/dev/urandom", "not a regular file (a character device)"),
            (str(fifo), "not a regular file (a named pipe)"),
            (str(tmp_path), "Is a directory"),
            (str(huge), "larger than"),
            (str(tmp_path / "missing.json"), "No such file or directory")]


def test_the_reader_takes_a_regular_file_and_at_most_its_limit_plus_one_byte(
        tmp_path: Path, fifo: Path, huge: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 100)
    assert inputs.read_bytes(small, 100) == b"x" * 100
    with pytest.raises(inputs.TooLargeError, match="larger than 99 bytes"):
        inputs.read_bytes(small, 99)
    link = tmp_path / "link"
    link.symlink_to(small)
    assert inputs.read_bytes(link, 100) == b"x" * 100  # a link to a regular file is that file
    for path, message in _not_files(tmp_path, fifo, huge):
        with pytest.raises(inputs.InputError, match=re.escape(message)):
            inputs.read_bytes(path, 1024)
    small.write_bytes(b"a\nb\xff")
    with pytest.raises(inputs.InputError, match="line 2, byte 3"):
        inputs.read_text(small, 100)


def test_every_file_a_user_names_is_read_bounded_and_refused_in_one_line(
        tmp_path: Path, fifo: Path, huge: Path, cli: Cli) -> None:
    good = tmp_path / "good.json"
    good.write_text(queue_run().to_json())
    out = str(tmp_path / "results")
    for path, message in _not_files(tmp_path, fifo, huge):
        for args in (["run", "-w", "examples/tasks.py:call_stub", "--payload", path, "--output", out],
                     ["run", "--target", "http://127.0.0.1:1/orders", "--backend", "arq", "--payload", path,
                      "--output", out],
                     ["collect", path, "--output", out],
                     ["report", path], ["compare", str(good), path], ["compare", path, "--fail-if", "lost > 0"],
                     ["run", "--scenario", path, "--output", out],
                     ["parity", "--from", path]):
            missing = "--scenario" in args and message.startswith("No such file")
            assert_one_line_error(cli(*args), "no such scenario file" if missing else message)


def test_a_scenario_or_parity_file_larger_than_its_limit_is_refused_without_reading_it(
        huge: Path, tmp_path: Path, cli: Cli) -> None:
    scenario = huge.rename(tmp_path / "huge.toml")
    assert_one_line_error(cli("run", "--scenario", str(scenario)), "larger than 1,048,576 bytes")
    assert_one_line_error(cli("parity", "--from", str(scenario)), "larger than 16,777,216 bytes")
    assert_one_line_error(cli("collect", str(scenario)), "larger than 67,108,864 bytes")
    small = tmp_path / "small.toml"
    small.write_text(SCENARIO)
    from taskbench.scenarios import resolve

    assert [case.label for case in resolve(str(small)).cases] == ["case 0"]


@pytest.mark.parametrize(("text", "deep"), [
    ("[" * 5000 + "]" * 5000, True),
    ('{"a":' * 5000 + "1" + "}" * 5000, True),
    ("[" * 65 + "]" * 65, True),
    ("[" * 64 + "]" * 64, False),
    ('{"a": [' * 32 + "]}" * 32, False),  # 64 levels, objects and arrays mixed
    ('{"a": [' * 32 + "{}" + "]}" * 32, True),
    ('{"s": "' + "[" * 5000 + '"}', False),  # brackets in a string are text
    ('{"s": "\\"' + "[" * 5000 + '"}', False),  # an escaped quote does not end the string
    ("[" * 100 + "]" * 100 + "[1]" * 500, True),
    ("[[1], [2], [3]]" * 100, False),  # many brackets, little depth
    ("[" * 5000, False),  # unbalanced: not JSON, which the parser says
])
def test_depth_is_counted_without_recursion(text: str, deep: bool) -> None:
    assert inputs.too_deep(text, 64) is deep
    assert inputs.too_deep(text.encode(), 64) is deep


@pytest.mark.parametrize("body", [
    '{"a": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"a": ' + "[" * 65 + "]" * 65 + "}",
    '{"a":' + '{"b":' * 1900 + "1" + "}" * 1900 + "}",
    '{"a": [{"b": [' + "[" * 70 + "]" * 70 + "]}]}",
])
def test_a_payload_nested_too_deep_is_one_line_naming_the_limit(body: str, tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "deep.json"
    path.write_text(body)
    with pytest.raises(payload.PayloadError, match=f"nested deeper than {payload.MAX_DEPTH} levels"):
        payload.read(path)
    out = cli("run", "-w", "examples/tasks.py:call_stub", "--payload", str(path), "--output", str(tmp_path / "r"))
    assert_one_line_error(out, f"nested deeper than {payload.MAX_DEPTH} levels")


def test_a_payload_at_the_depth_limit_is_a_template(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{"a": ' + "[" * (payload.MAX_DEPTH - 1) + '"{task_id}"' + "]" * (payload.MAX_DEPTH - 1) + "}")
    filled = payload.fill(payload.read(path), "t-1")
    for _ in range(payload.MAX_DEPTH):
        filled = filled["a"] if isinstance(filled, dict) else filled[0]
    assert filled == "t-1"
    assert json.loads(payload.body_template(payload.read(path), task_id=payload.PLACEHOLDER).format(task_id="x"))
