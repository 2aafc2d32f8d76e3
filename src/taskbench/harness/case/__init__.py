"""A case: one pipeline of named steps, start -> warm-up -> load -> drain -> audit -> stop, then its verdict.

:mod:`.pipeline` runs the steps in order; each kind of case (the reference stack's, the user's own service
of ``run --target``, the collector of many drivers and ``run --nodes``) is a subclass with its hooks. The
steps' helpers: :mod:`.start`, :mod:`.warm_up`, :mod:`.search_load` (the rate search as a case's load),
:mod:`.drain_wait`, :mod:`.audit`, :mod:`.stop`; what a fault (:mod:`.reference`), a user's own task
(:mod:`.own_task`) and a soak (:mod:`.soak`) add.
"""
