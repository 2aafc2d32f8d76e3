"""The page's comparison of its cases (one chart on shared axes at the top, one range per quantity in the
per-case plots) and its parameters (the changed ones in view, those at their defaults folded)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from taskbench.report.html import render
from taskbench.report.page import flatten
from taskbench.report.parameters import at_default, parameters_html
from taskbench.results import QueueCase, Result
from tests.report.synthetic import queue_run

SVG = "{http://www.w3.org/2000/svg}"


def three_backends(*, e2e_ms: tuple[float, float, float] = (20.0, 60.0, 2000.0)) -> Result:
    """A run of three backends at 500, 300 and 100 requests per second."""
    result = queue_run(rps=500, e2e_ms=e2e_ms[0])
    for backend, rps, e2e in (("saq", 300, e2e_ms[1]), ("rq", 100, e2e_ms[2])):
        case = queue_run(rps=rps, e2e_ms=e2e, seed=rps).cases[0]
        assert isinstance(case, QueueCase)
        result.cases.append(case.model_copy(update={"backend": backend}))
    return result


def _comparison(page: str) -> ET.Element:
    found = re.findall(r'<div class="overview"><figure>(<svg.*?</svg>)', page, flags=re.S)
    assert len(found) == 1, "one comparison chart"
    return ET.fromstring(found[0])


def _ids(node: ET.Element) -> list[str]:
    return [n.get("id", "") for n in node.iter(f"{SVG}g") if n.get("id", "").startswith("tb-")]


def test_the_comparison_has_a_bar_group_per_case_on_one_shared_axis() -> None:
    page = render(three_backends())
    assert page.index("Cases compared") < page.index("<h2>Summary</h2>")  # at the top of the page
    svg = _comparison(page)
    rates = [g for g in svg.iter(f"{SVG}g") if g.get("id") == "tb-rates"]
    assert len(rates) == 1  # one axes holds every case's bars: one shared value axis
    bars = [i for i in _ids(rates[0]) if i.startswith("tb-case-")]
    assert bars == [f"tb-case-{n}-{kind}" for n in range(3) for kind in ("accepted", "executed")]
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert texts.count("tasks per second") == 1  # one axis label for the rates, not one per case
    for name in ("arq", "saq", "rq"):
        assert texts.count(name) == 1  # a label per group, once (the e2e axis shares the case axis)
    e2e = [g for g in svg.iter(f"{SVG}g") if g.get("id") == "tb-e2e"]
    assert len(e2e) == 1 and [i for i in _ids(e2e[0]) if i != "tb-e2e"] == [f"tb-case-{n}-e2e" for n in range(3)]


def test_the_e2e_axis_is_logarithmic_only_over_a_wide_spread() -> None:
    wide = [t.text or "" for t in _comparison(render(three_backends())).iter(f"{SVG}text")]
    assert "ms (log scale)" in wide
    narrow = [t.text or "" for t in _comparison(render(three_backends(e2e_ms=(20.0, 30.0, 40.0)))).iter(f"{SVG}text")]
    assert "ms" in narrow and "ms (log scale)" not in narrow


def test_one_case_has_no_comparison() -> None:
    assert "Cases compared" not in render(queue_run())


def test_the_cases_timelines_share_one_range() -> None:
    """The slowest case's timeline reaches the fastest's top (its own would end near 100/s)."""
    page = render(three_backends())
    timelines = re.findall(r"<svg[^>]*class=\"plot timeline\".*?</svg>", page, flags=re.S)
    assert len(timelines) == 3
    tops = []
    for svg in timelines:
        numbers = [float(t.text) for t in ET.fromstring(svg).iter(f"{SVG}text") if t.text and t.text.isdigit()]
        tops.append(max(numbers))
    assert tops[0] == tops[1] == tops[2] >= 500


def test_parameters_at_their_defaults_are_folded_and_a_changed_one_is_in_view() -> None:
    config = {"workload": "io/simple", "io_delay": 0.0, "warmup": 200,
              "load": {"model": "closed", "users": 50, "ramp_per_s": 10.0, "processes": 1},
              "options": {"saq": {"retries": "1"}, "rq": {"worker_ttl": "60"}},
              "placement": {"api": [0], "workers": [1]}}
    html = parameters_html(config)
    shown, _, folded = html.partition("<details")
    assert "load.users" in shown and "50" in shown
    assert "options.rq.worker_ttl" in shown  # a library's setting off its default (420)
    assert folded.startswith(' class="defaults"><summary>') and " open" not in folded.split(">")[0]
    for name in ("workload", "io_delay", "warmup", "load.model", "load.ramp_per_s", "load.processes",
                 "options.saq.retries", "placement.api"):
        assert name in folded and name not in shown, name


def test_a_plain_run_config_is_at_its_defaults_but_for_its_backends() -> None:
    """Every field of RunConfig() reads as a default (the report's table of run defaults matches RunConfig's)."""
    from taskbench.harness.config import RunConfig

    changed = [name for name, value in flatten(RunConfig().to_dict()) if not at_default(name, value)]
    assert changed == ["backends"]
