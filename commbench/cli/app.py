"""The typer application every command module registers on, the error console, and the entry
point that turns errors into one line and an exit code."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import traceback

import typer
from typer._click.exceptions import NoArgsIsHelpError  # typer >= 0.27.2 (pyproject): its vendored click
from typer.core import TyperOption
from typer.exceptions import Abort, Exit, TyperException
from rich.markup import escape

from commbench import interrupts, plugins
import commbench
from commbench.errors import BAD_INPUT, FAILED, INTERNAL, InputError, JobError
from commbench.presentation.terminal import Console, one_line, stdout_full

# -h is --help in every command (subcommands inherit the root's context settings)
app = typer.Typer(help="Benchmark collective communication: the libraries' collectives and commbench's own algorithms.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})
err = Console(stderr=True, highlight=False, soft_wrap=True)
_display_type_rich = getattr(TyperOption, "display_type_rich", None)  # typer >= 0.29: the rich help's type column


def _flag_type(self, ctx):
    """An on/off flag takes no value: its help row shows no type (typer's rich help shows <bool>,
    which reads as if --in-place took true or false)."""
    return None if self.is_flag else _display_type_rich(self, ctx)


if _display_type_rich is not None:  # older typer shows no such column
    TyperOption.display_type_rich = _flag_type


def old_spelling(*declarations: str) -> typer.Option:
    """A hidden option keeping a flag's former spelling working (scripts), e.g. report's -o (now
    --output; -o is --op wherever an op is meant). Resolve it with `pick`."""
    return typer.Option(None, *declarations, hidden=True)


def pick(new, old, new_flag: str, old_flag: str, default=None):
    """The value of an option given under its new or its old (hidden) spelling; both: an error."""
    if old is None:
        return new
    if new != default:
        raise InputError(f"{old_flag} is the old spelling of {new_flag}: give one of them")
    return old


def _version(value: bool):
    if value:
        print(f"commbench {commbench.__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    """commbench: collective-communication benchmarks (MPI, gloo, NCCL)."""


def _one_line(prefix: str, text, code: int) -> None:
    """Say `text` on stderr in one line and exit with `code`; where stderr is gone too (`2>&1 | head`),
    the code alone."""
    try:
        err.print(f"{prefix}{escape(one_line(text))}")
    except OSError:  # (the console now writes to /dev/null: commbench.presentation.terminal.Console)
        pass
    sys.exit(code)


def _internal_error(exc: BaseException) -> None:
    """An error commbench did not expect: one line, the traceback in a file, exit 3."""
    try:
        fd, path = tempfile.mkstemp(prefix="commbench-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(f"commbench {commbench.__version__}, argv {sys.argv!r}\n")
            traceback.print_exception(exc, file=f)
    except OSError as write_error:
        path = f"nowhere: {write_error.strerror or write_error}"
    _one_line("commbench: internal error: ", f"{type(exc).__name__}: {exc} (traceback in {path}; please report it)",
              INTERNAL)


MEASURING = ("run", "sweep", "ab", "workload")  # the commands that write rows as they measure them


def _kept() -> str:
    """What a stopped command keeps, said only of a command that measures (the first word of argv)."""
    words = [a for a in sys.argv[1:] if not a.startswith("-")]
    return "; rows measured so far are kept" if words and words[0] in MEASURING else ""


def _stdout_to_devnull() -> None:
    """Standard output that cannot be written goes to /dev/null, so the exit's own flush fails quietly."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _stdout_closed() -> None:
    """The reader of stdout went away (`| head`): say so once, and leave quietly at exit."""
    _stdout_to_devnull()
    _one_line("commbench: stopped: ", f"standard output was closed (broken pipe){_kept()}", 128 + signal.SIGPIPE)


def main() -> None:
    """Entry point. Exit codes: 0 ok; 1 a regression, or a measurement that failed or was wrong;
    2 bad input or unusable data (one line); 3 an internal error (one line, traceback in a
    file); 128 + N on signal N (SIGINT, SIGTERM, SIGHUP; SIGPIPE for a closed stdout)."""
    interrupts.install()
    try:
        _main()
    finally:  # every path ends in sys.exit: the outcome is said, a late signal cannot undo it
        interrupts.settle()


def _main() -> None:
    if sys.stdout is None:  # started with file descriptor 1 closed (`>&-`): refused before any work
        _one_line("commbench: error: ", "standard output is closed: give the command a file (or /dev/null) to "
                  "write to", BAD_INPUT)
    try:
        os.getcwd()
    except FileNotFoundError:  # every relative path (the results folder, a suite) would fail later, unnamed
        where = os.environ.get("PWD")
        _one_line("commbench: error: ", f"the current folder{f' {where!r}' if where else ''} was deleted: cd to one "
                  "that exists and run again", BAD_INPUT)
    try:
        plugins.check()
        command = typer.main.get_command(app)
        # the command is invoked here, not through app(): typer's own main would turn an interrupt
        # into a silent exit 130 and a closed stdout into a silent exit 1
        with command.make_context("commbench", sys.argv[1:]) as ctx:
            command.invoke(ctx)
        sys.stdout.flush()
        sys.exit(0)
    except InputError as exc:
        _one_line("commbench: error: ", exc, BAD_INPUT)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(0)
    except TyperException as exc:
        _one_line("commbench: error: ", _flag_value(sys.argv[1:]) or exc.format_message(), exc.exit_code)
    except JobError as exc:
        _one_line("[bold red]commbench: failed[/]: ", exc, FAILED)
    except (KeyboardInterrupt, Abort):
        _interrupted()
    except OSError as exc:  # the machine refused a file or a resource: not commbench's fault
        if stdout_full(exc):  # no room on stdout (StdoutUnwritable too, a BrokenPipeError): not a reader gone
            _stdout_to_devnull()
            _one_line("commbench: error: ", f"cannot write standard output: {exc.strerror}{_kept()}", BAD_INPUT)
        if isinstance(exc, BrokenPipeError):
            _stdout_closed()
        _one_line("commbench: error: ", f"{exc.strerror or exc}" + (f": {exc.filename!r}" if exc.filename else ""),
                  BAD_INPUT)
    except MemoryError:
        _one_line("commbench: error: ", "out of memory", BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: one line, the traceback in a file
        _internal_error(exc)


_TRUTH = ("true", "false", "yes", "no", "on", "off", "1", "0")


def _flag_value(argv: list[str]) -> str | None:
    """`--in-place true`: say that an on/off flag takes no value (click calls the value an extra
    argument)."""
    for flag, value in zip(argv, argv[1:]):
        if flag.startswith("--") and "=" not in flag and value.lower() in _TRUTH:
            command = typer.main.get_command(app)
            params = [p for c in _leaves(command) for p in c.params if flag in p.opts + p.secondary_opts]
            if params and all(getattr(p, "is_flag", False) for p in params):
                off = next((o for p in params for o in p.secondary_opts), None)
                return (f"{flag} is an on/off flag and takes no value (got {value!r}): give {flag} alone, or "
                        + (off if off else "leave it out for off"))
    return None


def _leaves(command):
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _leaves(sub)


def _interrupted() -> None:
    signum = interrupts.received()
    _one_line("commbench: interrupted: ", f"{signal.Signals(signum).name}{_kept()}", 128 + signum)
