"""How a scenario file's tables make a case: each layer over the one before it, the libraries' options
merged library by library and key by key.

A case's parameters are ``[[case]]`` (or a matrix block's combination, then its single values) over
``[defaults]``; its ``options`` are those layers' ``options.LIB.KEY`` over the file's top-level
``[options.LIB]`` tables, a key at a time: a case that sets ``options.saq.retries`` keeps the file's
other SAQ settings. A ``[profile.NAME]`` is one more layer on top.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

#: a matrix block: (the lists it crosses, the single values its cases take)
Block = tuple[dict[str, list[Any]], dict[str, Any]]


def merge_options(*layers: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{LIB: {KEY: VALUE}}`` tables, each later one's keys over the earlier ones'."""
    out: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for library, values in layer.items():
            out[library] = {**out.get(library, {}), **values}
    return out


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters, each later layer's over the earlier ones'; ``options`` merged per library and key."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key == "options" and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
                out[key] = merge_options(out[key], value)
            else:
                out[key] = value
    return out


def expand(options: Mapping[str, Any], defaults: Mapping[str, Any], blocks: list[Block],
           extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every case's parameters: each block's combinations, then the ``[[case]]`` tables, over the defaults,
    with the file's top-level ``options`` under theirs."""
    raw: list[dict[str, Any]] = []
    for crossed, fixed in blocks or ([({}, {})] if not extra else []):
        keys = list(crossed)
        for combo in itertools.product(*(crossed[k] for k in keys)):
            raw.append(merge(defaults, fixed, dict(zip(keys, combo, strict=True))))
    raw.extend(merge(defaults, entry) for entry in extra)
    if options:  # the file's own tables go under the cases' keys (and after their other parameters)
        for params in raw:
            params["options"] = merge_options(options, params.get("options") or {})
    return raw


def apply_profile(profile: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """A case's parameters with a profile's values, then those of its ``for`` entries that match the case."""
    out = merge(params, {k: v for k, v in profile.items() if k != "for"})
    for entry in profile.get("for", []):
        if all(params.get(k) == v for k, v in entry["match"].items()):
            out = merge(out, {k: v for k, v in entry.items() if k != "match"})
    return out
