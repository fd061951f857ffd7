"""`commbench run` and `commbench sweep`: measure, into result folders."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from typing import Optional

import typer
from rich.markup import escape

from commbench.cli.app import app, err
from commbench.errors import InputError
from commbench.spec import SweepSpec


def default_backend() -> str:
    """mpi when mpi4py and mpirun are installed, else gloo."""
    from commbench.run.launch import find_binary

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
    algorithm: str = typer.Option("native", "-a", "--algorithm", help="Comma list: native (the library's call), ring, ring_topology, tree, dbtree, rhd, hierarchical, "
                                   "peer_oneshot, peer_twoshot, peer_oneshot_gpuflags, peer_twoshot_gpuflags."),
    ring_order: str = typer.Option("rank", "--ring-order", help="topology: run ring as ring_topology (each node's ranks adjacent)."),
    segment_bytes: str = typer.Option("1M", "--segment-bytes", help="Pipelining unit of the own algorithms (messages are at most this long)."),
    dtype: str = typer.Option("float32", "-d", "--dtype", help="Comma list: float32, float64, float16, bfloat16, int32, int64, int8, uint8."),
    op: str = typer.Option("sum", "-o", "--op", help="Comma list: sum, prod, min, max, avg (all-gather ignores it)."),
    in_place: bool = typer.Option(False, "--in-place", help="Only in-place buffers."),
    out_of_place: bool = typer.Option(False, "--out-of-place", help="Only out-of-place buffers."),
    both: bool = typer.Option(False, "--both", help="In-place and out-of-place (the default)."),
    nprocs: Optional[int] = typer.Option(None, "-n", "--nprocs", help="Number of ranks to launch (default 4, or NODES x RANKS of --emulate)."),
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
    emulate: Optional[str] = typer.Option(None, "--emulate", help="Emulate NODESxRANKS nodes on this machine (network namespaces; root; gloo)."),
    link_rate: str = typer.Option("1gbit", "--link-rate", help="Each emulated node's link rate (tc units: 1gbit, 800mbit, ...)."),
    placement: str = typer.Option("block", "--placement", help="Emulated ranks: block (node by node) or round-robin over the nodes."),
    power: bool = typer.Option(False, "--power", help="GPU power and energy per point (NVML; windows of >= 1 s)."),
    nccl_tuning: bool = typer.Option(False, "--nccl-tuning", help="Record NCCL's algorithm/protocol per point from its TUNING log (rank 0 logs every call, which its timings include)."),
    out: Optional[str] = typer.Option(None, "--out", help="Results folder (default results/<UTC time>-<id>/)."),
    label: str = typer.Option("", "--label", help="Free text stored with every row."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only the summary."),
    json_rows: bool = typer.Option(False, "--json", help="Print each row as one JSON object on stdout."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Finish an interrupted or failed run in this folder: measure only its missing points, with its recorded options."),
):
    """Sweep collectives over sizes, dtypes and ops; write results.csv, samples and run.json."""
    from commbench.run.api import resume_sweep, run_sweep
    from commbench.run.console import Renderer
    from commbench.results import RESULTS_CSV

    if sum((in_place, out_of_place, both)) > 1:
        raise InputError("choose one of --in-place, --out-of-place and --both")
    spec = SweepSpec.from_options(
        collective=collective, backend=default_backend() if backend == "auto" else backend, algorithm=algorithm,
        ring_order=ring_order, segment_bytes=segment_bytes, min_bytes=min_bytes, max_bytes=max_bytes,
        step_factor=step_factor, sizes=sizes, dtype=dtype, op=op,
        mode="in-place" if in_place else "out-of-place" if out_of_place else "both",
        nprocs=nprocs, launcher=launcher, device=device, warmup=warmup, iters=iters, min_time=min_time,
        max_iters=max_iters, batch=batch, timeout=timeout, label=label, out_dir=out or "",
        ranks_per_node=ranks_per_node, emulate=emulate, link_rate=link_rate, placement=placement, power=power,
        nccl_tuning=nccl_tuning,
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
    suite: str = typer.Argument(..., help="A suite file, or the name of a bundled suite (quick, ci, algorithms, hierarchical, emulated, power, cluster)."),
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


