"""`commbench run` and `commbench sweep`: measure, into result folders."""

from __future__ import annotations

import inspect
import shlex
import sys
from typing import Optional

import typer
from rich.markup import escape
from typer.core import TyperCommand

from commbench import options
from commbench.cli.app import app, err
from commbench.cli.common import check_used, extra_option, given, say_backend_choice, with_options
from commbench.errors import InputError
from commbench.presentation.terminal import one_line, printable
from commbench.run.suites import bundled_suites
from commbench.spec import SweepSpec


# what `run --resume` takes besides the folder: everything else is the run's recorded spec
RESUME_OPTIONS = ("resume", "launcher_args", "quiet", "json_rows", "oversubscribe", "allow_skips")


def _check_resume(given: list[str]) -> None:
    """--resume measures with the run's recorded spec: an option that would set it is refused."""
    if "repeat" in given:
        raise InputError("--resume takes the jobs per point recorded with the run: leave out --repeat")
    ignored = [options.BY_NAME[name] for name in given if name not in RESUME_OPTIONS]
    if ignored:
        o = ignored[0]
        flags = "/".join(o.flags + ((o.off_flag,) if o.off_flag else ()))
        raise InputError(f"--resume measures with the options recorded with the run: {flags} would be ignored; "
                         "leave it out (a new run takes it)")


@app.command()
@with_options()
def run(ctx: typer.Context, **values):
    """Sweep collectives over sizes, dtypes and ops; write results.csv, samples and run.json."""
    from commbench.run.api import resume_sweep, run_sweep
    from commbench.presentation.console import Renderer

    launcher_args = options.launcher_argv(values["launcher_args"])
    chosen = given(ctx)
    resume = values["resume"] is not None
    if resume:
        _check_resume(chosen)
    else:
        options.check_overridden(chosen)
        spec = SweepSpec.from_options(**options.spec_arguments(options.cli_fields(values)))
        check_used(chosen, [spec])
        say_backend_choice([values["backend"]])
    renderer = Renderer(quiet=values["quiet"], json_rows=values["json_rows"], modes=None if resume else spec.all_modes())
    try:
        if resume:  # launcher arguments only as given again (None: not given), never replayed from the folder
            result = resume_sweep(values["resume"], launcher_args=launcher_args if "launcher_args" in chosen else None,
                                  on_event=renderer, argv=sys.argv, oversubscribe=values["oversubscribe"])
        else:
            result = run_sweep(spec, launcher_args=launcher_args, on_event=renderer, argv=sys.argv,
                               repeat=values["repeat"])
    finally:
        renderer.close()
    _summarize(result, values["json_rows"], values["quiet"], values["allow_skips"])


def _summarize(result, json_rows: bool, quiet: bool, allow_skips: bool = False) -> None:
    """The topology comparison of a run over several nodes (unless rows went to stdout as JSON) and the
    OK / FAILED line (allow_skips: an asked-for algorithm that could not run is a note, not a failure)."""
    from commbench.folder.schema import RESULTS_CSV
    from commbench.presentation.console import summary_text

    if not result.reports:
        return
    summary = summary_text(result, quiet)
    if not (result.out_dir / RESULTS_CSV).exists():
        reasons = "; ".join(dict.fromkeys(s["reason"] for s in result.skipped))
        raise InputError(f"nothing measured: all {len(result.skipped)} points were skipped ({reasons})")
    if not json_rows and any(int(r.get("nodes") or 1) > 1 for r in result.rows):  # one node: nothing to compare
        from commbench.cli.reports import print_comparison

        print_comparison([str(result.out_dir)])
    failures = [f"{result.wrong} wrong elements"] if result.wrong else []
    lost = [f"{algorithm} could not run ({reason})" for algorithm, reason in result.failed_skips().items()]
    if allow_skips:
        for line in lost:
            err.print(f"[yellow]not measured (--allow-skips)[/]: {escape(line)}")
    else:
        failures += lost
    if failures:
        err.print(f"[bold red]FAILED[/]: {escape('; '.join(failures))}; {escape(summary)}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {escape(summary)}")


class _SweepCommand(TyperCommand):
    """`sweep --help` lists the bundled suites with what each measures, read only when help is shown."""

    def format_help(self, ctx, formatter):
        from rich.markup import escape as rich_escape

        from commbench.run.suites import bundled_summaries

        if not getattr(self, "_listed", False):
            listed = "\n".join(f"  {name:13} {rich_escape(text)}" for name, text in bundled_summaries().items())
            self.epilog = f"Bundled suites:\n\n{listed}\n\n{self.epilog or ''}"
            self._listed = True
        return super().format_help(ctx, formatter)


