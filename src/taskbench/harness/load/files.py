"""The open-file limit a load needs, checked before it starts.

Each user of the load holds a connection, a file descriptor of a driver process (its users are shared out
between ``--driver-processes``). Past the limit (``ulimit -n``) every connect fails with EMFILE, and the
run would report nothing but "connect" errors. So before the load: the soft limit is raised to the hard one
when that is enough (the harness's children, the drivers among them, inherit it), and a hard limit that is
too low is one line saying what to raise.
"""

from __future__ import annotations

import math
import resource
from collections.abc import Callable

from taskbench import params
from taskbench.driver.load_spec import LoadSpec
from taskbench.errors import HarnessError

__all__ = ["DRIVER_FILES", "check_open_files"]

#: what a driver process holds besides its users' connections (the interpreter, its event loop, the pipes
#: to the harness), with room to spare
DRIVER_FILES = 64
#: what the reference API holds besides its clients' connections (its Redis pools, its logs)
API_FILES = 256

Say = Callable[[str], None]


def _limits() -> tuple[float, float]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinite = resource.RLIM_INFINITY
    return (math.inf if soft == infinite else soft), (math.inf if hard == infinite else hard)


def _most_driver_processes() -> int:
    bounds = params.get("driver_processes").bounds
    return int(bounds[1]) if bounds else 1


def check_open_files(spec: LoadSpec, say: Say, *, api: bool = False) -> None:
    """Make room for ``spec``'s connections in each driver process, or a HarnessError naming the limit to
    raise. ``api``: the harness starts the API too (it raises its own soft limit to the hard one and
    answers the connections beyond it with 503): a hard limit below its users is said in one line."""
    per_process = math.ceil(spec.users / spec.processes)
    need = per_process + DRIVER_FILES
    soft, hard = _limits()
    if need > hard:
        processes = math.ceil(spec.users / max(1, hard - DRIVER_FILES))
        # more driver processes help a load on the user's service; the reference API needs the files anyway
        spread = (f", or spread the users over more driver processes (--driver-processes {processes})"
                  if not api and spec.processes < processes <= min(_most_driver_processes(), spec.users) else "")
        # the reference API holds every user's connection in one process: the limit to set covers it too
        wanted = max(need, spec.users + API_FILES) if api else need
        raise HarnessError(
            f"--users {spec.users} needs about {need} open files in each of {spec.processes} driver "
            f"process(es), and the limit is {soft:.0f} (hard {hard:.0f}): raise it with `ulimit -n {wanted}` "
            f"(the hard limit: as root, or in /etc/security/limits.conf){spread}")
    if need > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
        say(f"open-file limit raised from {soft:.0f} to the hard limit {hard:.0f} for {spec.users} users")
    if api and spec.users + API_FILES > hard:
        say(f"the API can hold about {max(0, hard - API_FILES):.0f} of the {spec.users} users' connections under "
            f"the hard open-file limit {hard:.0f}; the rest are answered 503 (raise `ulimit -n` to "
            f"{spec.users + API_FILES})")
