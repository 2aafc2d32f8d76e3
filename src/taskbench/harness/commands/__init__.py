"""The harness's commands: what ``taskbench run``, ``drain``, ``overhead``, ``ceiling`` and ``up`` do.

:mod:`.runner` (the cases of a benchmark) with :mod:`.phases` (a queue case's phases after start-up),
:mod:`.drain`, :mod:`.overhead`, :mod:`.ceiling` and :mod:`.up`.
"""
