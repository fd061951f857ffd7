"""`commbench run` and `commbench sweep`: measure, into result folders."""

from __future__ import annotations

import inspect
import sys
from typing import Optional

import typer
from rich.markup import escape

from commbench import options
from commbench.cli.app import app, err
from commbench.errors import InputError
from commbench.run.suites import bundled_suites
from commbench.spec import SweepSpec


def _with_options(func):
    """Give `func(**values)` a signature typer reads: one typer option per CLI option of the table."""
    params = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY,
                                default=typer.Option(o.default, *o.declarations, help=o.help),
                                annotation=Optional[o.type] if o.default is None else o.type)
              for o in options.CLI_OPTIONS]
    func.__signature__ = inspect.Signature(params)
    func.__annotations__ = {p.name: p.annotation for p in params}
    return func


@app.command()
@_with_options
def run(**values):
    """Sweep collectives over sizes, dtypes and ops; write results.csv, samples and run.json."""
    from commbench.run.api import resume_sweep, run_sweep
    from commbench.run.console import Renderer

    spec = SweepSpec.from_options(**options.spec_arguments(options.cli_fields(values)))
    launcher_args = options.launcher_argv(values["launcher_args"])
    renderer = Renderer(quiet=values["quiet"], json_rows=values["json_rows"])
    try:
        if values["resume"] is not None and values["repeat"] != 1:
            raise InputError("--resume takes the jobs per point recorded with the run: leave out --repeat")
        if values["resume"] is not None:  # its recorded launcher arguments unless new ones are given
            result = resume_sweep(values["resume"], launcher_args=launcher_args if values["launcher_args"] else None,
                                  on_event=renderer, argv=sys.argv)
        else:
            result = run_sweep(spec, launcher_args=launcher_args, on_event=renderer, argv=sys.argv,
                               repeat=values["repeat"])
    finally:
        renderer.close()
    _summarize(result, values["json_rows"])


def _summarize(result, json_rows: bool) -> None:
    """The comparison table (unless rows went to stdout as JSON) and the OK / FAILED line."""
    from commbench.results import RESULTS_CSV

    if not result.reports:
        return
    summary = f"{len(result.rows)} points measured, {len(result.skipped)} skipped; results in {result.out_dir}"
    if not (result.out_dir / RESULTS_CSV).exists():
        reasons = "; ".join(dict.fromkeys(s["reason"] for s in result.skipped))
        raise InputError(f"nothing measured: all {len(result.skipped)} points were skipped ({reasons})")
    if not json_rows:
        from commbench.cli.results import print_comparison

        print_comparison([str(result.out_dir)])
    if result.wrong:
        err.print(f"[bold red]FAILED[/]: {result.wrong} wrong elements; {escape(summary)}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {escape(summary)}")


@app.command()
def sweep(
    suite: str = typer.Argument(..., help=f"A suite file, or the name of a bundled suite ({', '.join(bundled_suites())})."),
    out: Optional[str] = typer.Option(None, "--out", help="Sweep folder; each run goes to <out>/<label>/ (default results/<suite>-<UTC time>/)."),
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted sweep in --out: keep completed runs, resume the others."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only each run's summary."),
):
    """Run every run of a suite (validated whole before anything starts)."""
    from commbench.run.api import new_run_id, run_suite
    from commbench.run.console import Renderer
    from commbench.run.suites import load_suite

    loaded = load_suite(suite)
    if resume and out is None:
        raise InputError("--resume needs --out, the folder of the sweep to finish")
    folder = out or f"results/{loaded.name}-{new_run_id()}"
    renderer = Renderer(quiet=quiet)

    def on_run(label, what):
        renderer.close()
        err.print(f"[bold]== {escape(loaded.name)} / {escape(label)}[/]: {what}")

    try:
        outcomes = run_suite(loaded, folder, resume=resume, on_run=on_run, on_event=renderer)
    finally:
        renderer.close()
    failed = [(label, error) for label, _, error in outcomes if error]
    wrong = sum(r.wrong for _, r, _ in outcomes if r is not None)
    for label, error in failed:
        err.print(f"[bold red]run {escape(label)} failed[/]: {escape(error)}")
    summary = f"{len(outcomes)} runs, {len(failed)} failed, {wrong} wrong elements; results in {folder}"
    if failed or wrong:
        err.print(f"[bold red]FAILED[/]: {escape(summary)}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {escape(summary)}")


