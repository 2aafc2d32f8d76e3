"""ARQ: an asyncio worker polling a Redis sorted set, msgpack."""

from taskbench.backends.declaration import BackendInfo, Delivery
from taskbench.backends.shapes import Shape, folded

BACKENDS = (
    BackendInfo(
        name="arq",
        time_limit="arq's job_timeout",
        port=8002,
        rank=10,
        summary="ARQ: asyncio worker polling a Redis sorted set, msgpack serialization",
        key_patterns=("arq:*:{run_id}:*",),
        remembers_ids=True,
        default_delivery=Delivery(recovery="the job's in-progress key expires: re-run after the job timeout "
                                           "(--task-timeout) + 10 s",
                                  source="arq 0.28 arq/worker.py Worker.start_jobs (the in-progress key, "
                                         "its expiry: the job timeout + 10 s)"),
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("arq", 20_000, 32, "gather", "burst", "benchmarks/bench_arq.py; `arq --burst`", parallel=32,
          published_s=62.66, note="published with a fork of arq (Graeme22/arq); here arq as released", source="streaq"),
    Shape("arq", 1_000, 10, "gather", "burst", "benchmarks/simple.py bench_arq", parallel=20, published_s=5.02181,
          source="saq"),
    Shape("arq", 20_000, 10, "serial", "last-finish", "arq/ (poll_delay 0.01, max_jobs 1000, 10 processes)",
          options={"poll_delay": "0.01"}, published_s=35.37, note=folded(10), source="python_queue_benchmark"),
)
