"""A table cell holds any help text: pipes escaped, lines joined, markup kept only in code spans."""

from __future__ import annotations

from taskbench.cli.docs.markdown import cell, number, table


def test_a_cell_escapes_pipes_and_joins_lines() -> None:
    assert cell("a | b\n  c") == "a \\| b c"


def test_a_cell_escapes_markup_outside_code_only() -> None:
    assert cell("pinned/<name>/ and TASKBENCH_* in `a<b*c`") == "pinned/\\<name>/ and TASKBENCH_\\* in `a<b*c`"
    assert cell("`x | y`") == "`x \\| y`"  # a pipe ends a cell even inside code


def test_a_table_has_a_header_and_a_rule() -> None:
    assert table(("a", "b"), [("1", "x|y")]) == ["| a | b |", "| --- | --- |", "| 1 | x\\|y |"]


def test_a_bound_is_written_as_in_the_code() -> None:
    assert [number(10_000_000), number(0.001), number(1e6), number(60.0)] == ["10000000", "0.001", "1000000", "60"]
