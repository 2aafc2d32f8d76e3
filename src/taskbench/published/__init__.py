"""The libraries' own published no-op drain benchmarks, as small scripts of the same shape.

Each ``<library>_noop`` module is run by ``taskbench parity`` as ``python -m taskbench.published.<library>_noop``
inside that library's backend environment, against the run's private Redis and under the run's key
prefix: it enqueues the published script's task count the way that script does (one by one, gathered,
or in bulk), drains them with one worker of the published concurrency, times the drain the way that
script does, and prints one JSON line. ``shapes`` says which published script each shape mirrors
(repository, path and commit) and what it published. The scripts import nothing of taskbench but
``_shape``, so that what they measure is the library alone.
"""
