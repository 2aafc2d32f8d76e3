"""The HTML report of every kind of result: self-contained, every plot drawn, the table sortable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskbench.report.html import render
from taskbench.results import load
from tests.report.synthetic import queue_run

SAMPLES = sorted((Path(__file__).parent.parent / "results" / "samples").glob("*.json"))
# plots per sample: the timeline, the percentiles, the end-to-end distribution, the driver's CPU per case;
# the comparison of the cases where there are two or more; a scenario's bars
EXPECTED_PLOTS = {"v1-run-fault": 1 + 8, "v1-scenario-queue": 4 + 2, "v1-scenario-http": 3 + 2,
                  "v1-scenario-celery": 1, "v2-run-arq": 4}


def self_contained(page: str) -> None:
    """Nothing is fetched: no external script, style, image or font (the SVG namespace is a name, not a fetch)."""
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", page)
    assert "url(http" not in page and "@import" not in page
    assert "xlink:href=\"http" not in page


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_sample_renders_to_one_page(path: Path) -> None:
    result = load(path)
    page = render(result)
    self_contained(page)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert '<table class="sortable">' in page
    assert page.count('<svg') == EXPECTED_PLOTS[path.stem]
    assert result.run_id in page
    for case in result.cases:
        assert case.name in page
    for backend in result.environments:
        assert backend in page


def test_a_backend_on_a_pinned_set_of_versions_shows_its_library() -> None:
    """``arq@article-000`` (``--versions article-000``) is arq, at the pinned set's version."""
    from taskbench.report.html import setup

    result = queue_run()
    result.environments = {"arq@article-000": {"python": "3.11.7", "packages": {"arq": "0.25.0", "redis": "5.0.3"}}}
    page = setup(result)
    assert '<td class="l">arq@article-000</td>' in page
    assert '<td class="l">arq 0.25.0</td>' in page


def test_a_backend_shows_the_library_it_runs() -> None:
    """``faststream-pubsub`` runs FastStream, ``rq-retry`` RQ: the library column names the library, not the backend."""
    from taskbench.report.html import setup

    result = queue_run()
    result.environments = {
        "faststream-pubsub@article-000": {"python": "3.11.7", "packages": {"faststream": "0.4.7", "redis": "5.0.3"}},
        "rq-retry": {"python": "3.11.7", "packages": {"rq": "3.1.0", "redis": "7.0.1"}},
        "gone-backend": {"python": "3.11.7", "packages": {"gone-backend": "1.0"}},
    }
    page = setup(result)
    assert '<td class="l">faststream 0.4.7</td>' in page
    assert '<td class="l">rq 3.1.0</td>' in page
    assert '<td class="l">gone-backend 1.0</td>' in page  # an older result's name stands for itself


def test_a_run_shows_the_drain_curve_the_fault_and_the_versions() -> None:
    page = render(queue_run(fault=True))
    assert "executed tasks/s" in page  # the drain as a curve
    assert "kill-worker@2: worker-0 killed" in page and "executing again (+2.5 s)" in page
    assert "arq 0.26.3" in page  # the backend's library version in the header
    assert "load.users" in page  # the run's parameters
    assert "not recorded" not in page


def test_the_sample_without_executed_per_second_says_so() -> None:
    page = render(load(Path(__file__).parent.parent / "results" / "samples" / "v1-run-fault.json"))
    assert "executed tasks per second: not recorded" in page


def test_scenario_bars_carry_the_article_and_the_spread() -> None:
    samples = Path(__file__).parent.parent / "results" / "samples"
    queue = render(load(samples / "v1-scenario-queue.json"))
    assert "article" in queue and "RPS per case" in queue
    http = render(load(samples / "v1-scenario-http.json"))
    assert "3: 2244–4694" in http  # the spread of three runs, in the table


def test_bars_with_long_case_labels_keep_room_for_the_bars() -> None:
    # a scenario's labels run to ~120 characters; unwrapped, matplotlib collapsed the axes to nothing
    # ("constrained_layout not applied because axes sizes collapsed to zero") and the chart was empty
    import warnings

    from taskbench.report.plots import Bar, bars

    label = "faststream-pubsub at 0.2 CPU / 200 MB, its worker killed at 1.5 s and restarted (UNSAFE seed wiring)"
    items = [Bar(f"{i}: {label}", 100.0 + i, article=90.0 if i % 2 else None) for i in range(19)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = bars("RPS per case", items, "RPS")
    assert svg.count("<path") > 19  # the bars were drawn
    assert ">0: faststream-pubsub at 0.2 CPU / 200 MB,<" in svg  # wrapped: the first line of a label


def test_the_run_table_has_the_terminals_columns_mode_words_and_bottleneck_line() -> None:
    """The page's summary is the terminal's table: what decides first, when the task was handed over in a
    user's words, the bottleneck named under it, a lost count marked."""
    from taskbench.report.html import summary_table
    from taskbench.results import QueueCase
    from tests.report.test_table import _lagging, _text

    result = _lagging()
    (arq,) = result.cases
    assert isinstance(arq, QueueCase)
    arq.summary.lost = 3
    late = arq.model_copy(update={"backend": "saq", "enqueue_mode": "after-response", "durable": False,
                                  "durability": "after-response enqueue"})
    background = arq.model_copy(update={"backend": "background", "has_worker": False, "durable": False,
                                        "durability": "no queue: tasks live in the API process"})
    result.cases = [arq, late, background]
    page = summary_table(result)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert heads[:8] == ["backend", "enqueued", "accepted/s", "executed/s", "backlog at end", "drain s",
                         "e2e p95", "HTTP ms p50/95/99"], heads
    for words in ("before 202", "after 202", "no queue"):
        assert f">{words}</td>" in page
    assert "awaited" not in page and "*" not in page
    assert 'data-v="896.0">896</td>' in page and 'data-v="37000.0">37 s</td>' in page
    assert '<span class="bad">3</span>/' in page  # the lost count, not the cell around it
    assert "arq: the API accepted 896/s, its 1 worker (concurrency 10) ran 198/s" in page
    # the same figures as the terminal's row, cell for cell
    text = _text(result)
    for cell in re.findall(r"<td[^>]*>(.*?)</td>", page)[:11]:
        assert re.sub(r"<[^>]+>", "", cell) in text, cell
