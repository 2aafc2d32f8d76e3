"""``taskbench choose``'s answer and page, made from a :class:`~taskbench.results.choose.ChooseResult`'s
figures and constraints alone (``choose --from DIR`` makes them again with other constraints).

The answer is one sentence: the backend and its workers with the figures that decided it; then the
runner-up and whether the two are apart beyond this run's noise; then every other candidate with the
stage it left at and why. When none meets the constraints, the sentence names the closest.
"""

from __future__ import annotations

from taskbench.report.page import document, esc, facts, figure, table
from taskbench.report.plots import Line, scaling
from taskbench.results.choose import (
    STAGES,
    Candidate,
    ChooseResult,
    Constraints,
    FaultCell,
    Outcome,
    best_drain,
    judge_candidate,
    meets_promise,
    order_key,
    rate_text,
    workers_needed,
)

WRAP = "white-space: normal; max-width: 24em"


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.2g} ms"


def _duration(ms: float) -> str:
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms:g} ms"


def _what(k: Constraints) -> str:
    rate = f"at {rate_text(k.rate)}" if k.rate is not None else "at the highest rate"
    return f"for {k.workload} {rate}, {k.promise}, p95 ≤ {_duration(k.p95_ms)}"


def _workers(n: int | None) -> str:
    if n == 0:
        return "no worker (the tasks run in the API process)"
    return f"{n} worker{'s' if n != 1 else ''}"


FAULT_WORDS = {"kill-worker": "a worker kill", "restart-broker": "a broker restart"}


def _faults_text(c: Candidate) -> str:
    """What the fault cases kept: ``kept every task under a worker kill and a broker restart``."""
    if not c.has_worker:
        return f"{c.guarantee}: a task dies with the API process"
    judged = [f for f in c.faults if f.kept is not None]
    if not judged:
        return "faults not judged"

    def name(f: FaultCell) -> str:
        return FAULT_WORDS.get(f.fault.split("@")[0], f.fault)

    kept = [name(f) for f in judged if not f.lost]
    parts = [f"kept every task under {' and '.join(kept)}"] if kept else []
    parts += [f"lost {f.lost} under {name(f)}, {'within' if f.kept else 'BEYOND'} its promise"
              for f in judged if f.lost]
    return ", ".join(parts)


def _figures(c: Candidate, o: Outcome, k: Constraints) -> str:
    parts = [f"sustains {rate_text(c.sustainable.value)} through the API"]
    if c.has_worker and c.guarantee != "at-least-once":  # chosen under --promise any: say what it gives up
        parts.insert(0, c.guarantee)
    drain = c.drain(o.workers or 1) if c.has_worker else None
    one = c.drain(1)
    if one is not None and one.rate:
        parts.append(f"one worker drains {rate_text(one.rate)}")
    if c.p95.value is not None:
        parts.append(f"p95 {_ms(c.p95.value)} at {rate_text(c.p95_rate)}")
    if drain is not None and drain.cpu_us is not None:
        parts.append(f"{drain.cpu_us / 1000:.2g} ms CPU a task")
    parts.append(_faults_text(c))
    return "; ".join(parts)


def outcomes(result: ChooseResult, k: Constraints | None = None) -> list[tuple[Candidate, Outcome]]:
    """Every candidate judged against ``k`` (default: the run's own constraints), those meeting them first
    in the order of the recommendation, then the others by the stage they reached."""
    k = k or result.constraints
    judged = [(c, judge_candidate(c, k)) for c in result.candidates]
    meeting = sorted(((c, o) for c, o in judged if o.meets), key=lambda item: order_key(item[0], item[1], k))
    rest = sorted(((c, o) for c, o in judged if not o.meets), key=lambda item: -STAGES.index(item[1].stage))
    return meeting + rest


def _apart(a: Candidate, oa: Outcome, b: Candidate, ob: Outcome) -> str:
    """Whether the recommended and the runner-up are apart beyond this run's noise."""
    if (oa.workers or 0) < (ob.workers or 0):
        return f"{a.backend} needs fewer workers"
    x, y = a.sustainable, b.sustainable
    if x.low is None or x.high is None or y.low is None or y.high is None:
        return "this run cannot tell whether they are apart beyond its noise"
    if max(x.low, y.low) <= min(x.high, y.high):
        return ("the two are not apart beyond this run's noise (their search brackets "
                f"{x.low:,.0f}..{x.high:,.0f} and {y.low:,.0f}..{y.high:,.0f}/s overlap)")
    return "the two are apart beyond this run's noise (their search brackets do not overlap)"


