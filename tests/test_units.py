"""A duration and a percentage, written one way on every command line (taskbench.units)."""

from __future__ import annotations

import pytest
import typer

from taskbench.units import Duration, Percent, format_duration, parse_duration, parse_percent


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 30), ("30s", 30), ("30 s", 30), ("2m", 120), ("2min", 120), ("1h", 3600), ("1.5h", 5400),
    ("250ms", 0.25), (".5s", 0.5), (" 10 ", 10),
])
def test_a_duration_is_a_number_of_seconds_or_has_its_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_an_option_in_milliseconds_reads_a_bare_number_as_milliseconds() -> None:
    assert parse_duration("5", unit="ms") == 5
    assert parse_duration("5ms", unit="ms") == 5
    assert parse_duration("0.5s", unit="ms") == pytest.approx(500)


@pytest.mark.parametrize("text", ["", "soon", "-3s", "3d", "nan", "inf", "1e3", "5 5s"])
def test_what_is_no_duration_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration such as 30s, 2m, 1h"):
        parse_duration(text)


@pytest.mark.parametrize(("text", "percent"), [("5", 5), ("5%", 5), ("0.5 %", 0.5), ("-1%", -1), ("100", 100)])
def test_a_percentage_is_a_number_of_percent_its_sign_optional(text: str, percent: float) -> None:
    assert parse_percent(text) == percent


@pytest.mark.parametrize("text", ["", "five%", "nan", "inf%", "5%%", "0.05x"])
def test_what_is_no_percentage_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="expected a percentage such as 5 or 5%"):
        parse_percent(text)


def test_the_parsers_check_their_bounds_as_the_options_usage_error() -> None:
    assert Duration(1, 3600)("2m") == 120
    assert Duration(1, 3600)(30.0) == 30  # an option's default passes as it is
    with pytest.raises(typer.BadParameter, match="between 1s and 1h, got '2h'"):
        Duration(1, 3600)("2h")
    with pytest.raises(typer.BadParameter, match="between 0ms and 1s"):
        Duration(0, 1000, "ms")("2s")
    below = Percent(0, 100, below=True)
    assert below("99.5%") == 99.5
    with pytest.raises(typer.BadParameter, match="from 0% to below 100%"):
        below("100")
    with pytest.raises(typer.BadParameter, match="more than 0% and at most 100%"):
        Percent(0, 100, above=True)("0%")


def test_a_duration_is_written_the_shortest_way() -> None:
    assert [format_duration(s) for s in (0, 0.1, 1, 90, 600, 3600, 5400, 86_400)] == [
        "0s", "100ms", "1s", "90s", "10m", "1h", "90m", "24h"]
