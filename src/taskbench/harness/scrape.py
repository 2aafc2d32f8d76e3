"""Reads the /metrics of every process of a case and checks the task counters against the ledger."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from taskbench.wait import wait_until

#: what a scrape adds up over every sample (the cross-check, ``taskbench up``'s live counts)
TOTALS = (
    "taskbench_tasks_started_total",
    "taskbench_tasks_succeeded_total",
    "taskbench_tasks_failed_total",
    "taskbench_tasks_redelivered_total",
    "taskbench_enqueue_errors_total",
    "taskbench_tasks_in_progress",
    "taskbench_queue_depth",
    "http_requests_total",
)


def scrape(url: str, timeout: float = 5.0) -> dict[str, float]:
    """Sum of every sample of each counter in ``TOTALS`` (and the request count) at one endpoint."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback URLs we registered
        text = resp.read().decode()
    return totals_of(text)


def totals_of(text: str) -> dict[str, float]:
    """Sum of every sample of each counter in ``TOTALS`` in an exposition text."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = dict.fromkeys(TOTALS, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in sums:
                sums[sample.name] += sample.value
    return sums


def cross_check(urls: dict[str, str], ledger_executions: int, *, settle: float = 3.0,
                finals: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Scrape every component; ``succeeded`` summed over them must equal the ledger's executions.

    A task increments its counter just after its ledger write, so a short settle time is allowed.
    ``finals``: a component's counters as it stopped (exposition text), read when it cannot be scraped.
    """
    def attempt() -> dict[str, Any]:
        components: dict[str, Any] = {}
        for name, url in sorted(urls.items()):
            try:
                components[name] = scrape(url)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                components[name] = (totals_of(finals[name]) if finals and name in finals
                                    else {"error": f"{url}: {exc}"})
        totals = _add(c for c in components.values() if "error" not in c)
        match = totals.get("taskbench_tasks_succeeded_total", 0) == ledger_executions
        errors = [c["error"] for c in components.values() if "error" in c]
        last.update(components=components, totals=totals, ledger_executions=ledger_executions,
                    match=match and not errors, errors=errors)
        return last

    last: dict[str, Any] = {}
    wait_until(lambda: attempt()["match"], settle, interval=0.2, raise_on_timeout=False)
    return last


def _add(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for row in rows:
        for key, value in row.items():
            totals[key] = totals.get(key, 0.0) + value
    return totals
