"""The page's plots are compact SVG: the same drawing and labels in far less text (issue 34: a fault
run's page of a hundred cases was 5 MB)."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

from matplotlib.figure import Figure

from taskbench.report import plots

SVG = "{http://www.w3.org/2000/svg}"


def _raw_timeline() -> str:
    fig = Figure(figsize=(plots.WIDTH, plots.HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(range(30), [300 - (i % 7) * 0.123456 for i in range(30)], label="executed tasks/s")
    ax.set_title("Requests and tasks per second")
    ax.set_ylabel("per second (0.05 steps)")
    ax.legend()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _texts(svg: str) -> list[str]:
    return [node.text or "" for node in ET.fromstring(svg).iter(f"{SVG}text")]


def test_a_compact_svg_keeps_every_label_and_shape_in_far_less_text() -> None:
    raw = _raw_timeline()
    small = plots.compact(raw)
    assert _texts(small) == _texts(raw)  # well-formed, and every label as it was ("0.05" too)
    shapes = [(node.tag, node.get("clip-path")) for node in ET.fromstring(raw).iter()
              if node.tag in (f"{SVG}path", f"{SVG}use", f"{SVG}text")]
    assert shapes == [(node.tag, node.get("clip-path")) for node in ET.fromstring(small).iter()
                      if node.tag in (f"{SVG}path", f"{SVG}use", f"{SVG}text")]
    assert "<metadata" not in small and "font-family" in small.split("</style>")[0]
    assert small.count("font-family") == 1
    assert not re.search(r'\d\.\d\d', " ".join(re.findall(r' d="([^"]*)"', small)))  # a tenth of a point
    assert len(small) < 0.6 * len(raw)


def test_the_plots_the_page_draws_are_compact() -> None:
    svg = plots.timeline("t", [plots.Line("a", [0, 1, 2], [1.0, 2.0, 3.0])], "per second")
    assert svg.startswith("<svg") and "<metadata" not in svg and svg.count("font-family") == 1
    ET.fromstring(svg)
