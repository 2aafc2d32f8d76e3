"""``python -m taskbench``: the same CLI as the ``taskbench`` script."""

from taskbench.cli import app

app()
