"""Faults under load and what they cost.

:mod:`.kinds` (the registry of fault kinds, a fault's spec ``KIND@T[+D|/P]``), :mod:`.injector` (the
thread that injects one during the load), :mod:`.actions` and :mod:`.broker_restart` (what each kind
does, on a :class:`~.context.FaultContext`), :mod:`.recovery` (recovery times, timeline and the
verdict against the backend's promise) and :mod:`.stalls` (the harness's polls of a Redis that stalls
or restarts: "not yet", retried with backoff).
"""
