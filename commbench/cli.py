"""The `commbench` command: a thin typer layer that parses, validates and calls commbench.api."""

from __future__ import annotations

import importlib.util
import shlex
import signal
import sys
from typing import Optional

import typer
from typer._click.exceptions import NoArgsIsHelpError  # typer >= 0.27.2 (pyproject): its vendored click
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
    from commbench.api import resume_sweep, run_sweep
    from commbench.console import Renderer
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
        _print_comparison([str(result.out_dir)])
    if result.wrong:
        err.print(f"[bold red]FAILED[/]: {result.wrong} wrong elements; {escape(summary)}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {escape(summary)}")


def _print_comparison(results: list[str], csv: Optional[str] = None) -> bool:
    """Print the topology comparison of these result folders, if they hold one."""
    from commbench.console import comparison_table
    from commbench.report import load_runs
    from commbench.variants import topology_comparison

    rows, _ = load_runs(results)
    comparison = topology_comparison(rows)
    if comparison.empty:
        return False
    out = err if err.is_terminal else Console(stderr=True, width=250)  # a file or pipe gets whole lines
    out.print(comparison_table(comparison))
    if csv:
        comparison.to_csv(csv, index=False)
    return True


def _threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise InputError(f"invalid threshold {text!r} (give a percentage such as 5% or a fraction such as 0.05)") from None
    return value


