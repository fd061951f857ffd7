"""`commbench ab`: the regression gate for two builds, libraries or settings measured side by side
(commbench.run.ab): run's options for both sides, what differs per side, and compare's verdicts."""

from __future__ import annotations

import inspect
import re
import shlex
import sys
from typing import Optional

import typer
from rich.markup import escape

from commbench import options
from commbench.cli.app import app, err
from commbench.cli.reports import output_format, threshold_fraction
from commbench.cli.common import check_used, given, say_backend_choice, with_options
from commbench.errors import InputError
from commbench.folder.outputs import output_file, write_text
from commbench.spec import CLUSTER, SweepSpec
from commbench.presentation.terminal import printable

# run's options that ab decides itself or cannot take (ab: rounds of paired turns, one folder, no resume)
NOT_AB = ("resume", "repeat", "json_rows", "allow_skips", "iters", "min_time", "max_iters", "power", "nccl_tuning",
          "split")
AB_TABLE = tuple(o for o in options.CLI_OPTIONS if o.name not in NOT_AB)
# a side's --args-x may set any of these (the rest are the comparison's: --out, --quiet, --launcher-args, the cluster)
SIDE_TABLE = tuple(o for o in AB_TABLE if (o.spec is not None or o.sets_mode) and o.name not in ("out", *CLUSTER))
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$", re.IGNORECASE)


