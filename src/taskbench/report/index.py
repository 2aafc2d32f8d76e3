"""``results/index.html``: every result under a folder, newest first, with its headline figures and a link.

Rebuilt by ``taskbench report --index`` and after each ``run`` / ``run --scenario``; a file that is not a
readable result is listed as such rather than stopping the index.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from taskbench.files import write_atomic
from taskbench.report.pace import pace, seconds
from taskbench.report.page import document, esc, table
from taskbench.results import RANKED_BY, QueueCase, Result, ResultFormatError, load


def headline(result: Result) -> str:
    """One short line per case: a queue case's accepted/s, executed/s and e2e p95 (what decides between
    backends, as the run's table leads with them); another case's ranked figure and p95; lost/duplicated
    when there are any."""
    parts = []
    for case in result.cases:
        s = case.summary
        if isinstance(case, QueueCase):
            p = pace(case)
            text = f"{case.name}: " + ", ".join(
                ("–" if value is None else f"{value:,.0f}") + f" {label}/s"
                for value, label in ((p.accepted_per_s, "accepted"), (p.executed_per_s, "executed")))
            if p.e2e_p95_ms is not None:
                text += f", e2e p95 {seconds(p.e2e_p95_ms)}"
        else:
            figure = RANKED_BY[case.kind]
            value = s.figure(figure)
            text = f"{case.name}: {value:,.0f} {'tasks/s' if figure == 'tasks_per_s' else 'req/s'}" \
                if value is not None else f"{case.name}: –"
            if s.p95_ms is not None:
                text += f", p95 {s.p95_ms:.0f} ms"
        bad = [f"{n} {label}" for n, label in ((s.lost, "lost"), (s.duplicated, "dup")) if n]
        if bad:
            text += ", " + ", ".join(bad)
        parts.append(text)
    return "; ".join(parts)


def write_index(folder: Path, warn: Callable[[str], None] | None = None) -> tuple[Path, int]:
    """Write ``folder/index.html``; returns its path and how many results it lists.

    A file that is not a readable result (not UTF-8, not JSON, nested too deep, an impossible figure)
    is listed with what is wrong and said to ``warn``; it never stops the index."""
    rows: list[tuple[str, list[str]]] = []
    for path in sorted(folder.rglob("result.json")):
        link = path.with_name("report.html") if path.with_name("report.html").exists() else path
        href = esc(os.path.relpath(link, folder))
        try:
            result = load(path)
        except ResultFormatError as exc:
            if warn is not None:
                warn(f"skipped {exc}")
            rows.append(("", ['<td class="l">–</td>', f'<td class="l"><a href="{href}">{esc(path.parent.name)}</a>'
                              "</td>", f'<td class="l bad" colspan="4">{esc(exc)}</td>']))
            continue
        what = f"scenario {result.scenario.name}" if result.scenario else "run " + ", ".join(
            sorted({getattr(c, "backend", c.name) for c in result.cases}))
        commit = (result.commit.commit or "")[:10] + (" dirty" if result.commit.dirty else "")
        status = "interrupted" if result.interrupted else "passed" if result.passed() else "failed"
        rows.append((result.created, [
            f'<td class="l" data-v="">{esc(result.created.replace("T", " ")[:19])}</td>',
            f'<td class="l"><a href="{href}">{esc(what)}</a></td>',
            f'<td class="l"><code>{esc(" ".join(_short(result.command)))}</code></td>',
            f'<td class="l"><code>{esc(commit)}</code></td>',
            f'<td class="l">{esc(headline(result))}</td>',
            f'<td class="l {"good" if status == "passed" else "bad"}">{status}</td>',
        ]))
    rows.sort(key=lambda r: r[0], reverse=True)
    body = ("<h1>taskbench results</h1>"
            f"<p class=\"note\">{len(rows)} result(s) under {esc(folder.resolve())}; "
            "rebuilt by <code>taskbench report --index</code>. Click a column to sort.</p>" +
            table([("date (UTC)", "l"), ("what", "l"), ("command", "l"), ("commit", "l"),
                   ("headline figures", "l"), ("status", "l")], [cells for _, cells in rows]))
    target = folder / "index.html"
    write_atomic(target, document("taskbench results", body))
    return target, len(rows)


def _short(command: list[str]) -> list[str]:
    """The command as typed: the program's name, not the virtual environment's path to it."""
    if not command:
        return []
    return [Path(command[0]).name, *command[1:]]
