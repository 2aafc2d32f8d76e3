"""What ``taskbench backends`` says of each backend, as data: its brokers, its promise on each, the settings
that change it and the library's settings. The command prints it and ``docs/promises.md`` is rendered
from it (:mod:`taskbench.cli.docs_pages`), so both say the same thing."""

from __future__ import annotations

from dataclasses import dataclass

from taskbench.backends import REGISTRY, BackendInfo, Delivery
from taskbench.backends.options import NoOptions, describe


@dataclass(frozen=True)
class Promise:
    """The promise of a backend on one broker, under the library's defaults or one setting changed."""

    broker: str
    delivery: Delivery
    #: ``saq.retries=3``: the one setting changed from the library's default ("": the defaults)
    setting: str = ""


@dataclass(frozen=True)
class Facts:
    meta: BackendInfo
    #: " (not implemented yet)", " [never a default: ...]" or ""
    state: str
    #: the promise on each broker under the library's defaults
    promises: tuple[Promise, ...]
    #: the promise under another value of a setting that changes it (on the default broker)
    changed: tuple[Promise, ...]
    #: ``(key, type and bounds, default and help)`` per library setting, on the library's first backend only
    settings: tuple[tuple[str, str, str], ...]


def facts() -> list[Facts]:
    """Every backend of the registry, in its order."""
    return [_facts(meta) for meta in REGISTRY.values()]


def _facts(meta: BackendInfo) -> Facts:
    state = "" if meta.implemented else " (not implemented yet)"
    if meta.unsafe:
        state += " [never a default: left out of --backends all]"
    promises = tuple(Promise(broker, meta.delivery_on(broker)) for broker in meta.brokers)
    changed = []
    for name in meta.promise_settings:
        other = _other_value(meta.options.model_fields[name].default)
        if other is None or meta.options.model_fields[name].annotation is not type(other):
            continue
        changed.append(Promise(meta.brokers[0], meta.delivery_on(meta.brokers[0], {name: other}),
                               f"{meta.extra}.{name}={shown(other)}"))
    own = meta.options is not NoOptions and meta.name == meta.extra  # a library's settings, once
    return Facts(meta, state, promises, tuple(changed), tuple(describe(meta.options)) if own else ())


def shown(value: object) -> str:
    """A setting's value as ``--option`` takes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _other_value(default: object) -> object | None:
    """A value of a promise setting other than its default under which the guarantee changes (None: a
    duration, which changes only the wait)."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return 3 if default == 1 else None
    return None
