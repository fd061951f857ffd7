"""`commbench stragglers DIR...`: which rank or host is slow, from the runs' per-rank samples
(commbench.analysis.stragglers); exit 1 when one is flagged."""

from __future__ import annotations

import typer

from commbench.cli.app import app
from commbench.errors import FAILED, InputError


@app.command(help="Which rank or node is slow: each rank's own time per call, its lateness, CV, spread against the "
                  "fastest and spikes (alone or shared), judged against the same run's ranks; per node too. Exit 1 "
                  "when a rank or node is flagged, 0 when none is, 2 on unusable input.")
def stragglers(
    results: list[str] = typer.Argument(..., help="Result folders (runs, sweeps, nccl-tests imports of -I 1 -J "
                                                  "reports)."),
    fmt: str = typer.Option("text", "--format", help="text, markdown or json."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the verdict and what is flagged), as "
                                                        "--format json."),
):
    from commbench.analysis.stragglers import FORMATS, analyze, render

    fmt = "json" if json_out else fmt
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (accepted: {', '.join(FORMATS)})")
    analysis = analyze(results)
    print(render(analysis, fmt))
    if analysis.flagged:
        raise typer.Exit(FAILED)
