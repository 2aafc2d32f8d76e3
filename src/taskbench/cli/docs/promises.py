"""``docs/promises.md``: each backend's promise across a dead worker, on each broker, with the settings that
change it and the bounds a fault may cost it, from what ``taskbench backends`` prints
(:mod:`taskbench.cli.backend_facts`)."""

from __future__ import annotations

from taskbench.cli.backend_facts import Facts, Promise, facts, shown
from taskbench.cli.docs.markdown import cell, code, table

_INTRO = (
    "What each backend promises for a task whose worker dies, as taskbench configures it: the rule every "
    "fault case is judged by. **at-least-once**: a dead worker's task runs again; a loss fails the case, a "
    "duplicate is a figure. **at-most-once**: it may be lost, never run twice; a duplicate fails the case. "
    "A **bound** is a known window of the promise: what a fault may cost and the promise still be kept, with "
    "its source. `taskbench backends` prints the same. Generated from the backend packages' declarations by "
    "`python -m taskbench.docs`; do not edit."
)


def render() -> str:
    found = facts()
    headers = ("backend", "library", "promise on each broker (the library's defaults)", "with a setting changed",
               "what it is")
    lines = ["# Backends and their promises", "", _INTRO, "", *table(headers, (_overview(one) for one in found)), ""]
    for one in found:
        lines += _backend(one)
    return "\n".join(lines)


def _overview(one: Facts) -> tuple[str, ...]:
    meta = one.meta
    each = "; ".join(f"{promise.broker}: {promise.delivery.guarantee}" for promise in one.promises)
    changed = "; ".join(f"{code(promise.setting)}: {promise.delivery.guarantee}" for promise in one.changed)
    return code(meta.name), code(meta.extra), each, changed, meta.summary + one.state


def _settings(one: Facts, promise: Promise) -> str:
    """The settings a promise holds under: the one changed, or the defaults of those that change it."""
    if promise.setting:
        return code(f"--option {promise.setting}")
    fields = one.meta.options.model_fields
    defaults = [code(f"{one.meta.extra}.{name}={shown(fields[name].default)}") for name in one.meta.promise_settings]
    return "defaults: " + ", ".join(defaults) if defaults else "the library's defaults"


def _backend(one: Facts) -> list[str]:
    meta = one.meta
    promises = [*one.promises, *one.changed]
    rows = [(promise.broker, _settings(one, promise), promise.delivery.guarantee, promise.delivery.recovery,
             promise.delivery.source) for promise in promises]
    bounds = [(promise.broker, _settings(one, promise), bound.describe(), bound.source)
              for promise in promises for bound in promise.delivery.all_bounds()]
    lines = [f"## `{meta.name}`", "", cell(meta.summary + one.state), ""]
    if meta.unsafe:
        lines += [cell(f"Unsafe: {meta.unsafe}"), ""]
    lines += [*table(("broker", "settings", "promise", "how a dead worker's task comes back", "source"), rows), ""]
    lines += ["Bounds:", "", *table(("broker", "settings", "bound", "source"), bounds), ""]
    if one.settings:
        lines += [f"Its library's settings (`--option {meta.extra}.KEY=VALUE`): docs/reference.md, "
                  "\"Library settings\".", ""]
    return lines
