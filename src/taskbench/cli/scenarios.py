"""``taskbench scenarios``: the shipped scenarios, or (``--parameters``) what a case of each kind takes."""

from __future__ import annotations

from typing import Annotated

import typer


def list_scenarios(
    parameters: Annotated[bool, typer.Option(
        "--parameters", help="list the parameters a case of each kind takes, with their ranges")] = False,
    cases: Annotated[bool, typer.Option(
        "--cases/--no-cases", help="list each scenario's cases (numbers for `run --cases`) and profiles")] = True,
) -> None:
    """List the shipped scenarios (the seed articles' experiments); run one with `run --scenario NAME`."""
    from taskbench.scenarios import FILES, ScenarioError, load, shipped
    from taskbench.scenarios.parse import FIGURES, PARAMETERS

    if parameters:
        for kind, params in PARAMETERS.items():
            typer.echo(f"{kind} scenarios:")
            for name, param in sorted(params.items()):
                typer.echo(f"  {name:18} {param.describe():32} {param.help}")
        typer.echo(f"article figures ([[article.rows]]): {', '.join(FIGURES)}")
        return
    for path in shipped():
        try:
            found = load(path)
        except ScenarioError as exc:
            typer.echo(f"{path.stem:20} BROKEN: {exc}")
            continue
        seed = f"seed {found.seed}" if found.seed else ""
        typer.echo(f"{found.name:20} {found.kind:7} {len(found.cases):3} cases  {seed:9} {found.description}")
        if cases:
            for case in found.cases:
                typer.echo(f"  {case.index:3}  {case.label}")
        if found.profiles:
            typer.echo(f"  {'':3}  profiles (--profile): {', '.join(found.profiles)}")
    typer.echo(f"\nthe files: {FILES}")
    typer.echo("run one: taskbench run --scenario NAME   (or a path to your own copy of a file; "
               "`taskbench scenarios --parameters` lists what a case takes)")
