"""``taskbench choose``'s page and rankings, made from the figures of a
:class:`~taskbench.results.choose.ChooseResult` alone.

A ranking orders the backends that have a figure for the criterion, best first, and its sentence says
only what those figures say: the best and its figure, the others in order, whether the best's spread
overlaps the next one's (then this run does not settle their order), and who has no figure and why.
"""

from __future__ import annotations

from collections.abc import Callable

from taskbench.report.page import document, esc, facts, table
from taskbench.results.choose import BackendChoice, Cell, ChooseResult, FaultCell, Ranking

#: (criterion, the cell, higher is better)
CRITERIA: list[tuple[str, Callable[[BackendChoice], Cell], bool]] = [
    ("highest sustainable rate", lambda b: b.rate, True),
    ("lowest e2e p95 at half the sustainable rate", lambda b: b.e2e_p95, False),
    ("fastest drain", lambda b: b.drain, True),
    ("least memory growth", lambda b: b.memory, False),
]
KEPT = "kept every task under faults"
#: a long cell wraps (the matrix's cells do not, by default)
WRAP = "white-space: normal; max-width: 22em"


def figure_text(cell: Cell) -> str:
    """``240 req/s (220..260)``, or ``–`` with no figure."""
    if cell.value is None:
        return "–"
    text = f"{cell.value:.3g} {cell.unit}" if abs(cell.value) < 1000 else f"{cell.value:,.0f} {cell.unit}"
    if cell.low is not None and cell.high is not None:
        text += f" ({cell.low:.3g}..{cell.high:.3g})"
    elif cell.low is not None:
        text += f" (at least {cell.low:.3g})"
    return text


def _overlap(a: Cell, b: Cell) -> bool:
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return False
    return max(a.low, b.low) <= min(a.high, b.high)


def rank(result: ChooseResult) -> list[Ranking]:
    """One ranking per criterion, and who kept every task under the faults."""
    out: list[Ranking] = []
    for criterion, get, higher in CRITERIA:
        measured = [(b.backend, get(b)) for b in result.backends if get(b).value is not None]
        measured.sort(key=lambda item: item[1].value or 0.0, reverse=higher)
        missing = [f"{b.backend} ({get(b).note or 'not measured'})" for b in result.backends if get(b).value is None]
        if not measured:
            statement = f"{criterion}: no backend has a figure" + (f": {', '.join(missing)}" if missing else "")
            out.append(Ranking(criterion=criterion, statement=statement))
            continue
        best, cell = measured[0]
        statement = f"{criterion}: {best}, {figure_text(cell)}"
        if len(measured) > 1:
            statement += "; then " + ", ".join(f"{name} {figure_text(c)}" for name, c in measured[1:])
            second, other = measured[1]
            if _overlap(cell, other):
                statement += (f". {best}'s spread overlaps {second}'s: this run does not settle which of the two "
                              "is better")
        if missing:
            statement += f". No figure: {', '.join(missing)}"
        out.append(Ranking(criterion=criterion, order=[name for name, _ in measured], statement=statement))
    out.append(kept_ranking(result))
    return out


def _fault_name(cell: FaultCell) -> str:
    return cell.fault.split("@")[0]


def kept_ranking(result: ChooseResult) -> Ranking:
    """Who lost no accepted task in any fault case (every one injected and audited), who did, and whether
    that was inside the backend's own promise."""
    kept: list[str] = []
    lost: list[str] = []
    unjudged: list[str] = []
    for b in result.backends:
        audited = [f for f in b.faults if f.injected and f.lost is not None]
        if not b.faults or len(audited) < len(b.faults):
            gaps = [f"{_fault_name(f)}: {f.note or 'not injected'}" for f in b.faults if f not in audited]
            unjudged.append(f"{b.backend} ({'; '.join(gaps) or 'no fault case'})")
            continue
        losses = [f for f in audited if f.lost]
        if not losses:
            kept.append(b.backend)
            continue
        parts = [f"{f.lost} under {_fault_name(f)}, {'within' if f.kept else 'BEYOND'} its promise" for f in losses]
        lost.append(f"{b.backend} ({'; '.join(parts)})")
    faults = sorted({_fault_name(f) for b in result.backends for f in b.faults})
    statement = f"{KEPT} ({' and '.join(faults)}): " + (", ".join(kept) if kept else "none")
    if lost:
        statement += f". Lost tasks: {', '.join(lost)}"
    if unjudged:
        statement += f". Not judged: {', '.join(unjudged)}"
    return Ranking(criterion=KEPT, order=kept, statement=statement)


