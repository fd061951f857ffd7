"""What several commands share (run, sweep, ab, workload, check, model predict): the run options as typer
parameters, which of them a command line gave, the checks of given options against the specs they reach,
and the note a command that launches ranks says about --backend auto."""

from __future__ import annotations

import inspect
from typing import Optional

import typer
from rich.markup import escape
from typer._click.core import ParameterSource  # typer >= 0.27.2 (pyproject): its vendored click

from commbench import options
from commbench.algorithms import ALGORITHMS as OWN_ALGORITHMS
from commbench.cli.app import err
from commbench.errors import InputError
from commbench.spec import SweepSpec


def with_options(table=options.CLI_OPTIONS, extra: tuple[inspect.Parameter, ...] = ()):
    """Give `func(ctx, **values)` a signature typer reads: the context, one typer option per option of
    `table`, and the `extra` parameters (a command's own)."""
    def wrap(func):
        params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
        params += [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY,
                                     default=typer.Option(o.default, *o.declarations, help=o.help),
                                     annotation=Optional[o.type] if o.default is None else o.type)
                   for o in table]
        func.__signature__ = inspect.Signature(params + list(extra))
        func.__annotations__ = {p.name: p.annotation for p in params + list(extra)}
        return func
    return wrap


def extra_option(name: str, annotation, default, *flags: str, help: str) -> inspect.Parameter:
    """A command's own option for with_options' `extra`: keyword `name`, typer's Option(default, *flags)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=typer.Option(default, *flags, help=help))


def given(ctx, table=options.CLI_OPTIONS) -> list[str]:
    """The names of the table's options given on the command line (not left at their defaults)."""
    return [o.name for o in table
            if ctx.get_parameter_source(o.name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)]


def check_used(chosen, specs: list[SweepSpec]) -> None:
    """Refuse a run option given on a command line (`chosen`, by name) that none of the specs it reaches
    (a run's, a suite's runs, ab's two sides, a workload's sweeps) can use: --channels where none runs a
    kernel algorithm, --ring-order topology where none runs ring. (A recorded spec, resumed, is not checked.)"""
    kernels = [name for name, a in OWN_ALGORITHMS.items() if a.engine == "kernel"]
    algorithms = ",".join(dict.fromkeys(a for s in specs for a in s.algorithms))
    if "channels" in chosen and not any(set(kernels) & set(s.algorithms) for s in specs):
        raise InputError(f"--channels sets the kernels' channels, and -a {algorithms} runs none of them "
                         f"({', '.join(kernels)}): leave it out")
    if "ring_order" in chosen and not any(s.ring_order != "topology" or "ring_topology" in s.algorithms for s in specs):
        raise InputError(f"--ring-order topology runs -a ring as ring_topology, and -a {algorithms} has no ring: "
                         "leave it out")


def say_backend_choice(backends) -> None:
    """One line when --backend auto (the default) became gloo because MPI is missing: every command
    that launches ranks says so (run, sweep, ab, workload), --quiet or not: it changes what is measured."""
    for note in dict.fromkeys(options.auto_backend_note(b) for b in backends):
        if note:
            err.print(f"[yellow]note[/]: {escape(note)}")
