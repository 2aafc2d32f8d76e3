"""Plain YAML from the manifests' dicts, without a YAML library in the base environment.

Block mappings and sequences; keys bare when they are plain names; every string value double-quoted in
JSON's syntax (a YAML double-quoted scalar is a superset of it), so no value is ever read back as another
type ("on", "0755", "1e3"); numbers and booleans bare. ``yaml.safe_load`` of the text gives the dicts
back (tests/k8s checks it).
"""

from __future__ import annotations

import json
import re
from typing import Any

#: a key written bare: a name, never one YAML 1.1 reads as a boolean or null
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _key(key: Any) -> str:
    text = str(key)
    return text if _PLAIN_KEY.match(text) and text.lower() not in _SPECIAL else json.dumps(text)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"not a manifest value: {type(value).__name__}")


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        out = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                out.append(f"{pad}{_key(key)}:")
                out += _lines(item, indent + 2)
            else:
                out.append(f"{pad}{_key(key)}: {_inline(item)}")
        return out
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            if isinstance(item, dict | list) and item:
                inner = _lines(item, indent + 2)
                out.append(f"{pad}- {inner[0].lstrip()}")
                out += inner[1:]
            else:
                out.append(f"{pad}- {_inline(item)}")
        return out
    return [pad + _scalar(value)]


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump_all(documents: list[dict[str, Any]]) -> str:
    """The documents of a multi-document YAML stream (``---`` between them)."""
    return "".join("---\n" + "\n".join(_lines(doc, 0)) + "\n" for doc in documents)
