"""The backend registry: every backend package's declaration, discovered.

A backend is one package, ``taskbench/backends/<library>/``:

- ``__init__.py``: its declaration, ``BACKENDS`` (one :class:`BackendInfo` per wiring of the library) and
  the library's settings as one typed model (``Options``, :mod:`taskbench.backends.options`); it
  imports nothing of the library, so the harness reads it in its own environment;
- ``backend.py`` (``backend_<variant>.py``): the producer in the API and the worker (``backend``);
- ``floor.py``: the library's minimal FastAPI app, as its documentation shows it (``taskbench overhead``);
- ``published.py``: the library's published no-op benchmark as a script (``taskbench parity``).

A new backend is its package and its extra in pyproject.toml; nothing else names it.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from taskbench.backends.declaration import AT_LEAST_ONCE, AT_MOST_ONCE, BackendInfo, Delivery, Threading
from taskbench.backends.options import LibraryOptions, NoOptions, OptionError

if TYPE_CHECKING:
    from taskbench.backends.base import Backend

__all__ = ["AT_LEAST_ONCE", "AT_MOST_ONCE", "REGISTRY", "BackendInfo", "Delivery", "LibraryOptions", "NoOptions",
           "OptionError", "Threading", "UnknownBackendError", "available", "declared", "info", "libraries", "load"]


@cache
def _packages() -> tuple[ModuleType, ...]:
    """The backend packages' declarations (``__init__``), by their first backend's rank."""
    found = [importlib.import_module(f"{__name__}.{module.name}")
             for module in pkgutil.iter_modules(__path__) if module.ispkg]
    return tuple(sorted(found, key=lambda p: (min((e.rank for e in getattr(p, "BACKENDS", ())), default=1000),
                                              p.__name__)))


@cache
def _registry() -> dict[str, BackendInfo]:
    """Every package's ``BACKENDS``, by rank: read on first use, since a package imports this module."""
    found: list[BackendInfo] = []
    for package in _packages():
        name = package.__name__.rsplit(".", 1)[1]
        for entry in getattr(package, "BACKENDS", ()):
            if entry.package and entry.package != name:
                raise ValueError(f"{entry.name}: declared in {name}, names package {entry.package}")
            found.append(_with_package(entry, name))
    return {entry.name: entry for entry in sorted(found, key=lambda e: (e.rank, e.name))}


def declared(attribute: str) -> list[Any]:
    """What every backend package declares under ``attribute`` (a tuple), in package order: e.g. ``SHAPES``,
    the library's runs in the published benchmarks."""
    return [item for package in _packages() for item in getattr(package, attribute, ())]


def _with_package(entry: BackendInfo, package: str) -> BackendInfo:
    from dataclasses import replace

    return entry if entry.package else replace(entry, package=package)


def __getattr__(name: str) -> Any:
    if name == "REGISTRY":  # a module attribute read lazily: the packages import this module first
        return _registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def libraries() -> dict[str, type[LibraryOptions]]:
    """The packages whose library takes settings, and their model: what ``--option LIB.KEY=VALUE`` takes."""
    out: dict[str, type[LibraryOptions]] = {}
    for meta in _registry().values():
        if meta.options is not NoOptions:
            out.setdefault(meta.extra, meta.options)
    return out


def library_of(name: str) -> str:
    """The package (the library) of a backend: the prefix of its ``--option`` settings."""
    return info(name).extra


class UnknownBackendError(ValueError):
    pass


def info(name: str) -> BackendInfo:
    """The registry entry of an implemented backend; anything else is an UnknownBackendError."""
    meta = _registry().get(name)
    if meta is None or not meta.implemented:
        known = ", ".join(available(unsafe=True))
        planned = " (planned, not implemented yet)" if meta is not None else ""
        raise UnknownBackendError(f"unknown backend {name!r}{planned}; known: {known}")
    return meta


def available(*, unsafe: bool = False) -> list[str]:
    """Backends whose module exists, in registry order: what ``--backends all`` runs, which leaves the
    unsafe seed wirings out unless ``unsafe``."""
    return [name for name, meta in _registry().items() if meta.implemented and (unsafe or not meta.unsafe)]


def load(name: str) -> Backend:
    """Import a backend's module; a missing library gives an install hint, not a traceback."""
    meta = info(name)
    try:
        module = importlib.import_module(meta.module)
    except ImportError as exc:
        raise ImportError(
            f"backend {name!r} needs its extra: pip install 'taskbench[{meta.extra}]' "
            f"(the harness builds it for you with `taskbench run --backends {name}`): {exc}"
        ) from exc
    backend: Backend = module.backend
    return backend