@app.command()
def sweep(
    suite: str = typer.Argument(..., help="A suite file, or the name of a bundled suite (quick, ci, algorithms, hierarchical, emulated, power, cluster)."),
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
def topo(json_out: bool = typer.Option(False, "--json", help="Print the description as JSON.")):
    """This machine as collectives see it: cores, NUMA nodes, NICs, GPUs, NVLink and P2P between GPUs."""
    import json

    from commbench.machine import describe

    info = describe()
    if json_out:
        print(json.dumps(info, indent=2))
        return
    cpu = info["cpu"]
    print(f"{info['hostname']}: {cpu['cores']} cores, {cpu['numa_nodes']} NUMA node(s), {cpu['machine']}")
    for nic in info["nics"]:
        speed = f"{nic['speed_mbps'] / 1000:g} Gbit/s" if nic["speed_mbps"] else "speed not reported"
        print(f"  nic {nic['name']}: {speed}, MTU {nic['mtu']}, NUMA node {nic['numa_node']}")
    if info["gpus_unavailable"]:
        print(f"  GPUs: none ({info['gpus_unavailable']})")
    for g in info["gpus"]:
        print(f"  gpu {g['index']}: {g['name']}, {g['memory_gib']} GiB, {g['nvlinks_up']} NVLink links up, "
              f"PCI {g['pci_bus_id']}, NUMA node {g['numa_node']}")
    for pair in info["gpu_pairs"]:
        i, j = pair["gpus"]
        print(f"  gpu {i} <-> gpu {j}: {pair['path']}, P2P read {pair['p2p_read']}, over NVLink {pair['p2p_nvlink']}")


@app.command("topo-compare")
def topo_compare(
    results: list[str] = typer.Argument(..., help="Result folders (runs, or sweeps holding runs)."),
    csv: Optional[str] = typer.Option(None, "--csv", help="Also write the comparison as CSV to this file."),
):
    """Per size: native vs flat ring (rank order) vs ring (topology order) vs hierarchical, with
    speedups over the flat ring and inter-node bytes (measured and expected)."""
    if not _print_comparison(results, csv):
        raise InputError("no multi-node points of two or more of native, ring, ring_topology, hierarchical "
                         "in these results")


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


model_app = typer.Typer(help="The α-β-γ cost model: fit it to sweeps, check it, predict cluster scale.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


def _fmt_param(name: str, value, rel) -> str:
    if value is None:
        return f"{name:12} not informed by these points"
    if name.startswith("alpha"):
        shown = f"{value * 1e6:.3f} µs"
    elif name == "mem_factor":
        shown = f"+{100 * value:.0f} % on β_intra and γ for bytes beyond the cache"
    elif name == "cache_bytes":
        shown = f"{value / 1e6:.1f} MB per node"
    else:
        shown = f"{1 / value / 1e9:.4g} GB/s ({value:.3e} s/B)"
    return f"{name:12} {shown}" + (f"  ± {100 * rel:.0f} %" if rel is not None else "")


@model_app.command("fit")
def model_fit(
    results: list[str] = typer.Argument(..., help="Result folders (runs, or sweeps holding runs)."),
    output: str = typer.Option("model.json", "-o", "--output", help="Where to write the fitted model."),
    links_per_node: int = typer.Option(1, "--links-per-node", help="Links each node has to the others (1 on the emulated cluster)."),
):
    """Fit α, β per link class (intra-, inter-node) and γ per backend from measured sweeps."""
    import json

    from commbench.model import load_rows
    from commbench.model.fit import fit, to_json

    if links_per_node < 1:
        raise InputError(f"invalid --links-per-node {links_per_node}: it must be at least 1")
    fits = fit(load_rows(results), links_per_node)
    for f in fits:
        print(f"{f.backend}: {f.points} points ({', '.join(f.algorithms)}); fit error median "
              f"{100 * f.median_error:.1f} %, p90 {100 * f.p90_error:.1f} %")
        for name, value in f.params.items():
            print("  " + _fmt_param(name, value, f.rel_std.get(name)))
    with open(output, "w", encoding="utf-8") as fh:
        json.dump(to_json(fits, results), fh, indent=2)
    err.print(f"model written to {escape(output)}")


@model_app.command("validate")
def model_validate(
    results: list[str] = typer.Argument(..., help="Result folders."),
    links_per_node: int = typer.Option(1, "--links-per-node", help="As for fit."),
    csv: Optional[str] = typer.Option(None, "--csv", help="Write every held-out prediction to this CSV."),
):
    """Held-out error: refit without one size, then without one algorithm, and predict it."""
    import pandas as pd

    from commbench.model import load_rows
    from commbench.model.fit import held_out, summary

    rows = load_rows(results)
    frames = []
    for by, what in (("size_bytes", "leave one size out"), ("algorithm", "leave one algorithm out")):
        errors = held_out(rows, by, links_per_node)
        s = summary(errors)
        if not s:
            print(f"{what}: not enough points")
            continue
        big = s["median_abs_error_64k_up"]
        print(f"{what}: {s['points']} held-out points, median |error| {100 * s['median_abs_error']:.1f} %, "
              f"p90 {100 * s['p90_abs_error']:.1f} %; >= 64 KB: {s['points_64k_up']} points, median "
              + (f"{100 * big:.1f} %" if big is not None else "-"))
        for algo, g in errors.groupby("algorithm"):
            print(f"  {algo:14} median |error| {100 * g.error.abs().median():.1f} % over {len(g)} points")
        frames.append(errors.assign(method=by))
    if csv and frames:
        pd.concat(frames).to_csv(csv, index=False)


@model_app.command("predict")
def model_predict(
    nodes: int = typer.Option(..., "--nodes", help="Nodes."),
    ranks_per_node: int = typer.Option(..., "--ranks-per-node", help="Ranks (GPUs) per node."),
    model: Optional[str] = typer.Option(None, "--model", help="A model.json from `model fit`."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Which backend of the model file."),
    intra: Optional[str] = typer.Option(None, "--intra", help="Inside a node: BANDWIDTH_GBPS,LATENCY_US (e.g. 450,2)."),
    inter: Optional[str] = typer.Option(None, "--inter", help="Between nodes, per link: BANDWIDTH_GBPS,LATENCY_US (e.g. 50,5)."),
    reduce_bw: float = typer.Option(0.0, "--reduce-bw", help="With --intra/--inter: reduction speed in GB/s (0: free)."),
    links_per_node: Optional[int] = typer.Option(None, "--links-per-node", help="Inter-node links per node (default: one per rank with --inter, the model's with --model)."),
    collective: str = typer.Option("all_reduce", "-c", "--collective", help="all_reduce, all_gather or reduce_scatter."),
    min_bytes: str = typer.Option("8", "-b", "--min-bytes"),
    max_bytes: str = typer.Option("8G", "-e", "--max-bytes"),
    step_factor: float = typer.Option(4.0, "-f", "--step-factor"),
    segment_bytes: str = typer.Option("1M", "--segment-bytes", help="Pipelining unit assumed for the algorithms."),
    out: Optional[str] = typer.Option(None, "--out", help="Also write the predictions as a results folder (for report)."),
):
    """Predicted time, busbw and inter-node bytes per algorithm at any scale; best per size."""
    import json

    from commbench.api import new_run_id
    from commbench.model.costs import Params, Shape
    from commbench.model.fit import from_json
    from commbench.model.predict import best_and_crossovers, links, predict, write
    from commbench.spec import format_size, parse_size, size_range

    if nodes < 1 or ranks_per_node < 1:
        raise InputError("--nodes and --ranks-per-node must be at least 1")
    if collective not in ("all_reduce", "all_gather", "reduce_scatter"):
        raise InputError(f"unknown collective {collective!r} (accepted: all_reduce, all_gather, reduce_scatter)")
    if model is None and (intra is None or inter is None):
        raise InputError("give --model, or both --intra and --inter")
    if model is not None:
        try:
            with open(model, encoding="utf-8") as fh:
                fitted = from_json(json.load(fh), backend)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read model {model!r}: {exc}") from None
        values, source, default_links = dict(fitted.params), f"{model} ({fitted.backend})", fitted.links_per_node
    else:
        values = {"gamma": 1 / (reduce_bw * 1e9) if reduce_bw > 0 else 0.0}
        source, default_links = f"--reduce-bw {reduce_bw}", ranks_per_node
    for cls, text in (("intra", intra), ("inter", inter)):  # given links replace the model's
        if text is not None:
            values[f"alpha_{cls}"], values[f"beta_{cls}"] = links(text, f"--{cls}")
            source += f" --{cls} {text}"
    needed = (["intra"] if ranks_per_node > 1 else []) + (["inter"] if nodes > 1 else [])
    for cls in needed:
        if values.get(f"beta_{cls}") is None:
            raise InputError(f"the model has no {cls}-node parameters (its runs had no {cls}-node links); "
                             f"give --{cls} BANDWIDTH_GBPS,LATENCY_US")
    params = Params.from_values(values)
    shape = Shape(nodes, ranks_per_node, "block", links_per_node or default_links)
    sizes = size_range(parse_size(min_bytes), parse_size(max_bytes), step_factor)
    table = predict(params, shape, collective, sizes, parse_size(segment_bytes))
    best, changes = best_and_crossovers(table)
    wide = table.pivot(index="size_bytes", columns="algorithm", values="busbw_gbps")
    print(f"{collective}, {nodes} nodes x {ranks_per_node} ranks ({shape.n}), {shape.links_per_node} inter-node "
          f"link(s) per node; model: {source}")
    print("predicted busbw (GB/s); best = fastest")
    print(f"{'size':>8} " + " ".join(f"{a:>13}" for a in wide.columns) + f" {'best':>13}")
    for size, r in wide.iterrows():
        print(f"{format_size(int(size)):>8} " + " ".join(f"{v:>13.3f}" for v in r.values) + f" {best[size]:>13}")
    for size, before, after in changes:
        print(f"crossover: {before} -> {after} at {format_size(int(size))}")
    big = table[table.size_bytes == table.size_bytes.max()]
    print("inter-node bytes per call at the largest size: "
          + ", ".join(f"{r.algorithm} {r.internode_bytes_expected / 1e9:.3g} GB" for r in big.itertuples()))
    if out:
        run_id = new_run_id()
        write(table, out, run_id, {"label": f"predicted {nodes}x{ranks_per_node}", "backend": "model",
                                   "source": source, "params": params.__dict__, "nodes": nodes,
                                   "ranks_per_node": ranks_per_node, "links_per_node": shape.links_per_node})
        err.print(f"predictions written to {escape(out)}")


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