def recommend(result: ChooseResult, k: Constraints | None = None) -> list[str]:
    """The answer: the recommendation (or the closest, when none meets ``k``), the runner-up, the others."""
    k = k or result.constraints
    judged = outcomes(result, k)
    meeting = [(c, o) for c, o in judged if o.meets]
    lines: list[str] = []
    if meeting:
        c, o = meeting[0]
        lines.append(f"{_what(k)}: {c.backend} with {_workers(o.workers)} ({_figures(c, o, k)})")
        if len(meeting) > 1:
            c2, o2 = meeting[1]
            lines.append(f"runner-up: {c2.backend} with {_workers(o2.workers)} ({_figures(c2, o2, k)}); "
                         + _apart(c, o, c2, o2))
        others = judged[2:] if len(meeting) > 1 else judged[1:]
    else:
        lines.append(_none_meets(result, k))
        others = judged
    for c, o in others:
        if o.meets:
            lines.append(f"{c.backend}: meets them too, with {_workers(o.workers)} ({_figures(c, o, k)})")
        else:
            lines.append(f"{c.backend}: left at the {o.stage}: {o.reason}")
    return lines


def _none_meets(result: ChooseResult, k: Constraints) -> str:
    """Which candidate came closest, by how much, and the workers its scaling curve would need."""
    closest: tuple[float, Candidate] | None = None
    for c in result.candidates:
        if meets_promise(c, k.promise):
            top = best_drain(c, k.max_workers)
            figure_ = c.sustainable.value or (top.rate if top is not None else None)
            if figure_ and (closest is None or figure_ > closest[0]):
                closest = (figure_, c)
    head = f"{_what(k)}: no backend meets them with at most {_workers(k.max_workers)} here"
    if closest is None:
        return head + "; none gave a figure (each line below says why)"
    value, c = closest
    text = f"{head}; the closest is {c.backend}, {rate_text(value)}"
    if k.rate is not None:
        text += f" ({value / k.rate:.0%} of {rate_text(k.rate)})"
        about = workers_needed(c, k.rate)
        if about:
            text += f"; it needs about {about} workers by its scaling curve"
    return text


def _figure_cell(value: float | None, text: str, note: str = "") -> str:
    extra = f"<br><span class=\"note\">{esc(note)}</span>" if note else ""
    return f"<td data-v=\"{'' if value is None else value}\" style=\"{WRAP}\">{esc(text)}{extra}</td>"


def fault_text(cell: FaultCell) -> str:
    if not cell.injected or cell.lost is None:
        return f"not judged: {cell.note or 'not injected'}"
    verdict = "kept its promise" if cell.kept else "BROKE its promise"
    back = "" if cell.recovered_s is None else f", executing again after {cell.recovered_s:.1f} s"
    return f"lost {cell.lost}, dup {cell.duplicated}{back}: {verdict}"


def memory_text(c: Candidate) -> tuple[str, str]:
    """The soak's memory growth; a verdict only when its interval excludes zero."""
    m = c.memory
    if m.value is None:
        return "–", m.note
    if m.low is not None and m.high is not None and m.low <= 0 <= m.high:
        return f"not settled by this run ({m.low:.3g}..{m.high:.3g} MB/h)", m.note
    word = "grows" if m.value > 0 else "shrinks"
    return f"{word} {abs(m.value):.3g} MB/h ({m.low:.3g}..{m.high:.3g})", m.note


def _chart(result: ChooseResult) -> str:
    lines = [Line(c.backend, [d.workers for d in sorted(c.drains, key=lambda d: d.workers) if d.rate],
                  [d.rate or 0.0 for d in sorted(c.drains, key=lambda d: d.workers) if d.rate])
             for c in result.candidates if any(d.rate for d in c.drains)]
    if not lines:
        return "<p class=\"note\">No drain gave a rate.</p>"
    return figure(scaling(lines, rate=result.constraints.rate, max_workers=result.constraints.max_workers),
                  "Each point: one drain of a filled queue by that many workers (the screen's one, the scale's more).")


