"""A fault on a seed's pinned versions is measured and judged by nothing: taskbench's registry states
the promises of the lock's versions, not of arq 0.25.0 (docs/results.md, seed 000's row 13: whether
the article's arq worker stops on a broker error)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.slow
def test_a_fault_on_pinned_versions_reports_what_it_cost_and_fails_nothing(
        out_dir: Path, cli: Callable[..., Any]) -> None:
    done = cli("run", "--backends", "arq", "--versions", "article-000", "--concurrency", "1",
               "--fault", "stall-broker@1+1", "--duration", "3", "--drain-timeout", "60", "--output", str(out_dir))
    assert done.exit_code == 0, done.output
    (path,) = out_dir.glob("*/result.json")
    case = json.loads(path.read_text())["cases"][0]
    promise = case["fault"]["promise"]
    assert promise["keeps_accepted"] is False and promise["no_duplicates"] is False
    assert "on article-000's versions, whose promise taskbench does not state" in promise["text"]
    assert case["fault"]["injected"], case["fault"]
    assert case["status"] in ("ok", "errors"), case["failures"]
    env = json.loads(path.read_text())["environments"]["arq@article-000"]
    assert env["packages"]["arq"] == "0.25.0"
