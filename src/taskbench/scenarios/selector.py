"""A matrix block's backends chosen by what they declare, not by name.

``backend = { broker = "redis", threading = ["loop", "threads"] }`` in a ``[[matrix]]`` block crosses every
backend whose declaration (``taskbench backends``, ``backends/<library>/__init__.py``) fits, in the
registry's order: a backend added later with those declarations joins the block with no edit to the file.
Each key takes a value or a list of values (any of them); a backend must fit every key given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

from taskbench import backends
from taskbench.backends.declaration import AT_LEAST_ONCE, AT_MOST_ONCE, BackendInfo, Threading

#: the keys a selector takes and what each asks of a backend (the error lists them)
KEYS = {
    "broker": "a broker it can use (its brokers)",
    "threading": "where its tasks run: loop, threads or forked",
    "guarantee": "what it promises across a dead worker with its library's defaults, on the broker named "
                 "(else its first): at-least-once or at-most-once",
    "worker": "true: its tasks run in worker processes",
    "durable": "true: its 2xx means a broker holds the task",
    "unsafe": "true: an unsafe seed wiring (left out unless asked for, as --backends all does)",
    "quick_recovery": "true: its library declares settings that shorten a dead worker's wait",
    "variant": "its wiring of the library ('' for the library's main one)",
    "except": "backends left out, by name",
    "also": "backends added, by name",
}


class SelectorError(ValueError):
    """A selector with an unknown key or value, or one that selects nothing: one line."""


def _guarantee(meta: BackendInfo, wanted: Mapping[str, list[Any]]) -> str:
    named = [b for b in meta.brokers if b in wanted.get("broker", ())]
    return meta.delivery_on((named or list(meta.brokers))[0]).guarantee


#: key -> what a backend declares for it (a tuple: any of them may fit)
_FACTS: dict[str, Callable[[BackendInfo, Mapping[str, list[Any]]], Any]] = {
    "broker": lambda meta, _: meta.brokers,
    "threading": lambda meta, _: meta.threading,
    "guarantee": _guarantee,
    "worker": lambda meta, _: meta.has_worker,
    "durable": lambda meta, _: meta.durable,
    "unsafe": lambda meta, _: bool(meta.unsafe),
    "quick_recovery": lambda meta, _: bool(meta.options.quick_recovery),
    "variant": lambda meta, _: meta.variant,
}


def _choices(key: str) -> tuple[Any, ...]:
    metas = [backends.info(name) for name in backends.available(unsafe=True)]
    if key == "broker":
        return tuple(dict.fromkeys(b for meta in metas for b in meta.brokers))
    if key == "threading":
        return get_args(Threading)
    if key == "guarantee":
        return (AT_LEAST_ONCE, AT_MOST_ONCE)
    if key == "variant":
        return tuple(dict.fromkeys(meta.variant for meta in metas))
    if key in ("except", "also"):
        return tuple(backends.available(unsafe=True))
    return (True, False)


def _values(key: str, value: Any) -> list[Any]:
    if key not in KEYS:
        known = "; ".join(f"{k}: {help}" for k, help in KEYS.items())
        raise SelectorError(f"a backend selector has no key {key!r}; it takes {known}")
    values = value if isinstance(value, list) else [value]
    choices = _choices(key)
    for item in values:
        # true is not 1: a TOML boolean for the yes/no keys, a string for the others
        if not any(item == choice and type(item) is type(choice) for choice in choices):
            shown = ", ".join(repr(c) if isinstance(c, str) else str(c).lower() for c in choices)
            raise SelectorError(f"backend selector {key} = {item!r}: one of {shown}")
    return values


def _fits(meta: BackendInfo, wanted: Mapping[str, list[Any]]) -> bool:
    for key, fact in _FACTS.items():
        declared = fact(meta, wanted)
        if key not in wanted:
            if key == "unsafe" and declared:  # never by default
                return False
            continue
        found = declared if isinstance(declared, tuple) else (declared,)
        if not any(value in wanted[key] for value in found):
            return False
    return True


def select(selector: Mapping[str, Any]) -> list[str]:
    """The backends a selector picks, in registry order; a SelectorError if it is wrong or picks none."""
    wanted = {key: _values(key, value) for key, value in selector.items()}
    names = [name for name in backends.available(unsafe=True)
             if name not in wanted.get("except", ())
             and (name in wanted.get("also", ()) or _fits(backends.info(name), wanted))]
    if not names:
        given = ", ".join(f"{k} = {v!r}" for k, v in selector.items())
        raise SelectorError(f"the backend selector {{ {given} }} selects no backend (`taskbench backends` lists "
                            "what each declares)")
    return names
