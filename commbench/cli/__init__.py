"""The `commbench` command: a thin typer layer over the Python API (commbench.run.api and the
analysis modules), one module per command group. Importing this package registers them all."""

# registers the commands (--help lists them in registration order)
from commbench.cli import run, ab, results, topo, model, imports  # noqa: F401, I001
from commbench.cli.app import app, main

__all__ = ["app", "main"]
