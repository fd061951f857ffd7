"""Commands that read result folders: `report`, `topo-compare` and `compare`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from commbench.presentation.terminal import Console
from rich.markup import escape

from commbench import options
from commbench.cli.app import app, err, old_spelling, pick
from commbench.errors import InputError
from commbench.folder.outputs import csv_text, output_file, write_text
from commbench.presentation.terminal import printable


# an --output file's format from its name (compare, ab); any other name: --format's
SUFFIX_FORMATS = {".md": "markdown", ".markdown": "markdown", ".xml": "junit", ".json": "json"}
HTML_SUFFIXES = (".html", ".htm")  # compare: the HTML page


def output_format(path: str, default: str) -> str:
    """The format an --output file's name asks for: its suffix's, else `default` (--format's)."""
    return SUFFIX_FORMATS.get(Path(path).suffix.lower(), default)


def print_comparison(results: list[str], csv: Optional[str] = None) -> bool:
    """Print the topology comparison of these result folders, if they hold one."""
    from commbench.presentation.console import comparison_table
    from commbench.folder.load import load_runs
    from commbench.analysis.topology_comparison import group_tables, topology_comparison

    rows, _ = load_runs(results)
    comparison = topology_comparison(rows)
    if comparison.empty:
        return False
    out = err if err.is_terminal else Console(stderr=True, width=250)  # a file or pipe gets whole lines
    out.print(comparison_table(group_tables(comparison)))
    if csv:
        write_text(csv, csv_text(comparison), "--output")
    return True


def threshold_fraction(text: str) -> float:
    text = text.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InputError(f"invalid threshold {text!r} (give a percentage such as 5% or a fraction such as 0.05)") from None
    return value


@app.command()
def report(
    results: list[str] = typer.Argument(..., help="Result folders (runs, or sweeps holding runs)."),
    output: str = typer.Option("report.html", "--output", help="The HTML file to write."),
    title: str = typer.Option("commbench report", "--title", help="Page title."),
    old_output: Optional[str] = old_spelling("-o"),
):
    """Write one self-contained HTML report (works offline) for one or more result folders."""
    from commbench.analysis.report import build_report

    output, flag = pick(output, old_output, "--output", "-o", "report.html"), "-o" if old_output else "--output"
    output_file(output, flag, inputs=results)  # the flag typed named in a refusal
    path = build_report(results, output, title)
    err.print(f"report written to {escape(printable(path))}")


@app.command("topo-compare")
def topo_compare(
    results: list[str] = typer.Argument(..., help="Result folders (runs, or sweeps holding runs)."),
    output: Optional[str] = typer.Option(None, "--output", help="Also write the comparison as CSV to this file."),
    old_csv: Optional[str] = old_spelling("--csv"),
):
    """Per size: native vs flat ring (rank order) vs ring (topology order) vs hierarchical (and
    hierarchical_kernel: the ring kernel inside nodes), with speedups over the flat ring and
    inter-node bytes (measured and expected)."""
    from commbench.analysis.topology_comparison import VARIANTS

    csv, flag = pick(output, old_csv, "--output", "--csv"), "--csv" if old_csv else "--output"
    if csv:
        output_file(csv, flag, inputs=results)
        if Path(csv).suffix.lower() in (*HTML_SUFFIXES, *SUFFIX_FORMATS):
            raise InputError(f"{flag} {csv!r}: topo-compare writes CSV only (name the file .csv; `commbench report` "
                             "shows the comparison in HTML)")
    if not print_comparison(results, csv):
        raise InputError(f"no multi-node points of two or more of {', '.join(VARIANTS)} in these results")


@app.command(help=f"Regression verdicts, job by job (run both sides with --repeat {options.MIN_JOBS} or more): exit 1 "
                  "on any regression or point the candidate lacks (--strict: or inconclusive point; --allow-missing: "
                  "not on missing points), 0 otherwise, 2 on unusable input.")
def compare(
    baseline: str = typer.Argument(..., help="Baseline result folder (a run, or a sweep)."),
    candidates: list[str] = typer.Argument(..., help="Candidate result folder(s); several in time order (nightly "
                                                     "runs) give each point's history, the verdicts are the last's."),
    threshold: str = typer.Option("5%", "--threshold", help="Smallest slowdown that counts as a regression (5% or 0.05)."),
    fmt: str = typer.Option("text", "--format", help=f"{', '.join(options.COMPARE_FORMATS)}."),
    output: list[str] = typer.Option([], "--output", help="Write the verdicts to this file too, in the format its "
                                     "name says (.md markdown, .xml junit, .json json, .html the page with each "
                                     "point's history; else --format's); repeatable."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on inconclusive points too (too few jobs, or an "
                                                        "interval straddling the threshold)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Points of the baseline the candidate lacks "
                                                                      "do not fail the comparison (else they do)."),
    old_output: Optional[str] = old_spelling("-o"),  # --format's text, whatever the name
    old_html: Optional[str] = old_spelling("--html"),
):
    from commbench.analysis.compare import compare as run_compare
    from commbench.analysis.compare_formats import FORMATS

    if fmt not in options.COMPARE_FORMATS:
        raise InputError(f"unknown format {fmt!r} (accepted: {', '.join(options.COMPARE_FORMATS)})")
    fraction, inputs = threshold_fraction(threshold), [baseline, *candidates]
    outputs = [(path, "html" if path.lower().endswith(HTML_SUFFIXES) else output_format(path, fmt), "--output")
               for path in output]
    outputs += [(path, kind, flag) for path, kind, flag in ((old_output, fmt, "-o"), (old_html, "html", "--html"))
                if path]
    seen = {}  # real path -> the flag that named it
    for path, _, flag in outputs:
        output_file(path, flag, inputs=inputs)
        other = seen.get(os.path.realpath(path))
        if other:
            raise InputError(f"{other} and {flag} name the same file {path!r}" if other != flag
                             else f"{flag} names the same file {path!r} twice")
        seen[os.path.realpath(path)] = flag
    result = run_compare(baseline, candidates, fraction, strict=strict, allow_missing=allow_missing)
    text = FORMATS[fmt](result)
    for path, kind, flag in outputs:
        if kind == "html":
            from commbench.analysis.report.trend import build_trend

            err.print(f"comparison page written to {escape(printable(build_trend(result, path)))}")
        else:
            write_text(path, (text if kind == fmt else FORMATS[kind](result)) + "\n", flag)
    print(text)
    for line in result.no_verdict_advice():  # exit 2: its one line on stderr, where a gate's log shows it
        err.print(escape(line))
    raise typer.Exit(result.exit_code)
