"""The payload template of a user's task (``--payload FILE.json``): a JSON object with the task's id in it.

The file is any JSON object; every occurrence of the string :data:`PLACEHOLDER` (``{task_id}``) in it,
in a value or a key, whole or inside a longer string (``"order-{task_id}"``), is replaced by the id the
driver gives each request. Nothing else in the file is read as a placeholder: its braces are text.

:func:`body_template` makes the driver's :meth:`str.format` template from it (the driver fills
``{task_id}`` and ``{enqueued_at}`` per request, :class:`taskbench.driver.RequestTemplate`): every brace
doubled but the placeholder's. :func:`fill` is the same substitution on the parsed object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from taskbench import inputs

#: the text replaced by each request's task id
PLACEHOLDER: Final = "{task_id}"
#: the template without ``--payload``: the callable still gets its task's id
DEFAULT: Final[dict[str, Any]] = {"task_id": PLACEHOLDER}
#: a template larger than this is refused: it travels in every request and every message
MAX_BYTES: Final = 12_000
#: a template nested deeper than this is refused: the API's parser, the brokers' serializers and the
#: user's own code each recurse once a level (the API's body holds it one level down)
MAX_DEPTH: Final = 64


class PayloadError(ValueError):
    """The payload file cannot be a template: one line naming the file and the problem."""


def read(path: str | Path) -> dict[str, Any]:
    """The template in ``path``: a JSON object (PayloadError in one line otherwise)."""
    path = Path(path)
    try:
        text = inputs.read_text(path, MAX_BYTES)
    except inputs.TooLargeError:
        raise PayloadError(f"--payload {path}: larger than the {MAX_BYTES:,} bytes a task may carry") from None
    except inputs.InputError as exc:
        raise PayloadError(f"--payload {path}: {exc}") from None
    if inputs.too_deep(text, MAX_DEPTH):
        raise PayloadError(f"--payload {path}: nested deeper than {MAX_DEPTH} levels of arrays and objects")
    try:
        value = json.loads(text, parse_constant=_refuse)
    except (json.JSONDecodeError, ValueError) as exc:
        raise PayloadError(f"--payload {path}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise PayloadError(f"--payload {path}: a JSON object is needed, got {type(value).__name__}")
    return value


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def body_template(payload: dict[str, Any], **fields: Any) -> str:
    """The request body ``{**fields, "payload": payload}`` as a :meth:`str.format` template whose only
    fields are the placeholders: ``fields`` may hold ``"{task_id}"`` and the driver's
    ``"{enqueued_at}"`` placeholder, written raw (a number), as :class:`RawField`."""
    parts = []
    for key, value in {**fields, "payload": payload}.items():
        text = value.text if isinstance(value, RawField) else _escaped(json.dumps(value, separators=(",", ":")))
        parts.append(f"{_escaped(json.dumps(key))}:{text}")
    return "{{" + ",".join(parts) + "}}"


class RawField:
    """A body field written as it is: a format placeholder that stands for a number (``{enqueued_at}``)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}").replace("{{task_id}}", PLACEHOLDER)


def fill(payload: Any, task_id: str) -> Any:
    """``payload`` with every :data:`PLACEHOLDER` replaced by ``task_id`` (keys and values, recursively)."""
    if isinstance(payload, str):
        return payload.replace(PLACEHOLDER, task_id)
    if isinstance(payload, dict):
        return {fill(k, task_id): fill(v, task_id) for k, v in payload.items()}
    if isinstance(payload, list):
        return [fill(v, task_id) for v in payload]
    return payload