def _duration(text: str) -> float:
    m = _DURATION.match(text)
    if not m:
        raise InputError(f"invalid --budget {text!r} (give seconds, or a number with s, m or h: 90, 10m, 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[(m.group(2) or "s").lower()]


def _env(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise InputError(f"{flag} {item[:80]!r}: give KEY=VALUE, KEY a variable name")
        out[name] = value
    return out


def _side_values(common: dict, text: str, flag: str) -> tuple[dict, list[str]]:
    """The common values with what `text` (run's options, as typed) sets for one side (a side's -b/-e/-f
    replace a common --sizes); and the names of the options it gives."""
    from typer.main import get_command

    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise InputError(f"{flag} {text!r}: {exc}") from None
    if {"--help", "-h"} & set(argv):
        raise InputError(f"{flag} takes run's options for one side (commbench run --help lists them)")
    command = get_command(app).commands["run"]
    try:
        ctx = command.make_context("run", list(argv))
    except Exception as exc:  # noqa: BLE001 - click's usage errors (typer's own copy of click: known by their method)
        if not hasattr(exc, "format_message"):
            raise  # not a usage error: commbench's bug, exit 3 with its traceback
        raise InputError(f"{flag} {text!r}: {exc.format_message()}") from None
    chosen = given(ctx)
    refused = [options.BY_NAME[n] for n in chosen if n in NOT_AB]
    if refused:
        raise InputError(f"{flag}: commbench ab takes no {refused[0].long_flag}, for a side or both (it times the "
                         "sides itself, in paired rounds: commbench ab --help lists what it takes)")
    try:
        options.check_overridden(chosen)
    except InputError as exc:
        raise InputError(f"{flag}: {exc}") from None
    outside = [options.BY_NAME[n] for n in chosen if options.BY_NAME[n] not in SIDE_TABLE]
    if outside:
        raise InputError(f"{flag}: {outside[0].long_flag} cannot differ between the sides (give it once, for both)")
    values = dict(common)
    if any(options.BY_NAME[n].sets_mode for n in chosen):  # the side's buffer mode replaces the common one
        values.update({o.name: False for o in options.MODE_SWITCHES})
    values.update({n: ctx.params[n] for n in chosen} | options.dropped(chosen))
    return values, chosen


def _spec(values: dict) -> SweepSpec:
    fields = options.cli_fields({k: v for k, v in values.items() if k in options.BY_NAME})
    return SweepSpec.from_options(**options.spec_arguments({k: v for k, v in fields.items() if k not in NOT_AB}))


_EXTRA = (
    inspect.Parameter("args_a", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
        "", "--args-a", help="run options of side A (the baseline) only, as typed, e.g. '-a native'.")),
    inspect.Parameter("args_b", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
        "", "--args-b", help="run options of side B (the candidate) only, e.g. '-a ring_kernel'.")),
    inspect.Parameter("env_a", inspect.Parameter.KEYWORD_ONLY, annotation=list[str], default=typer.Option(
        [], "--env-a", help="KEY=VALUE for every rank of side A (repeatable): NCCL_ALGO, LD_PRELOAD, OMPI_MCA_*, ...")),
    inspect.Parameter("env_b", inspect.Parameter.KEYWORD_ONLY, annotation=list[str], default=typer.Option(
        [], "--env-b", help="KEY=VALUE for every rank of side B (repeatable).")),
    inspect.Parameter("python_a", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str], default=typer.Option(
        None, "--python-a", help="The Python side A's ranks run (another venv: commbench, torch, NCCL, MPI).")),
    inspect.Parameter("python_b", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str], default=typer.Option(
        None, "--python-b", help="The Python side B's ranks run.")),
    inspect.Parameter("threshold", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
        "5%", "--threshold", help="Smallest slowdown that counts as a regression (5% or 0.05).")),
    inspect.Parameter("budget", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
        "10m", "--budget", help="Time for the measurement: rounds stop when another would not fit (90, 10m, 1h).")),
    inspect.Parameter("rounds", inspect.Parameter.KEYWORD_ONLY, annotation=int, default=typer.Option(
        32, "--rounds", help="The most rounds (verdicts are taken after rounds 1, 2, 4, ... and this one).")),
    inspect.Parameter("min_rounds", inspect.Parameter.KEYWORD_ONLY, annotation=int, default=typer.Option(
        1, "--min-rounds", help="Measure every point this many rounds before any verdict (a more precise estimate, "
                                "and a fixed cost: --min-rounds N --rounds N).")),
    inspect.Parameter("grain", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
        "auto", "--grain", help="How A and B interleave: auto (the finest the sides allow), in-process, token or "
                                "launch.")),
    inspect.Parameter("fmt", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
        "text", "--format", help=f"{', '.join(options.COMPARE_FORMATS)}.")),
    inspect.Parameter("output", inspect.Parameter.KEYWORD_ONLY, annotation=list[str], default=typer.Option(
        [], "--output", help="Write the verdicts to this file too, in the format its name says (.md markdown, .xml "
                             "junit, .json json, else --format's); repeatable: a CI job's summary and its test "
                             "report.")),
    inspect.Parameter("strict", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--strict", help="Exit 1 on inconclusive points too.")),
    inspect.Parameter("allow_missing", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--allow-missing", help="Points only one side can run do not fail the comparison (else they do).")),
)


@app.command(help="Measure side A (baseline) and side B (candidate) interleaved and paired, then judge B against A "
                  "point by point: exit 1 on any regression (--strict: or inconclusive point), 0 otherwise, 2 on "
                  "unusable input. Both sides take run's options; --args-a/--args-b, --env-a/--env-b and "
                  "--python-a/--python-b say what differs.")
@with_options(AB_TABLE, _EXTRA)
def ab(ctx: typer.Context, **values):
    from commbench.analysis.compare_formats import FORMATS
    from commbench.run.ab import AbSide, run_ab
    from commbench.presentation.console import AbRenderer

    if values["fmt"] not in options.COMPARE_FORMATS:
        raise InputError(f"unknown format {values['fmt']!r} (accepted: {', '.join(options.COMPARE_FORMATS)})")
    fraction, budget = threshold_fraction(values["threshold"]), _duration(values["budget"])
    outputs = {path: output_format(path, values["fmt"]) for path in values["output"]}
    for path in outputs:
        output_file(path, "--output")
    chosen = set(given(ctx, AB_TABLE))
    options.check_overridden(chosen)
    common = {o.name: values[o.name] for o in AB_TABLE}
    sides = []
    for name in ("a", "b"):
        side_values, side_chosen = _side_values(common, values[f"args_{name}"], f"--args-{name}")
        chosen |= set(side_chosen)
        python = values[f"python_{name}"]
        sides.append(AbSide(name.upper(), _spec(side_values), _env(values[f"env_{name}"], f"--env-{name}"),
                            **({"python": python} if python else {}), options=values[f"args_{name}"].strip()))
    check_used(chosen, [side.spec for side in sides])
    say_backend_choice([common["backend"]])
    renderer = AbRenderer(quiet=values["quiet"])
    result = run_ab(*sides, threshold=fraction, budget_s=budget, max_rounds=values["rounds"],
                    min_rounds=values["min_rounds"], grain=values["grain"],
                    launcher_args=options.launcher_argv(values["launcher_args"]), out_dir=values["out"],
                    strict=values["strict"], allow_missing=values["allow_missing"], on_event=renderer, argv=sys.argv)
    for path, fmt in outputs.items():
        write_text(path, FORMATS[fmt](result.comparison) + "\n", "--output")
    print(FORMATS[values["fmt"]](result.comparison))
    summary = f"{result.comparison.summary()}; results in {result.out_dir}"
    if result.wrong:
        err.print(f"[bold red]FAILED[/]: {result.wrong} wrong elements; {escape(printable(summary))}")
        raise typer.Exit(1)
    for line in result.comparison.no_verdict_advice():  # exit 2: its one line on stderr
        err.print(escape(line))
    raise typer.Exit(result.comparison.exit_code)
