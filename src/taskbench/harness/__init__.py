"""The harness: starts every process of a run, drives load, audits, and stops everything.

Grouped by concern, each layer importing only those below it (import-linter checks it):
:mod:`.commands` (``run``, ``drain``, ``overhead``, ``ceiling``, ``up``); :mod:`.config`, :mod:`.keys`,
:mod:`.machine`, :mod:`.progress`, :mod:`.prometheus`, :mod:`.scrape`; :mod:`.faults`; :mod:`.brokers`
(the servers the harness starts privately, one base class); :mod:`.processes`.
"""

from taskbench.errors import HarnessError

__all__ = ["HarnessError"]
