"""taskbench.driver: a lean asyncio HTTP/1.1 load generator for loopback targets.

Built on asyncio Protocols and uvloop with pre-encoded requests and minimal
response parsing, so that the driver is not the bottleneck of a benchmark.
"""

from taskbench.driver.launch import run_load, run_load_async, run_load_together
from taskbench.driver.load_spec import LoadSpec, RequestTemplate
from taskbench.driver.result import LoadResult
from taskbench.histogram import Histogram

__all__ = [
    "Histogram",
    "LoadResult",
    "LoadSpec",
    "RequestTemplate",
    "run_load",
    "run_load_async",
    "run_load_together",
]