def fault_text(cell: FaultCell) -> str:
    if not cell.injected or cell.lost is None:
        return f"not judged: {cell.note or 'not injected'}"
    verdict = "kept its promise" if cell.kept else "BROKE its promise"
    back = "" if cell.recovered_s is None else f", executing again after {cell.recovered_s:.1f} s"
    return f"lost {cell.lost}, dup {cell.duplicated}{back}: {verdict}"


def render(result: ChooseResult) -> str:
    """The page: the matrix (a row per backend, a column per criterion, each cell its figure and spread),
    the promise of each library, the rankings, and where every figure comes from."""
    faults = sorted({f.fault for b in result.backends for f in b.faults})
    headers = [("backend", "text"), ("promise (dead worker)", "text"), ("sustainable rate req/s", ""),
               ("e2e p95 ms at half", ""), ("drain tasks/s", ""), ("memory MB/h", "")]
    headers += [(f.split("@")[0], "text") for f in faults]
    rows = []
    for b in result.backends:
        cells = [f"<td class=\"text\">{esc(b.backend)}<br><span class=\"note\">{esc(b.version)} on "
                 f"{esc(b.broker)}</span></td>", f"<td class=\"text\" style=\"{WRAP}\">{esc(b.promise)}</td>"]
        for _, get, _ in CRITERIA:
            c = get(b)
            note = f"<br><span class=\"note\">{esc(c.note)}</span>" if c.note else ""
            cells.append(f"<td data-v=\"{'' if c.value is None else c.value}\" style=\"{WRAP}\">"
                         f"{esc(figure_text(c))}{note}</td>")
        by_fault = {f.fault: f for f in b.faults}
        for fault in faults:
            cell = by_fault.get(fault)
            css = "" if cell is None or cell.kept is None else ("ok" if cell.kept else "failed")
            text = fault_text(cell) if cell is not None else "–"
            cells.append(f"<td class=\"text {css}\" style=\"{WRAP}\">{esc(text)}</td>")
        rows.append(cells)
    rankings = result.rankings or rank(result)
    parts = [f"<h1>Which backend? taskbench choose{' --quick' if result.quick else ''}</h1>",
             facts([("run", result.run_id), ("command", result.command), ("started", result.started),
                    ("took", f"{result.elapsed_s:.0f} s"), ("machine", result.machine.get("cpu_model") or
                                                             result.machine.get("machine")),
                    ("commit", result.commit.get("commit")), ("budget", result.budget)], wide=True),
             "<h2>Rankings</h2><p class=\"note\">Each sentence is made from the figures in the table below.</p>",
             "<ul>" + "".join(f"<li>{esc(r.statement)}</li>" for r in rankings) + "</ul>",
             "<h2>Backends × criteria</h2>", table(headers, rows, css="matrix"),
             "<h2>Where each figure comes from</h2>", _sources(result)]
    broken = result.broken()
    if broken:
        parts.insert(1, "<p class=\"bad\">" + "<br>".join(esc(f"promise broken: {line}") for line in broken) + "</p>")
    return document(f"taskbench choose {result.run_id}", "\n".join(parts))


def _sources(result: ChooseResult) -> str:
    items: list[str] = []
    for criterion, get, _ in CRITERIA:
        spreads = {get(b).spread for b in result.backends if get(b).spread}
        sources = {get(b).source for b in result.backends if get(b).source}
        items.append(f"<li><b>{esc(criterion)}</b>: spread = {esc('; '.join(sorted(spreads)) or '–')}; from "
                     f"{esc(', '.join(sorted(sources)) or '–')}</li>")
    fault_sources = sorted({f.source for b in result.backends for f in b.faults if f.source})
    items.append(f"<li><b>faults</b>: each case judged by the backend's own promise and its bounds "
                 f"(`taskbench backends`); from {esc(', '.join(fault_sources) or '–')}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def terminal_lines(result: ChooseResult) -> list[str]:
    """The rankings' sentences, then the broken promises: what ``choose`` prints."""
    return [r.statement for r in (result.rankings or rank(result))] + [
        f"promise broken: {line}" for line in result.broken()]
