"""The frame every HTML page shares: style (screen and print), the sortable-table script, small helpers.

One self-contained file: no link, no font, no script from elsewhere; it opens from disk, offline.
"""

from __future__ import annotations

import html
import json
from typing import Any

from taskbench.report.formats import fmt

STYLE = """
:root { --fg:#1b1b1b; --muted:#666; --line:#ddd; --bad:#c62828; --warn:#b26a00; --good:#2e7d32; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       max-width: 1180px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 1.45em; margin: .2em 0 .3em; } h2 { font-size: 1.2em; margin: 1.6em 0 .4em;
     border-bottom: 1px solid var(--line); padding-bottom: .2em; } h3 { font-size: 1.05em; margin: 1em 0 .3em; }
.muted, .note { color: var(--muted); } .bad { color: var(--bad); font-weight: 600; }
.warn { color: var(--warn); } .good { color: var(--good); }
table { border-collapse: collapse; margin: .4em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th { background: #f5f5f5; font-weight: 600; vertical-align: bottom; }
table.sortable { font-size: 13px; }
td.l, th.l { text-align: left; } td.wide { min-width: 16em; } td.name { min-width: 10em; }
.scroll { overflow-x: auto; } td.nowrap { white-space: nowrap; } td.article, th.article { color: var(--muted); }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[data-dir="asc"]::after { content: " ▲"; } table.sortable th[data-dir="desc"]::after { content: " ▼"; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: .4em 0; }
dl.facts.wide { grid-template-columns: repeat(3, max-content minmax(0, 1fr)); font-size: .92em; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 10px 18px; }
.plots figure { margin: 0; } svg.plot { width: 100%; height: auto; display: block; }
.overview figure { margin: 0 0 .6em; } details.defaults > summary { color: var(--muted); cursor: pointer; }
code { font-size: .92em; background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
section.case { break-inside: avoid-page; }
@media screen { section.case { content-visibility: auto; contain-intrinsic-size: auto 900px; } }
table.matrix td { text-align: left; white-space: nowrap; } table.matrix th[scope=row] { text-align: left; }
table.matrix td.ok { background: #e8f5e9; } table.matrix td.errors { background: #fff4e0; }
table.matrix td.failed { background: #fdecea; color: var(--bad); font-weight: 600; }
table.matrix td.none { color: var(--muted); text-align: center; } p.legend { color: var(--muted); font-size: .9em; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  .plots { grid-template-columns: 1fr 1fr; } .plots figure, table, dl { break-inside: avoid; }
  h2 { break-after: avoid; } .scroll { overflow: visible; } a { color: inherit; text-decoration: none; }
}
"""

# sorts a table.sortable by the clicked column (numbers by data-v, text otherwise); records script errors
SCRIPT = """
window.taskbenchErrors = [];
window.addEventListener('error', function (e) {
  window.taskbenchErrors.push(String(e.message));
  document.body.setAttribute('data-errors', window.taskbenchErrors.join(' | '));
});
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('thead th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var dir = th.getAttribute('data-dir') === 'asc' ? 'desc' : 'asc';
      table.querySelectorAll('thead th').forEach(function (o) { o.removeAttribute('data-dir'); });
      th.setAttribute('data-dir', dir);
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(row) {
        var cell = row.cells[col]; if (!cell) { return ''; }
        var v = cell.getAttribute('data-v');
        return v !== null && v !== '' && !isNaN(Number(v)) ? Number(v) : cell.textContent.trim().toLowerCase();
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (dir === 'asc' ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.body.setAttribute('data-ready', '1');
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def document(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n"
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def cell(value: Any, spec: str = "{:.0f}", *, css: str = "") -> str:
    """A table cell that sorts by its number."""
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else ""
    klass = f' class="{css}"' if css else ""
    return f'<td{klass} data-v="{esc(number)}">{esc(fmt(value, spec))}</td>'


def table(headers: list[tuple[str, str]], rows: list[list[str]], *, sortable: bool = True,
          css: str = "") -> str:
    """``headers``: (text, css class); ``rows``: already rendered ``<td>`` cells."""
    klass = " ".join(c for c in ("sortable" if sortable else "", css) if c)
    head = "".join(f'<th class="{esc(c)}">{esc(h)}</th>' for h, c in headers)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return (f'<div class="scroll"><table class="{klass}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div>")


def facts(items: list[tuple[str, Any]], *, wide: bool = False) -> str:
    """A definition list, skipping empty values (``wide``: three pairs a line)."""
    shown = [(k, v) for k, v in items if v not in (None, "", [], {})]
    return f"<dl class=\"facts{' wide' if wide else ''}\">" + "".join(
        f"<dt>{esc(k)}</dt><dd>{esc(v if isinstance(v, str) else json.dumps(v, default=str))}</dd>"
        for k, v in shown) + "</dl>"


def flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``{"load": {"users": 50}}`` -> ``[("load.users", 50)]``: a run's parameters, one per line."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += flatten(value, name + ".")
        else:
            out.append((name, value))
    return out


def figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption class=\"note\">{esc(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"
