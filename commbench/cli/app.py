"""The typer application every command module registers on, the error console, and the entry
point that turns errors into one line and an exit code."""

from __future__ import annotations

import signal
import sys

import typer
from typer._click.exceptions import NoArgsIsHelpError  # typer >= 0.27.2 (pyproject): its vendored click
from typer.exceptions import Abort, Exit, TyperException
from rich.console import Console
from rich.markup import escape

from commbench import plugins
import commbench
from commbench.errors import InputError, JobError

app = typer.Typer(help="Benchmark collective communication: the libraries' collectives and commbench's own algorithms.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool):
    if value:
        print(f"commbench {commbench.__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    """commbench: collective-communication benchmarks (MPI, gloo, NCCL)."""


def main() -> None:
    """Entry point: errors become one line (exit 2 for bad input, 1 for failed jobs)."""
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        plugins.check()
        code = app(standalone_mode=False)  # returns a command's typer.Exit code in this mode
        sys.exit(code if isinstance(code, int) else 0)
    except InputError as exc:
        err.print(f"commbench: error: {escape(str(exc))}")
        sys.exit(2)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(0)
    except TyperException as exc:
        err.print(f"commbench: error: {escape(exc.format_message())}")
        sys.exit(exc.exit_code)
    except JobError as exc:
        err.print(f"[bold red]commbench: failed[/]: {escape(str(exc))}")
        sys.exit(1)
    except (KeyboardInterrupt, Abort):
        err.print("commbench: interrupted; rows measured so far are kept")
        sys.exit(130)
