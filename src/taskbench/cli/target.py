"""``taskbench run --target URL``: the options of a run against the user's own service, checked in one line each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from taskbench.cli._common import fail, say_on


def run_target(target: str, *, load: dict[str, Any], redis_url: str | None, payload: str | None, id_header: bool,
               backend: str | None, enqueue_mode: str, worker_cmd: str | None, worker_pid: int | None,
               api_cmd: str | None, fault: str | None, broker_url: str | None, allow_fault_on_target: bool,
               output: Path,
               drain_timeout: float, drain_stall: float, first_execution: float, keep: bool,
               options: list[str]) -> None:
    """Build the target's config (every mistake one line, before anything starts), run it, print the table."""
    from rich.console import Console

    from taskbench.cli.run import _finish
    from taskbench.harness.commands.target import DEFAULT_LEDGER_URL, TargetConfig, TargetRunner
    from taskbench.harness.config import load_spec
    from taskbench.harness.faults.kinds import Fault, delay_of
    from taskbench.harness.faults.on_target import target_fault
    from taskbench.report.table import render

    console = Console(stderr=True)
    try:
        if fault and delay_of(fault) is not None:
            raise ValueError("--fault delay-broker needs a broker taskbench connects its own processes to: "
                             "not on a target")
        on_target = None
        if fault:
            on_target = target_fault(Fault.parse(fault), worker_cmd=worker_cmd, worker_pid=worker_pid,
                                     broker_url=broker_url, allowed=allow_fault_on_target, api_cmd=api_cmd)
        elif allow_fault_on_target:
            raise ValueError("--allow-fault-on-target without --fault: nothing is injected unless asked")
        template = None
        if payload is not None:
            from taskbench.payload import read

            template = read(payload)
        settings = _promise_settings(backend, options)
        config = TargetConfig(url=target, load=load_spec(load), ledger_url=redis_url or DEFAULT_LEDGER_URL,
                              payload=template, id_header=id_header, library=backend, enqueue_mode=enqueue_mode,
                              worker_cmd=worker_cmd, worker_pid=worker_pid, api_cmd=api_cmd, fault=on_target,
                              broker_url=broker_url, output=output,
                              drain_timeout=drain_timeout, drain_stall=drain_stall,
                              first_execution=first_execution, keep=keep, promise_settings=settings)
    except ValueError as exc:
        fail(str(exc))
    runner = TargetRunner(config, say=say_on(console))
    _finish(runner, console, render, output)


def _promise_settings(backend: str | None, given: list[str]) -> dict[str, Any]:
    """The values of ``--option`` that change the promise of ``backend`` (the service's queue library);
    an option for another library is a mistake, said in one line."""
    from taskbench import backends
    from taskbench.backends import options as library_options

    parsed = library_options.parse(given)
    if backend is None:
        if parsed:
            raise ValueError("--option with --target: give --backend too, the backend your service uses")
        return {}
    meta = backends.info(backend)
    others = sorted(set(parsed) - {meta.extra})
    if others:
        raise ValueError(f"--option {others[0]}.*: your service's library is {meta.extra} (--backend {backend})")
    values = library_options.validate(meta.extra, meta.options, parsed.get(meta.extra, {}))
    return {name: getattr(values, name) for name in meta.promise_settings}
