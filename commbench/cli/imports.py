"""`commbench import nccl-tests|osu`: other benchmarks' output as commbench results."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape

from commbench.cli.app import app, err
from commbench.errors import InputError
from commbench.rank.collectives import COLLECTIVES, lookup, names

import_app = typer.Typer(help="Turn other benchmarks' output into commbench results (for report and compare).",
                         no_args_is_help=True)
app.add_typer(import_app, name="import")


def _import(imported, file: str, out: Optional[str], label: str) -> None:
    from commbench.run.api import new_run_id
    from commbench.analysis.importers import write_import

    run_id = new_run_id()
    folder = out or f"results/{run_id}-{imported.source}"
    write_import(imported, folder, file, label or imported.source, run_id)
    err.print(f"imported {len(imported.points)} points ({imported.collective}, {imported.world} ranks) into {escape(folder)}")


def _read(file: str) -> str:
    try:
        with open(file, encoding="utf-8", errors="strict") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file!r}: {exc.__class__.__name__}: {str(exc).splitlines()[0]}") from None


@import_app.command("nccl-tests")
def import_nccl_tests(
    file: str = typer.Argument(..., help="nccl-tests text output, or its JSON report (-J)."),
    collective: Optional[str] = typer.Option(None, "--collective", help=f"{names()}, if the file does not say."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder to create."),
    label: str = typer.Option("", "--label", help="Label of the imported run (default nccl-tests)."),
):
    """Import nccl-tests output (text or JSON)."""
    from commbench.analysis.importers import parse_nccl_tests

    if collective is not None:
        lookup(collective)
    _import(parse_nccl_tests(_read(file), file, collective), file, out, label)


@import_app.command("osu")
def import_osu(
    file: str = typer.Argument(..., help=f"OSU {' / '.join('osu_' + c.osu_title.lower() for c in COLLECTIVES.values() if c.osu_title)} output."),
    nprocs: Optional[int] = typer.Option(None, "-n", "--nprocs", help="Number of ranks of the OSU run (OSU does not print it)."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder to create."),
    label: str = typer.Option("", "--label", help="Label of the imported run (default osu)."),
):
    """Import OSU Micro-Benchmarks collective latency output."""
    from commbench.analysis.importers import parse_osu

    _import(parse_osu(_read(file), file, nprocs), file, out, label)


