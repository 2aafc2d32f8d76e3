"""The harness's commands: what ``taskbench run`` (:mod:`.run`, ``--target``: :mod:`.target`), ``drain``,
``overhead``, ``ceiling``, ``up``, ``choose``, ``parity``, ``drive --segment`` and ``collector`` do.

A case of any of them is a pipeline of :mod:`taskbench.harness.case`.
"""
