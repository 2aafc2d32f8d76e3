"""A library's settings as one typed model: declared once in its backend package, read everywhere.

A backend package declares ``class Options(LibraryOptions)``: its fields are the library's settings that
taskbench passes on, with the library's own defaults (a figure shows what a user who follows the
library's documentation gets) and their bounds. The command line takes them as ``--option
LIB.KEY=VALUE``, a scenario file as ``[options.LIB]`` (or ``options.LIB.KEY = VALUE`` in a case), the
API and worker processes as ``TASKBENCH_OPTIONS`` (JSON), and ``taskbench backends`` lists them. Nothing
else declares them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

if TYPE_CHECKING:
    from taskbench.settings import Settings


class LibraryOptions(BaseModel):
    """The settings of one library; a subclass per backend package."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the fields that change the backend's promise across a dead worker (every case records them)
    promise_fields: ClassVar[tuple[str, ...]] = ()
    #: values that shorten the wait before a dead worker's task comes back, the promise kept (the
    #: library's defaults wait longer than a short fault case's drain): ``choose``'s fault cases run with them
    quick_recovery: ClassVar[dict[str, Any]] = {}

    @classmethod
    def of(cls, settings: Settings) -> Self:
        """The options a process was started with (``TASKBENCH_OPTIONS``), the library's defaults for the rest."""
        return cls.model_validate(settings.options)

    def changed(self) -> dict[str, Any]:
        """The values that differ from the library's defaults, as JSON types."""
        return self.model_dump(mode="json", exclude_defaults=True)


class NoOptions(LibraryOptions):
    """A library taskbench passes no setting to."""


class OptionError(ValueError):
    """A setting a library does not have, or a value its model refuses: one line naming both."""


def problem(library: str, model: type[LibraryOptions], values: Mapping[str, Any]) -> str | None:
    """What is wrong with ``values`` for ``library`` (None: nothing), one line naming the setting."""
    fields = model.model_fields
    for key in values:
        if key not in fields:
            known = ", ".join(fields) or "none"
            return f"{library} has no setting {key!r}; its settings: {known}"
    try:
        model.model_validate(dict(values))
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"]) or "?"
        return f"{library}.{key}: {error['msg']} (got {error.get('input')!r})"
    return None


def validate(library: str, model: type[LibraryOptions], values: Mapping[str, Any]) -> LibraryOptions:
    """``values`` as the library's options; an OptionError (one line) if the model refuses them."""
    message = problem(library, model, values)
    if message:
        raise OptionError(message)
    return model.model_validate(dict(values))


def parse(items: Iterable[str]) -> dict[str, dict[str, str]]:
    """``LIB.KEY=VALUE`` strings (``--option``, repeatable) as ``{LIB: {KEY: VALUE}}``; the values stay
    strings for the library's model to convert (``3`` -> 3, ``true`` -> True)."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        library, dot, key = name.strip().partition(".")
        if not sep or not dot or not library or not key:
            raise OptionError(f"--option {item!r}: write LIB.KEY=VALUE, e.g. saq.retries=3")
        out.setdefault(library, {})[key] = value.strip()
    return out


def describe(model: type[LibraryOptions]) -> list[tuple[str, str, str]]:
    """``(key, type and bounds, default and help)`` per setting: what ``taskbench backends`` shows."""
    rows = []
    for key, info in model.model_fields.items():
        if get_origin(info.annotation) is Literal:
            kind = " | ".join(str(choice) for choice in get_args(info.annotation))
        else:
            kind = getattr(info.annotation, "__name__", None) or str(info.annotation)
        bounds = [f"{m.__class__.__name__.lower()} {getattr(m, m.__class__.__name__.lower())}"
                  for m in info.metadata if m.__class__.__name__ in ("Ge", "Le", "Gt", "Lt")]
        kind = f"{kind} ({', '.join(bounds)})" if bounds else kind
        rows.append((key, kind, f"default {info.default!r}: {info.description or ''}"))
    return rows