def render(result: ChooseResult, k: Constraints | None = None) -> str:
    """The page: the answer first, the time and the machine, the chart, then a row per candidate."""
    k = k or result.constraints
    answer = recommend(result, k)
    judged = outcomes(result, k)
    headers = [("backend", "l"), ("promise (dead worker)", "l"), ("stage", "l"), ("why it left", "l"),
               ("1 worker drains", ""), ("most workers drain", ""), ("CPU-s per million tasks", ""),
               ("workers' memory", ""),
               ("workers", ""), ("sustainable through the API", ""), ("e2e p95", ""), ("kill-worker", "l"),
               ("restart-broker", "l"), ("soak memory", "l")]
    rows = []
    for c, o in judged:
        one, top = c.drain(1), best_drain(c, k.max_workers)
        used = c.drain(o.workers) if o.workers else one  # the cost at the workers the rate needs
        faults = {f.fault.split("@")[0]: f for f in c.faults}
        mem_text, mem_note = memory_text(c)
        cells = [f"<td class=\"l\">{esc(c.backend)}<br><span class=\"note\">{esc(c.version)} on {esc(c.broker)}"
                 "</span></td>",
                 f"<td class=\"l\" style=\"{WRAP}\">{esc(c.guarantee)}: {esc(c.promise)}</td>",
                 f"<td class=\"l\">{'recommended' if o.meets and (c, o) == judged[0] else o.stage}</td>",
                 f"<td class=\"l\" style=\"{WRAP}; min-width: 16em\">"
                 f"{esc(o.reason or ('meets them all' if o.meets else ''))}</td>",
                 _figure_cell(one.rate if one else None, rate_text(one.rate) if one else "–",
                              (one.note if one else "") or (f"{one.failed} failed" if one and one.failed else "")),
                 _figure_cell(top.rate if top else None, f"{rate_text(top.rate)} ({top.workers})" if top else "–"),
                 _figure_cell(used.cpu_us if used else None,
                              f"{used.cpu_us:,.0f}" if used and used.cpu_us is not None else "–",
                              ("workers + broker" if used.broker_cpu_us is not None else "workers")
                              + f", {_workers(used.workers)}" if used else ""),
                 _figure_cell(used.rss_mb if used else None,
                              f"{used.rss_mb:,.0f} MB" if used and used.rss_mb is not None else "–"),
                 _figure_cell(c.workers, "none (the API runs them)" if not c.has_worker else
                              "–" if c.workers is None else str(c.workers)),
                 _figure_cell(c.sustainable.value, rate_text(c.sustainable.value) if c.sustainable.value else "–",
                              c.sustainable.note.split(":")[0]),
                 _figure_cell(c.p95.value, f"{_ms(c.p95.value)} at {rate_text(c.p95_rate)}" if c.p95.value else "–")]
        for name in ("kill-worker", "restart-broker"):
            cell = faults.get(name)
            css = "" if cell is None or cell.kept is None else ("ok" if cell.kept else "failed")
            cells.append(f"<td class=\"l {css}\" style=\"{WRAP}\">{esc(fault_text(cell) if cell else '–')}</td>")
        cells.append(f"<td class=\"l\" style=\"{WRAP}\">{esc(mem_text)}"
                     + (f"<br><span class=\"note\">{esc(mem_note)}</span>" if mem_note else "") + "</td>")
        rows.append(cells)
    calibration = result.machine.get("cpu_calibration")
    speed = calibration.get("cpu_ms") if isinstance(calibration, dict) else None
    stages = ", ".join(f"{stage} {seconds:.0f} s" for stage, seconds in result.stages_s.items())
    head = [("took", f"{result.elapsed_s / 60:.1f} min" + (f" ({stages})" if stages else "")),
            ("machine", f"{result.machine.get('cpu_model') or result.machine.get('machine')}, "
                        f"{result.machine.get('logical_cpus')} cores"
                        + (f"; crunch(1000000) {speed} ms" if speed is not None else "")),
            ("command", result.command), ("run", result.run_id), ("started", result.started),
            ("commit", result.commit.get("commit")), ("budget", result.budget)]
    parts = [f"<h1>Which backend? taskbench choose{' --quick' if result.quick else ''}</h1>",
             f"<p><b>{esc(answer[0])}</b></p>",
             "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in answer[1:]) + "</ul>",
             facts(head, wide=True),
             "<h2>Rate by workers</h2>", _chart(result),
             "<h2>Every candidate</h2>",
             "<p class=\"note\">Stages: promise (no load), screen (one worker drains your task), scale (more "
             "workers), finalist (through the HTTP API, then a worker kill and a broker restart).</p>",
             "<div class=\"scroll\">" + table(headers, rows, css="matrix") + "</div>",
             "<h2>Where each figure comes from</h2>", _sources(result)]
    broken = result.broken()
    if broken:
        parts.insert(2, "<p class=\"bad\">" + "<br>".join(esc(f"promise broken: {line}") for line in broken) + "</p>")
    return document(f"taskbench choose {result.run_id}", "\n".join(parts))


def _sources(result: ChooseResult) -> str:
    items = []
    for c in result.candidates:
        files = sorted(({d.source for d in c.drains} | {c.sustainable.source, c.memory.source}
                        | {f.source for f in c.faults}) - {""})
        if files:
            items.append(f"<li><b>{esc(c.backend)}</b>: {esc(', '.join(files))}</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else "<p class=\"note\">No run was made.</p>"


def terminal_lines(result: ChooseResult, k: Constraints | None = None) -> list[str]:
    """What ``choose`` prints: the answer, then the broken promises."""
    return recommend(result, k) + [f"promise broken: {line}" for line in result.broken()]
