"""Scenario files: TOML that expands to a matrix of cases; every mistake is reported with its line.

A scenario file::

    name = "backends"
    description = "one line for `taskbench scenarios`"
    kind = "queue"            # queue | http | celery
    seed = "000"              # the article it reproduces (optional)

    [article]                 # where the published figures come from (optional)
    source = "..."
    setup = "hardware, limits and load of the article"

    [options.saq]             # a library's settings in every case (`taskbench backends` lists them)
    retries = 3

    [defaults]                # parameters of every case
    workload = "io/simple"
    options.saq.retries = 2   # one setting: merged key by key over [options.saq]

    [matrix]                  # every combination of these values is a case
    backend = ["arq", "saq"]
    limits = ["small"]

    # or several blocks, each crossing its own lists; a block's single values are its cases' own
    # [[matrix]]
    # backend = ["arq", "saq"]
    # broker_delay = [0.0, 5.0]
    # requests = 500
    # a block's backends by what they declare (scenarios/selector.py), in the registry's order:
    # backend = { broker = "redis", threading = ["loop", "threads"], except = ["saq"] }

    [[case]]                  # extra cases: defaults + these values
    backend = "arq"
    enqueue_mode = "after-response"
    label = "{backend}, enqueued after the response"   # a row label; {name} is the case's value
    options.saq.retries = 1   # this key over the matrix's, the defaults' and [options.saq]; the rest stay

    [limits.small]            # named limit sets, per component
    api = { cpu = 0.2, memory_mb = 200 }

    [[article.rows]]          # the article's figures for the cases they match
    match = { backend = "arq", limits = "small" }
    rps = 227

    [[phases]]                # queue: every case's load as phases (docs/load.md), in order
    kind = "steady"           # warmup | steady | burst | pause-workers | stall-broker | recovery
    duration = 30             # seconds, or "30s", "2m"
    rate = 1000               # requests per second, or "x1.5" (a multiple of the steady rate)

    [profile.article]         # `run --profile article`: these values override every case
    requests = 50000
    duration = 900.0

    [[profile.article.for]]   # ... and these the cases they match (matched before the override)
    match = { workload = "cpu/simple" }
    requests = 100

The parameters a case takes depend on ``kind`` (see :data:`PARAMETERS`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskbench import inputs
from taskbench import params as schema
from taskbench.harness.load import phases as load_phases
from taskbench.harness.processes.cgroups import Limit
from taskbench.scenarios import checks, layers, selector
from taskbench.scenarios.checks import COMPONENTS, FIGURES, PARAMETERS, Checker, ScenarioError

# the checks live in scenarios/checks.py; their tables and error stay importable from here
__all__ = ["COMPONENTS", "FIGURES", "KINDS", "NAME", "PARAMETERS", "RUN_ID_MAX", "RUN_ID_STAMP", "TOP_KEYS",
           "Case", "Scenario", "ScenarioError", "load"]

KINDS = schema.KINDS
# the keys that say how a case is loaded, not what it is: left out of the labels made of varying keys
_LOAD_KEYS = frozenset(p.name for p in schema.SCHEMA if p.kinds == ("queue", "http") and p.name != "limits") \
    | {"drain_timeout", "drain_stall", "label", "repeat"}
TOP_KEYS = {"name", "description", "kind", "seed", "article", "options", "defaults", "matrix", "case", "limits",
            "profile", "phases"}


#: larger than this, a file is no scenario (the largest shipped is a few KB)
MAX_BYTES = 1024 * 1024

#: a scenario's name becomes a folder under --output and the start of every run id of its cases
#: (``<name>-<YYYYmmddTHHMMSS>-<pid>``, then ``-<case>-<backend>``), which the processes' settings take
#: as ``settings.RUN_ID_PATTERN``: so letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit
#: (no ``/``, no ``..``, never a hidden folder), and short enough for the longest run id of its cases
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
RUN_ID_MAX = 64
#: ``-<UTC stamp>-<pid>`` after the name (a pid has at most 7 digits: pid_max is at most 4194304)
RUN_ID_STAMP = len("-20260101T000000-") + 7


def _shown(key: str, value: Any, backend: Any = None) -> str:
    """A varying value in an automatic label: a string as it is, a number as ``key=1.5``, the libraries'
    options as ``saq.retries=3`` (a queue case's: its own library's only, the others do not reach it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        own = _library(backend)
        return ", ".join(f"{library}.{name}={setting}" for library, values in value.items()
                         if own is None or library == own
                         for name, setting in (values.items() if isinstance(values, dict) else ()))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{key}={value}"
    return f"{key}={value:g}"


def _library(backend: Any) -> str | None:
    """The library (its options' prefix) of a case's backend; None: no backend, or not one of the registry's."""
    if not isinstance(backend, str):
        return None
    from taskbench import backends

    try:
        return backends.library_of(backend)
    except backends.UnknownBackendError:
        return None


@dataclass(frozen=True)
class Case:
    index: int
    params: dict[str, Any]
    limits: dict[str, Limit]
    article: dict[str, Any] | None

    @property
    def label(self) -> str:
        """``label`` if given, else the case's values of the identity keys that vary between cases."""
        if self.params.get("label"):
            return str(self.params["label"])
        backend = self.params.get("backend")
        # the libraries' settings last, wherever the file gave them: the backend first
        keys = sorted(self.params, key=lambda k: k == "options")
        parts = [_shown(k, self.params[k], backend) for k in keys if k in self.varying and k not in _LOAD_KEYS]
        parts = [part for part in parts if part]
        return ", ".join(parts) or f"case {self.index}"

    varying: tuple[str, ...] = ()
    #: the scenario's ``[[phases]]``: the case's load as phases of the open model (none: its own load)
    phases: tuple[load_phases.Phase, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    kind: str
    path: Path
    seed: str | None
    article: dict[str, Any]
    cases: list[Case] = field(default_factory=list)
    limit_sets: dict[str, dict[str, Limit]] = field(default_factory=dict)
    varying: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()  # the file's [profile.NAME] tables
    profile: str | None = None  # the one applied to the cases

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "kind": self.kind,
                "file": str(self.path), "seed": self.seed,
                "article": {k: v for k, v in self.article.items() if k != "rows"},
                "varying": list(self.varying), "profile": self.profile}


def load(path: Path, profile: str | None = None) -> Scenario:
    """Parse and validate a scenario file; raise :class:`ScenarioError` naming file and line.

    ``profile`` names a ``[profile.NAME]`` table of the file whose values override every case."""
    try:
        raw = inputs.read_bytes(path, MAX_BYTES)
    except inputs.InputError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ScenarioError(f"{path}:{line}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ScenarioError(f"{path}: not a scenario (nested too deep)") from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        found = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"{path}:{found.group(1)}" if found else str(path)
        reason = re.sub(r" \(at line.*", "", msg)
        raise ScenarioError(f"{where}: not valid TOML: {reason}") from None
    return _Builder(path, text, data, profile).build()


class _Builder(Checker):
    def __init__(self, path: Path, text: str, data: dict[str, Any], profile: str | None = None) -> None:
        super().__init__(path, text, data)
        self.profile = profile

    def build(self) -> Scenario:
        data = self.data
        self.check_finite()
        for key in data:
            if key not in TOP_KEYS:
                raise self.fail(f"unknown key {key!r}; known: {', '.join(sorted(TOP_KEYS))}", "", key)
        for key in ("name", "description", "kind"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise self.fail(f"{key!r} must be a non-empty string", "", key)
        name = data["name"]
        if not NAME.fullmatch(name) or ".." in name:
            raise self.fail(f"name {name!r} must be letters, digits, '_', '.' and '-', starting with a letter or "
                            "digit (it names the run's folder under --output)", "", "name")
        kind = data["kind"]
        if kind not in KINDS:
            raise self.fail(f"unknown kind {kind!r}; known: {', '.join(KINDS)}", "", "kind")
        limit_sets = self._limits(kind)
        phases = self._phases(kind)
        options = self._top_options(kind, limit_sets)
        defaults = self._table("defaults")
        blocks = self._matrices()
        extra = data.get("case", [])
        if not isinstance(extra, list):
            raise self.fail("'case' must be an array of tables ([[case]])", "", "case")
        self._check_tables(kind, limit_sets, defaults, blocks, extra)
        profiles = self._profiles(kind, limit_sets)
        if self.profile and self.profile not in profiles:
            raise ScenarioError(f"{self.path}: no profile {self.profile!r}; defined: "
                                f"{', '.join(profiles) or 'none'}")
        raw = layers.expand(options, defaults, blocks, extra)
        if self.profile:
            raw = [layers.apply_profile(profiles[self.profile], params) for params in raw]
        if not raw:
            raise self.fail("the scenario has no case")
        if len(raw) > 500:
            raise self.fail(f"the scenario expands to {len(raw)} cases; at most 500")
        params_def = PARAMETERS[kind]
        varying = tuple(k for k in params_def if len({repr(c.get(k)) for c in raw}) > 1)
        article = data.get("article", {})
        if not isinstance(article, dict):
            raise self.fail("'article' must be a table", "", "article")
        rows = article.get("rows", [])
        for nth, row in enumerate(rows):
            self._check_row(kind, row, nth, limit_sets)
        cases = []
        for index, params in enumerate(raw):
            self._required(kind, params, phased=bool(phases))
            if "{" in str(params.get("label", "")):
                params["label"] = self._label(params, defaults)
            limits = limit_sets.get(params["limits"], {}) if params.get("limits") else {}
            match = next((r for r in rows if all(params.get(k) == v for k, v in r["match"].items())), None)
            figures = {k: v for k, v in match.items() if k != "match"} if match else None
            cases.append(Case(index, params, limits, figures, varying, phases))
        # the longest run id of a case: <name>-<stamp>-<pid>-<case>[-<backend>]
        suffix = max(len(f"-{c.index}" + (f"-{c.params['backend']}" if kind == "queue" else "")) for c in cases)
        longest = RUN_ID_MAX - RUN_ID_STAMP - suffix
        if len(name) > longest:
            raise self.fail(f"name {name!r} is {len(name)} characters; at most {longest} for this scenario "
                            f"(a case's run id, name-time-pid-case-backend, must fit {RUN_ID_MAX})", "", "name")
        seed = data.get("seed")
        return Scenario(name=data["name"], description=data["description"], kind=kind, path=self.path,
                        seed=str(seed) if seed is not None else None, article=article, cases=cases,
                        limit_sets=limit_sets, varying=varying, profiles=tuple(profiles), profile=self.profile)

    def _check_tables(self, kind: str, limit_sets: dict[str, Any], defaults: dict[str, Any],
                      blocks: list[layers.Block], extra: list[Any]) -> None:
        """Every value of ``[defaults]``, the matrix blocks and the ``[[case]]`` tables, each naming its line."""
        for key, value in defaults.items():
            self._check(kind, key, value, limit_sets, "defaults", key)
        for nth, (crossed, fixed) in enumerate(blocks):
            for key, values in crossed.items():
                for value in values:
                    self._check(kind, key, value, limit_sets, "matrix", key, nth)
            for key, value in fixed.items():
                self._check(kind, key, value, limit_sets, "matrix", key, nth)
        for nth, entry in enumerate(extra):
            if not isinstance(entry, dict):
                raise self.fail("each [[case]] must be a table", "case", "", nth)
            for key, value in entry.items():
                self._check(kind, key, value, limit_sets, "case", key, nth)

    def _top_options(self, kind: str, limit_sets: dict[str, Any]) -> dict[str, Any]:
        """The file's ``[options.LIB]`` tables: the libraries' settings of every case, under the cases' own."""
        if "options" not in self.data:
            return {}
        value = self.data["options"]
        if not isinstance(value, dict):
            raise self.fail("'options' must be a table per library ([options.saq] with retries = 3)", "", "options")
        self._check(kind, "options", value, limit_sets, "", "options")
        return value

    def _phases(self, kind: str) -> tuple[load_phases.Phase, ...]:
        """``[[phases]]``: every queue case's load, checked entry by entry (a mistake names its line)."""
        entries = self.data.get("phases")
        if entries is None:
            return ()
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise self.fail("'phases' must be an array of tables ([[phases]] with kind, duration, rate)", "", "phases")
        if kind != "queue":
            raise self.fail(f"phases are a queue scenario's load, not a {kind} one's", "phases")
        try:
            return load_phases.from_table(entries)
        except load_phases.PhaseError as exc:
            raise self.fail(f"phase {exc.index + 1}: {exc}", "phases", exc.key, exc.index) from None

    def _profiles(self, kind: str, limit_sets: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """``[profile.NAME]`` tables: parameters that override every case when the profile is chosen,
        and ``[[profile.NAME.for]]`` entries (``match`` + parameters) for the cases they match."""
        out: dict[str, dict[str, Any]] = {}
        for name, values in self._table("profile").items():
            table = f"profile.{name}"
            if not isinstance(values, dict):
                raise self.fail(f"profile {name!r} must be a table ([profile.{name}])", "profile", name)
            entries = values.get("for", [])
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise self.fail(f"'for' of profile {name!r} must be an array of tables", table, "for")
            for nth, entry in enumerate(entries):
                if not isinstance(entry.get("match"), dict):
                    raise self.fail("each [[profile.NAME.for]] needs a match = { ... } table", f"{table}.for", "", nth)
            items = [(k, v, table, 0) for k, v in values.items() if k != "for"]
            for nth, entry in enumerate(entries):
                pairs = [*((k, v) for k, v in entry.items() if k != "match"), *entry["match"].items()]
                items += [(k, v, f"{table}.for", nth) for k, v in pairs]
            for key, value, where, nth in items:
                if key == "label":
                    raise self.fail("a profile changes the scale of the cases, not their labels", where, key, nth)
                self._check(kind, key, value, limit_sets, where, key, nth)
            out[name] = values
        return out

    def _label(self, params: dict[str, Any], defaults: dict[str, Any]) -> str:
        """A label template such as ``"{backend} at {limits}"``, filled with the case's values."""
        template = str(params["label"])
        where = ("defaults", "label") if defaults.get("label") == template else ("case", "label")
        values = {k: (f"{v:g}" if isinstance(v, float) else str(v)) for k, v in params.items()}
        out = []
        for text, name in checks.label_fields(template):  # checked with its line by Checker._check
            if name is not None and name not in values:
                raise self.fail(f"label {template!r} names {name!r}, which this case does not set", *where)
            out.append(text if name is None else text + values[name])
        return "".join(out)

    def _selected(self, block: dict[str, Any], nth: int) -> dict[str, Any]:
        """A block whose ``backend = { broker = ..., ... }`` selector is the list of the backends it selects."""
        choice = block.get("backend")
        if not isinstance(choice, dict):
            return block
        try:
            return {**block, "backend": selector.select(choice)}
        except selector.SelectorError as exc:
            raise self.fail(str(exc), "matrix", "backend", nth) from None

    def _matrices(self) -> list[tuple[dict[str, list[Any]], dict[str, Any]]]:
        """The matrix blocks as (crossed lists, fixed values): one ``[matrix]`` table, whose every value
        is a list, or ``[[matrix]]`` blocks, each crossing its lists and giving its scalars to its cases."""
        value = self.data.get("matrix")
        if value is None:
            return []
        if isinstance(value, dict):
            value = self._selected(value, 0)
            for key, values in value.items():
                if not isinstance(values, list) or not values:
                    raise self.fail(f"matrix value of {key!r} must be a non-empty list", "matrix", key)
            return [(value, {})]
        if not isinstance(value, list) or not all(isinstance(block, dict) for block in value):
            raise self.fail("'matrix' must be a table ([matrix]) or an array of tables ([[matrix]])", "", "matrix")
        blocks = []
        for nth, block in enumerate(value):
            block = self._selected(block, nth)
            crossed = {k: v for k, v in block.items() if isinstance(v, list)}
            for key, values in crossed.items():
                if not values:
                    raise self.fail(f"matrix value of {key!r} must be a non-empty list", "matrix", key, nth)
            if not crossed:
                raise self.fail("a [[matrix]] block needs at least one list of values to cross "
                                "(a single case is a [[case]])", "matrix", "", nth)
            blocks.append((crossed, {k: v for k, v in block.items() if k not in crossed}))
        return blocks
