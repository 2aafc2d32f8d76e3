"""``--scrape-api S``: the API's ``/metrics`` read every S seconds through a case's load and drain, as a
Prometheus beside the service would (seed 000's lab scraped every 15 s), on a thread of the harness.

A scrape that takes longer than 10 s fails, as under Prometheus's default ``scrape_timeout``; one that takes
longer than the interval is late (a Prometheus scraping at that interval would have cut it off). Scrapes do
not overlap: a slow one delays the next; a last one is taken when the drain has ended. Each sample keeps
the API's request counter and its task counter less what they held before the load (the warm-up), and,
once the load has ended, the driver's answers per second are laid beside them (:func:`answered_by`).

Read by :class:`taskbench.harness.case.reference.ReferenceCase` (armed around the load and the drain);
the record is :class:`taskbench.results.api_scrape.ApiScrapeRecord`.
"""

from __future__ import annotations

import threading
import time
import urllib.error
from collections.abc import Sequence
from types import TracebackType

from taskbench.harness.scrape import scrape
from taskbench.results.api_scrape import ApiScrapeRecord, ScrapeSample

#: Prometheus's default ``scrape_timeout``
MAX_TIMEOUT = 10.0
REQUESTS = "http_requests_total"
EXECUTED = "taskbench_tasks_succeeded_total"


class ApiScrape:
    """Scrapes ``url`` every ``interval`` s from ``__enter__`` (the load's start) to ``__exit__``."""

    def __init__(self, url: str, *, interval: float, timeout: float = MAX_TIMEOUT) -> None:
        self.url = url
        self.interval = interval
        self.timeout = timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="taskbench-api-scrape", daemon=True)
        self._t0 = 0.0
        self._t0_wall = 0.0
        self._base: dict[str, float] = {}
        self.samples: list[ScrapeSample] = []

    def _scrape(self) -> ScrapeSample:
        began = time.monotonic()
        try:
            totals = scrape(self.url, timeout=self.timeout)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            return ScrapeSample(t=round(began - self._t0, 3), seconds=round(time.monotonic() - began, 3),
                                error=str(reason) or type(reason).__name__)
        return ScrapeSample(t=round(began - self._t0, 3), seconds=round(time.monotonic() - began, 3),
                            counted=totals[REQUESTS] - self._base.get(REQUESTS, 0.0),
                            executed=totals[EXECUTED] - self._base.get(EXECUTED, 0.0))

    def _loop(self) -> None:
        due = self._t0
        while not self._stop.is_set():
            self.samples.append(self._scrape())
            due += self.interval
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            due = max(due, time.monotonic() - self.interval)  # a slow scrape delays the next, never bunches them

    def __enter__(self) -> ApiScrape:
        try:  # what the warm-up left on the counters: the samples count the load's requests alone
            self._base = scrape(self.url, timeout=self.timeout)
        except (urllib.error.URLError, OSError, ValueError):
            self._base = {}
        self._t0, self._t0_wall = time.monotonic(), time.time()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5.0)
        if not self._thread.is_alive():
            self.samples.append(self._scrape())  # the counters as the drain left them

    def record(self, per_second: Sequence[dict[str, int]], load_end: float) -> ApiScrapeRecord:
        """The record, with the driver's answers (its ``per_second`` rows) beside each sample: those of the whole
        seconds before it during the load, all of them once the load has ended (``load_end``, ``time.time()``)."""
        load_s = max(0.0, load_end - self._t0_wall)
        everything = sum(row["completed"] for row in per_second)
        samples = [s.model_copy(update={"answered": everything if s.t >= load_s else answered_by(per_second, s.t)})
                   for s in list(self.samples)]
        return ApiScrapeRecord(url=self.url, interval_s=self.interval, timeout_s=self.timeout,
                               load_s=round(load_s, 3), samples=samples)


def answered_by(per_second: Sequence[dict[str, int]], t: float) -> int:
    """The requests answered (any status) in the driver's whole seconds before ``t`` (s from its start)."""
    return sum(row["completed"] for row in per_second if row["t"] + 1 <= t)
