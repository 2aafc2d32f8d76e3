"""``python -m taskbench.docs [--check]``: the documentation pages generated from the code
(:mod:`taskbench.cli.docs`, in the command line's layer since it reads the commands' options)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from taskbench.cli.docs import main

    raise SystemExit(main(sys.argv[1:]))
