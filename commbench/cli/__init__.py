"""The `commbench` command: a thin typer layer over the Python API (commbench.run.api and the
analysis modules), one module per command group. Importing this package registers them all."""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):
    """A signal before main() installs commbench.interrupts (while the commands import): one line."""
    os.write(2, f"commbench: interrupted: {signal.Signals(signum).name} while starting; nothing was run\n".encode())
    os._exit(128 + signum)


if os.path.basename(sys.argv[0]) == "commbench" or sys.argv[0].endswith(os.path.join("commbench", "__main__.py")):
    for _signal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # only as the command, not when imported
        signal.signal(_signal, _interrupted_while_starting)

# registers the commands (--help lists them in registration order)
from commbench.cli import run, ab, check, reports, stragglers, topo, model, imports, workload  # noqa: F401, E402, I001
from commbench.cli.app import app, main  # noqa: E402
from commbench.cli.examples import attach  # noqa: E402

attach(app)  # every command's --help ends with its examples

__all__ = ["app", "main"]
