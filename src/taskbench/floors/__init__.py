"""Library floors: for each backend, the bare FastAPI endpoint its library's documentation shows.

Each module has ``create_app()``: one ``POST /api/v1/incr/io/simple/<backend>`` that hands the
io/simple task (an INCR of ``value``) to the library the way the library's documentation does it,
with the library configured as ``taskbench.backends.<backend>`` configures it (serializer, queue
name under the run's prefix, job id), and nothing else: no taskbench code in the request path, no
metrics, no ledger, no validation beyond FastAPI's own body model. ``taskbench overhead`` serves it
in the backend's environment beside the ceiling and the reference API to measure what taskbench
itself costs. The modules read ``TASKBENCH_REDIS_URL`` and ``TASKBENCH_RUN_ID`` at start-up only.
"""