_SWEEP_EXTRA = (
    inspect.Parameter("suite", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str], default=typer.Argument(
        None, show_default=False, help="A suite file, or the name of a bundled suite (listed below).")),
    inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str], default=typer.Option(
        None, "--out", help="Sweep folder; each run goes to <out>/<label>/ (default results/<suite>-<UTC time>/).")),
    inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--resume", help="Finish an interrupted sweep in --out: keep completed runs, resume the others.")),
    inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--quiet", help="Print only each run's summary.")),
    extra_option("allow_skips", bool, False, "--allow-skips", help=options.BY_NAME["allow_skips"].help),
    inspect.Parameter("allow_launcher_args", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--allow-launcher-args", help="Run the suite's launcher_args (they reach mpirun/torchrun/srun, which "
                                             "can start any program).")),
    inspect.Parameter("dry_run", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--dry-run", "--list", help="Print the suite's runs and points (every option applied) and run "
                                           "nothing (exit 2 where this machine would refuse a run: it says why); "
                                           "without SUITE, list the bundled suites.")),
)


@app.command(cls=_SweepCommand, help="Run every run of a suite (validated whole before anything starts). Run "
                                     "options given here replace that field in every run (sweep ci -n 4).")
@with_options(options.SWEEP_OPTIONS, _SWEEP_EXTRA)
def sweep(ctx: typer.Context, **values):
    from commbench.run.suites import bundled_summaries, load_suite

    suite, out, resume, quiet = values["suite"], values["out"], values["resume"], values["quiet"]
    if suite is None:
        if not values["dry_run"]:
            raise InputError(f"give a SUITE: a suite file, or one of {', '.join(bundled_suites())} "
                             "(commbench sweep --list says what each measures)")
        for name, text in bundled_summaries().items():
            print(f"{name:13} {text}")
        return
    chosen = given(ctx, options.SWEEP_OPTIONS)
    if resume and chosen:
        flags = "/".join(options.BY_NAME[chosen[0]].flags)
        raise InputError(f"--resume finishes the sweep with the suite's fields: {flags} would be ignored; leave it out")
    options.check_overridden(chosen)
    overrides = options.suite_overrides(values, chosen)
    loaded = load_suite(suite, overrides)
    check_used(chosen, [r.spec for r in loaded.runs])
    if values["dry_run"]:
        from commbench.cli.points import print_suite
        from commbench.run.api import check_suite_starts

        print_suite(loaded)
        check_suite_starts(loaded)  # what the sweep would refuse here before starting: after the listing, exit 2
        return
    say_backend_choice(r.backend for r in loaded.runs)
    given_args = [] if "launcher_args" in overrides else [(r.label, shlex.join(r.launcher_args))
                                                          for r in loaded.runs if r.launcher_args]
    if given_args and not values["allow_launcher_args"]:  # a suite is data: what it would run is shown, then confirmed
        label, args = given_args[0]
        raise InputError(f"{loaded.path}: run {label!r} passes the launcher arguments [{args[:300]}]"
                         f"{f' (and {len(given_args) - 1} more runs)' if len(given_args) > 1 else ''}, which can "
                         "start any program: check them, then add --allow-launcher-args")
    from commbench.folder.place import RESULTS_ROOT, new_run_id
    from commbench.run.api import run_suite
    from commbench.presentation.console import Renderer

    if resume and out is None:
        raise InputError("--resume needs --out, the folder of the sweep to finish")
    folder = out or str(RESULTS_ROOT / f"{loaded.name}-{new_run_id()}")
    from commbench.plan import build_plan

    renderer = Renderer(quiet=quiet, suite_points=sum(len(build_plan(r.spec)) * r.repeat for r in loaded.runs))

    def on_run(label, what):
        renderer.close()
        err.print(f"[bold]== {escape(loaded.name)} / {escape(label)}[/]: {what}")

    try:
        outcomes = run_suite(loaded, folder, resume=resume, on_run=on_run, on_event=renderer)
    finally:
        renderer.close()
    failed = [(label, error) for label, _, error in outcomes if error]
    wrong = sum(r.wrong for _, r, _ in outcomes if r is not None)
    for label, r, error in outcomes:  # a run whose asked-for algorithm could not run has failed (run's rule)
        lost = r.failed_skips() if r is not None and not error else {}
        for a, why in lost.items() if values["allow_skips"] else ():
            err.print(f"[yellow]run {escape(printable(label))}: not measured (--allow-skips)[/]: {escape(f'{a} could not run ({why})')}")
        if lost and not values["allow_skips"]:
            failed.append((label, "; ".join(f"{a} could not run ({why})" for a, why in lost.items())))
    for label, error in failed:
        err.print(f"[bold red]run {escape(printable(label))} failed[/]: {escape(one_line(error))}")
    flagged = sum(r.unreliable for _, r, _ in outcomes if r is not None)
    summary = (f"{len(outcomes)} runs, {len(failed)} failed, {wrong} wrong elements"
               f"{f', {flagged} points unreliable (see the ! lines)' if flagged else ''}; results in {folder}")
    if failed or wrong:
        err.print(f"[bold red]FAILED[/]: {escape(summary)}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {escape(summary)}")


