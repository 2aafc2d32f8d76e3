"""``--scrape-api``: the API's /metrics read through the load and the drain, failed and late scrapes counted,
the API's request count beside the driver's answers (seed 000, table 1, rows 9 and 10)."""

from __future__ import annotations

import http.server
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from taskbench.driver import LoadSpec
from taskbench.harness.api_scrape import MAX_TIMEOUT, ApiScrape, answered_by
from taskbench.harness.commands.run import Runner
from taskbench.harness.config import Placement, RunConfig
from taskbench.results import QueueCase
from taskbench.results.api_scrape import ApiScrapeRecord, ScrapeSample
from taskbench.wait import wait_until


class _Metrics(http.server.BaseHTTPRequestHandler):
    """/metrics whose request counter grows by 10 a scrape; ``delays`` (s) are taken one per scrape."""

    delays: ClassVar[list[float]] = []
    scrapes: ClassVar[int] = 0

    def do_GET(self) -> None:
        cls = type(self)
        delay = cls.delays.pop(0) if cls.delays else 0.0
        time.sleep(delay)
        body = (f'http_requests_total{{method="POST",status="200",handler="/x"}} {10 * cls.scrapes}\n'
                f"taskbench_tasks_succeeded_total {5 * cls.scrapes}\n").encode()
        cls.scrapes += 1
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the scraper gave up on it (its timeout)
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics_url() -> Iterator[str]:
    _Metrics.delays, _Metrics.scrapes = [], 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_answered_by_counts_the_whole_seconds_before_t() -> None:
    rows = [{"t": 0, "completed": 5}, {"t": 1, "completed": 7}, {"t": 2, "completed": 9}]
    assert answered_by(rows, 0.5) == 0
    assert answered_by(rows, 1.0) == 5
    assert answered_by(rows, 2.9) == 12
    assert answered_by(rows, 60) == 21


def test_scrapes_count_failed_and_late_ones_and_take_the_warm_up_off(metrics_url: str) -> None:
    # the baseline scrape, then one on time, one late (0.6 s against a 0.3 s interval), one that times out,
    # then the rest on time
    _Metrics.delays = [0.0, 0.0, 0.6, 1.5]
    started = time.time()
    with ApiScrape(metrics_url, interval=0.3, timeout=1.0) as scraping:
        # the failed scrape and an answered one after it
        wait_until(lambda: any(s.error for s in scraping.samples) and scraping.samples[-1].error is None, 30,
                   what="a scrape after the one that times out")
    record = scraping.record([{"t": 0, "completed": 50}, {"t": 1, "completed": 50}], started + 1.5)
    assert record.timeout_s == 1.0
    assert record.failed == 1 and record.late == 1
    (late,) = [s for s in record.samples if s.error is None and s.seconds > 0.3]
    assert 0.6 <= late.seconds < 1.0
    (failed,) = [s for s in record.samples if s.error is not None]
    assert "timed out" in failed.error
    answered = [s for s in record.samples if s.error is None]
    assert len(answered) >= 3
    # the counter held 0 at the baseline: the samples start at 10 and never go back
    counts = [s.counted for s in answered]
    assert counts[0] == 10 and counts == sorted(counts)
    assert all(s.executed == s.counted / 2 for s in answered)
    # scrapes never overlap, and the one after the failed scrape waited for it
    ends = [(s.t, s.t + s.seconds) for s in record.samples]
    assert all(b[0] >= a[1] - 0.01 for a, b in itertools.pairwise(ends))
    last = record.during_load()
    assert last is not None and last.t <= 1.5 and last.answered == answered_by([{"t": 0, "completed": 50},
                                                                                 {"t": 1, "completed": 50}], last.t)
    assert "1 failed (timeout 1 s), 1 late (over 0.3 s)" in record.describe()


def test_a_record_says_late_scrapes_and_the_counts_at_the_load_end() -> None:
    record = ApiScrapeRecord(url="u", interval_s=1.0, timeout_s=1.0, load_s=3.0, samples=[
        ScrapeSample(t=0.0, seconds=0.01, counted=0, executed=0, answered=0),
        ScrapeSample(t=1.0, seconds=0.9, error="timed out"),
        ScrapeSample(t=2.0, seconds=0.4, counted=3, executed=3, answered=40),
        ScrapeSample(t=4.0, seconds=0.02, counted=30, executed=30, answered=60),
    ])
    assert (record.failed, record.late, record.slowest_s) == (1, 0, 0.9)
    assert record.during_load() == record.samples[2]
    assert record.describe().endswith("at 2 s the API had counted 3 request(s) where the driver had 40 answered")


def test_an_interval_under_a_tenth_of_a_second_is_refused(out_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"scrape at most every 0\.1 s"):
        RunConfig(backends=("background",), scrape_api=0.01, output=out_dir)


@pytest.mark.slow
def test_a_run_scrapes_the_api_through_its_load_and_drain(redis_url: str, out_dir: Path) -> None:
    # BackgroundTasks run after the answer, inside the request's ASGI call: the API's counter (its HTTP
    # middleware) counts a request once its task has run, so it trails the driver's answers
    config = RunConfig(backends=("background",), workload="cpu/simple", cpu_iterations=300_000,
                       load=LoadSpec(users=10, requests=60), redis_url=redis_url, output=out_dir, warmup=5,
                       placement=Placement.parse("auto"), scrape_api=0.5)
    said: list[str] = []
    result = Runner(config, say=said.append).run()
    (case,) = result.cases
    assert isinstance(case, QueueCase) and case.api_scrape is not None, case.failures
    record = case.api_scrape
    assert case.status == "ok", case.failures
    assert record.interval_s == 0.5 and record.timeout_s == MAX_TIMEOUT == 10.0
    assert record.samples[0].t < 0.5  # from the load's start
    assert record.samples[-1].t > record.load_s  # to the drain's end
    # the last scrape, after the drain: every request counted, every task run in the API's process
    final = record.samples[-1]
    assert final.error is None, record
    assert final.counted == final.executed == 60 == case.summary.accepted
    assert final.answered == case.load.completed
    assert any("API /metrics every 0.5 s through the load and the drain" in line for line in said), said
