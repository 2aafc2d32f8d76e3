"""The result vocabulary of ``--scrape-api``: the API's ``/metrics`` read through a case's load and drain,
as the Prometheus of seed 000's lab read it, and what the API's own request counter said beside the
driver's answers.

Seed 000 (table 1) drew its RPS from the API's request metrics in Grafana and reported two things a load
tool alone cannot see: under cpu/simple the API "did not always manage to serve its metrics", and under
cpu/process Grafana showed about 0 RPS where Locust saw 16, because the API counts a request when its
background task has run. :class:`ApiScrapeRecord` keeps each scrape (when, how long, whether it failed,
the API's request and task counters) and the driver's answers by the same second.
"""

from __future__ import annotations

from taskbench.results.model import Model


class ScrapeSample(Model):
    """One ``GET /metrics``: ``t`` s after the load's start, how long it took, and what it read."""

    t: float
    seconds: float
    #: why it failed (a timeout, a refused connection, an HTTP status); None for a scrape that answered
    error: str | None = None
    #: the API's ``http_requests_total`` (every handler but /metrics and /health), the warm-up's taken off
    counted: float | None = None
    #: the API's ``taskbench_tasks_succeeded_total`` (``background``: the tasks its process ran)
    executed: float | None = None
    #: the requests the driver had an answer to in the whole seconds of its load before ``t`` (all, after the load)
    answered: int | None = None


class ApiScrapeRecord(Model):
    """Every scrape of one case and the figures read from them."""

    url: str
    interval_s: float
    #: a scrape that takes longer fails: Prometheus's default ``scrape_timeout``, 10 s
    timeout_s: float
    #: the load's length (s): the scrapes up to it are during the load, the later ones during the drain
    load_s: float = 0.0
    samples: list[ScrapeSample] = []

    @property
    def failed(self) -> int:
        return sum(1 for s in self.samples if s.error is not None)

    @property
    def late(self) -> int:
        """Scrapes that answered, but took longer than the interval between two scrapes (a Prometheus scraping
        at that interval would have failed them: its timeout may not exceed its interval)."""
        return sum(1 for s in self.samples if s.error is None and s.seconds > self.interval_s)

    @property
    def slowest_s(self) -> float | None:
        return max((s.seconds for s in self.samples), default=None)

    def during_load(self) -> ScrapeSample | None:
        """The last scrape that answered during the load."""
        return next((s for s in reversed(self.samples)
                     if s.error is None and s.answered is not None and s.t <= self.load_s), None)

    def describe(self) -> str:
        """One line: the scrapes, and the API's count against the driver's at the load's last answered scrape."""
        n = len(self.samples)
        text = (f"API /metrics every {self.interval_s:g} s through the load and the drain: {n} scrape(s), "
                f"{self.failed} failed (timeout {self.timeout_s:g} s), {self.late} late (over {self.interval_s:g} s)")
        if self.slowest_s is not None:
            text += f", slowest {self.slowest_s:.2f} s"
        last = self.during_load()
        if last is not None and last.counted is not None:
            text += (f"; at {last.t:.0f} s the API had counted {last.counted:.0f} request(s) where the driver "
                     f"had {last.answered} answered")
        return text
