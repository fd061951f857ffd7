"""`commbench import nccl-tests|osu`: other benchmarks' output as commbench results."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from commbench.cli.app import app, err
from commbench.errors import InputError
from commbench.collectives import COLLECTIVES, names
from commbench.presentation.terminal import printable

import_app = typer.Typer(help="Turn other benchmarks' output into commbench results (for report and compare).",
                         no_args_is_help=True)
app.add_typer(import_app, name="import")


def _out_folder(out: Optional[str], source: str) -> tuple[str, str]:
    """The run id and the folder to create, checked before the file is read: a place for a run
    folder that readers find (commbench.folder.place.check_place: usable, not inside a run folder,
    not above run folders) holding no results files yet (so the file imported is never one it
    replaces)."""
    from commbench.folder.outputs import READ_FILES
    from commbench.folder import lock as folder_lock
    from commbench.folder.place import RESULTS_ROOT, check_place, new_run_id

    run_id = new_run_id()
    folder = out or str(RESULTS_ROOT / f"{run_id}-{source}")
    if Path(folder).is_dir():  # another writer's folder: refused before the place is probed (written in)
        folder_lock.check_free(folder)
    place = check_place(folder)
    taken = [name for name in READ_FILES if (place / name).exists()]
    if taken:
        raise InputError(f"--out {folder!r} already holds results ({taken[0]}); choose another --out")
    return run_id, folder


def _import(parse, file: str, out: Optional[str], label: str, source: str) -> None:
    from commbench.analysis.importers import read_input, write_import
    from commbench.spec import check_label

    check_label(label)
    if out is not None and not out.strip():
        raise InputError("--out: an empty folder name")
    run_id, folder = _out_folder(out, source)
    imported = parse(read_input(file))
    write_import(imported, folder, file, label or imported.source, run_id)
    err.print(f"imported {len(imported.points)} points ({imported.collective}, {imported.world} ranks) into "
              f"{escape(printable(folder))}")
    if imported.meta.get("skipped_lines"):
        err.print(f"left out {imported.meta['skipped_lines']} result line(s) that did not read (--lenient)")


LENIENT_HELP = ("Leave out result lines that do not read (counted) instead of refusing the file; a second run or "
                "test is refused all the same.")


@import_app.command("nccl-tests")
def import_nccl_tests(
    file: str = typer.Argument(..., help="nccl-tests text output, or its JSON report (-J)."),
    collective: Optional[str] = typer.Option(None, "-c", "--collective", help=f"{names()} (or nccl-tests' and OSU's "
                                             "names: allreduce, all_reduce_perf, ...), if the file does not say."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder to create."),
    label: str = typer.Option("", "--label", help="Label of the imported run (default nccl-tests)."),
    lenient: bool = typer.Option(False, "--lenient", help=LENIENT_HELP),
):
    """Import nccl-tests output (text or JSON)."""
    from commbench.analysis.importers import parse_nccl_tests

    if collective is not None:
        from commbench.spec import collective_aliases, resolve_names

        collective, *more = resolve_names("collective", collective, COLLECTIVES, collective_aliases())
        if more:
            raise InputError(f"-c/--collective: one collective, not {len(more) + 1}")
    _import(lambda text: parse_nccl_tests(text, file, collective, lenient=lenient), file, out, label, "nccl-tests")


@import_app.command("osu")
def import_osu(
    file: str = typer.Argument(..., help=f"OSU {' / '.join(c.osu_name() for c in COLLECTIVES.values() if c.osu_name())} output."),
    nprocs: Optional[int] = typer.Option(None, "-n", "--nprocs", help="Number of ranks of the OSU run (OSU does not print it)."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder to create."),
    label: str = typer.Option("", "--label", help="Label of the imported run (default osu)."),
    lenient: bool = typer.Option(False, "--lenient", help=LENIENT_HELP),
):
    """Import OSU Micro-Benchmarks collective latency output."""
    from commbench.analysis.importers import parse_osu

    _import(lambda text: parse_osu(text, file, nprocs, lenient=lenient), file, out, label, "osu")


