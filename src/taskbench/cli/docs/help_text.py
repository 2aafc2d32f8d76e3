"""``taskbench --help`` as plain text: what ``./taskbench --help`` prints on a clone whose environment is not
built yet (the shell script reads docs/help.txt; building the environment first would take about 30 s)."""

from __future__ import annotations

import contextlib
import io

from typer import rich_utils

#: the width of the kept text: a terminal's 100 columns, where every command's line fits
WIDTH = 100


def render() -> str:
    from taskbench.cli import app

    saved = rich_utils.MAX_WIDTH, rich_utils.COLOR_SYSTEM, rich_utils.FORCE_TERMINAL
    rich_utils.MAX_WIDTH, rich_utils.COLOR_SYSTEM, rich_utils.FORCE_TERMINAL = WIDTH, None, False
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            app(["--help"], prog_name="taskbench")
    finally:
        rich_utils.MAX_WIDTH, rich_utils.COLOR_SYSTEM, rich_utils.FORCE_TERMINAL = saved
    # rich pads each line to the width: the kept text has no trailing blanks
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
