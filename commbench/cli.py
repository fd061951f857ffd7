"""The `commbench` command: a thin typer layer that parses, validates and calls commbench.api."""

from __future__ import annotations

import importlib.util
import shlex
import signal
import sys
from typing import Optional

import typer
from typer._click.exceptions import NoArgsIsHelpError
from typer.exceptions import Abort, Exit, TyperException
from rich.console import Console
from rich.markup import escape

import commbench
from commbench.errors import InputError, JobError
from commbench.spec import SweepSpec

app = typer.Typer(help="Benchmark collective communication: all-reduce, all-gather, reduce-scatter.",
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


def default_backend() -> str:
    """mpi when mpi4py and mpirun are installed, else gloo."""
    from commbench.launch import find_binary

    if importlib.util.find_spec("mpi4py") is not None and find_binary("mpirun"):
        return "mpi"
    return "gloo"


@app.command()
def run(
    collective: str = typer.Option("all_reduce,all_gather,reduce_scatter", "-c", "--collective",
                                   help="Comma list: all_reduce, all_gather, reduce_scatter."),
    backend: str = typer.Option("auto", "--backend", help="Comma list: mpi, gloo, nccl (auto: mpi if installed, else gloo)."),
    min_bytes: str = typer.Option("8", "-b", "--min-bytes", help="Smallest size (K/M/G binary suffixes)."),
    max_bytes: str = typer.Option("16M", "-e", "--max-bytes", help="Largest size."),
    step_factor: float = typer.Option(2.0, "-f", "--step-factor", help="Multiply the size by this each step (> 1)."),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="Explicit comma list of sizes, e.g. 8,1K,4M (overrides -b/-e/-f)."),
    algorithm: str = typer.Option("native", "-a", "--algorithm", help="Comma list: native (the library's call), ring, tree, dbtree, rhd, hierarchical."),
    ring_order: str = typer.Option("rank", "--ring-order", help="Ring order for ring: rank, or topology (each node's ranks adjacent)."),
    segment_bytes: str = typer.Option("1M", "--segment-bytes", help="Pipelining unit of the own algorithms (messages are at most this long)."),
    dtype: str = typer.Option("float32", "-d", "--dtype", help="Comma list: float32, float64, float16, bfloat16, int32, int64, int8, uint8."),
    op: str = typer.Option("sum", "-o", "--op", help="Comma list: sum, prod, min, max, avg (all-gather ignores it)."),
    in_place: bool = typer.Option(False, "--in-place", help="Only in-place buffers."),
    out_of_place: bool = typer.Option(False, "--out-of-place", help="Only out-of-place buffers."),
    both: bool = typer.Option(False, "--both", help="In-place and out-of-place (the default)."),
    nprocs: int = typer.Option(4, "-n", "--nprocs", help="Number of ranks to launch."),
    launcher: str = typer.Option("auto", "--launcher", help="auto, local, mpirun, torchrun, srun, or none (ranks already started)."),
    launcher_args: str = typer.Option("", "--launcher-args", help="Extra arguments for the launcher, e.g. '--hostfile hosts'."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    warmup: int = typer.Option(5, "-w", "--warmup", help="Warm-up iterations per point (not timed)."),
    iters: Optional[int] = typer.Option(None, "--iters", help="Timed iterations per point (default: adapt to --min-time)."),
    min_time: float = typer.Option(0.1, "--min-time", help="Seconds of timed iterations per point when --iters is not given."),
    max_iters: int = typer.Option(1000, "--max-iters", help="Upper bound on adaptive iterations."),
    batch: Optional[int] = typer.Option(None, "--batch", help="Calls per timing sample (default: automatic, so a sample lasts >= 100 us; 1 = every call)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a point may take before the job is killed (default 120 + 1 s per 10 MB)."),
    ranks_per_node: Optional[int] = typer.Option(None, "--ranks-per-node", help="Override the node layout: consecutive blocks of G ranks."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder (default results/<UTC time>-<id>/)."),
    label: str = typer.Option("", "--label", help="Free text stored with every row."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only the summary."),
    json_rows: bool = typer.Option(False, "--json", help="Print each row as one JSON object on stdout."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Finish an interrupted or failed run in this folder: measure only its missing points, with its recorded options."),
):
    """Sweep collectives over sizes, dtypes and ops; write results.csv, samples and run.json."""
    from commbench.api import resume_sweep, run_sweep
    from commbench.console import Renderer

    if sum((in_place, out_of_place, both)) > 1:
        raise InputError("choose one of --in-place, --out-of-place and --both")
    spec = SweepSpec.from_options(
        collective=collective, backend=default_backend() if backend == "auto" else backend, algorithm=algorithm,
        ring_order=ring_order, segment_bytes=segment_bytes, min_bytes=min_bytes, max_bytes=max_bytes,
        step_factor=step_factor, sizes=sizes, dtype=dtype, op=op,
        mode="in-place" if in_place else "out-of-place" if out_of_place else "both",
        nprocs=nprocs, launcher=launcher, device=device, warmup=warmup, iters=iters, min_time=min_time,
        max_iters=max_iters, batch=batch, timeout=timeout, label=label, out_dir=out or "",
        ranks_per_node=ranks_per_node,
    )
    renderer = Renderer(quiet=quiet, json_rows=json_rows)
    try:
        if resume is not None:
            result = resume_sweep(resume, launcher_args=shlex.split(launcher_args) if launcher_args else None,
                                  on_event=renderer, argv=sys.argv)
        else:
            result = run_sweep(spec, launcher_args=shlex.split(launcher_args), on_event=renderer, argv=sys.argv)
    finally:
        renderer.close()
    summary = f"{len(result.rows)} points measured, {len(result.skipped)} skipped; results in {result.out_dir}"
    if result.wrong:
        err.print(f"[bold red]FAILED[/]: {result.wrong} wrong elements; {escape(summary)}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {escape(summary)}")


def _threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise InputError(f"invalid threshold {text!r} (give a percentage such as 5% or a fraction such as 0.05)") from None
    return value


@app.command()
def sweep(
    suite: str = typer.Argument(..., help="A suite file, or the name of a bundled suite (quick, ci, algorithms, hierarchical, cluster)."),
    out: Optional[str] = typer.Option(None, "--out", help="Sweep folder; each run goes to <out>/<label>/ (default results/<suite>-<UTC time>/)."),
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted sweep in --out: keep completed runs, resume the others."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only each run's summary."),
):
    """Run every run of a suite (validated whole before anything starts)."""
    from commbench.api import new_run_id, run_suite
    from commbench.console import Renderer
    from commbench.suites import load_suite

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


@app.command()
def report(
    results: list[str] = typer.Argument(..., help="Result folders (runs, or sweeps holding runs)."),
    output: str = typer.Option("report.html", "-o", "--output", help="The HTML file to write."),
    title: str = typer.Option("commbench report", "--title", help="Page title."),
):
    """Write one self-contained HTML report (works offline) for one or more result folders."""
    from commbench.report import build_report

    path = build_report(results, output, title)
    err.print(f"report written to {escape(str(path))}")


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="Baseline result folder (a run, or a sweep)."),
    candidate: str = typer.Argument(..., help="Candidate result folder."),
    threshold: str = typer.Option("5%", "--threshold", help="Smallest slowdown that counts as a regression (5% or 0.05)."),
    fmt: str = typer.Option("text", "--format", help="text, markdown, json or junit."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Write the verdict to this file too."),
):
    """Regression verdict between two result sets: exit 1 on any regression, 0 otherwise, 2 on unusable input."""
    from commbench.compare import FORMATS
    from commbench.compare import compare as run_compare

    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (accepted: {', '.join(FORMATS)})")
    result = run_compare(baseline, candidate, _threshold(threshold))
    text = FORMATS[fmt](result)
    print(text)
    if output:
        from pathlib import Path

        Path(output).write_text(text + "\n", encoding="utf-8")
    if result.regressed:
        raise typer.Exit(1)


import_app = typer.Typer(help="Turn other benchmarks' output into commbench results (for report and compare).",
                         no_args_is_help=True)
app.add_typer(import_app, name="import")


def _import(imported, file: str, out: Optional[str], label: str) -> None:
    from commbench.api import new_run_id
    from commbench.importers import write_import

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
    collective: Optional[str] = typer.Option(None, "--collective", help="all_reduce, all_gather or reduce_scatter, if the file does not say."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder to create."),
    label: str = typer.Option("", "--label", help="Label of the imported run (default nccl-tests)."),
):
    """Import nccl-tests output (text or JSON)."""
    from commbench.importers import parse_nccl_tests

    if collective is not None and collective not in ("all_reduce", "all_gather", "reduce_scatter"):
        raise InputError(f"unknown collective {collective!r} (accepted: all_reduce, all_gather, reduce_scatter)")
    _import(parse_nccl_tests(_read(file), file, collective), file, out, label)


@import_app.command("osu")
def import_osu(
    file: str = typer.Argument(..., help="OSU osu_allreduce / osu_allgather / osu_reduce_scatter output."),
    nprocs: Optional[int] = typer.Option(None, "-n", "--nprocs", help="Number of ranks of the OSU run (OSU does not print it)."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder to create."),
    label: str = typer.Option("", "--label", help="Label of the imported run (default osu)."),
):
    """Import OSU Micro-Benchmarks collective latency output."""
    from commbench.importers import parse_osu

    _import(parse_osu(_read(file), file, nprocs), file, out, label)


def main() -> None:
    """Entry point: errors become one line (exit 2 for bad input, 1 for failed jobs)."""
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
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
