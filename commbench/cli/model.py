"""`commbench model fit|validate|predict`: the cost model."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape

from commbench.cli.app import app, err
from commbench.errors import InputError
from commbench.options import MAX_RANK_SIZES, MAX_RANKS
from commbench.rank.collectives import lookup, names

model_app = typer.Typer(help="The α-β-γ cost model: fit it to sweeps, check it, predict cluster scale.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


def _check_links(value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"invalid --links-per-node {value}: it must be at least 1")


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
    """Fit α, β per link class (intra-, inter-node) and γ per backend from measured sweeps (the kernels apart)."""
    import json

    from commbench.analysis.model import load_rows
    from commbench.analysis.model.fit import fit, to_json
    from commbench.outputs import output_file, write_text

    _check_links(links_per_node)
    output_file(output, "-o", inputs=results)  # before the fit, which prints
    fits = fit(load_rows(results), links_per_node)
    for f in fits:
        print(f"{f.group}: {f.points} points ({', '.join(f.algorithms)}); fit error median "
              f"{100 * f.median_error:.1f} %, p90 {100 * f.p90_error:.1f} %")
        for name, value in f.params.items():
            lender = f.borrowed.get(name)
            print("  " + _fmt_param(name, value, f.rel_std.get(name)) + (f"  (the {lender} fit's)" if lender else ""))
    write_text(output, json.dumps(to_json(fits, results), indent=2, allow_nan=False), "model")
    err.print(f"model written to {escape(output)}")


@model_app.command("validate")
def model_validate(
    results: list[str] = typer.Argument(..., help="Result folders."),
    links_per_node: int = typer.Option(1, "--links-per-node", help="As for fit."),
    csv: Optional[str] = typer.Option(None, "--csv", help="Write every held-out prediction to this CSV."),
):
    """Held-out error: refit without one size, then without one algorithm, and predict it."""
    import pandas as pd

    from commbench.analysis.model import load_rows
    from commbench.analysis.model.fit import held_out, summary
    from commbench.outputs import csv_text, output_file, write_text

    _check_links(links_per_node)
    if csv is not None:
        output_file(csv, "--csv", inputs=results)  # before the fits, which print
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
        for (group, algo), g in errors.groupby(["group", "algorithm"]):
            print(f"  {algo:14} ({group}) median |error| {100 * g.error.abs().median():.1f} % over {len(g)} points")
        frames.append(errors.assign(method=by))
    if not frames:
        raise InputError("nothing to validate: too few points to leave a size or an algorithm out and refit "
                         "(sweep more sizes and algorithms)")
    if csv:
        write_text(csv, csv_text(pd.concat(frames)), "--csv")


@model_app.command("predict")
def model_predict(
    nodes: int = typer.Option(..., "--nodes", help=f"Nodes (nodes x ranks per node: at most {MAX_RANKS}; "
                              f"x the sizes: at most {MAX_RANK_SIZES})."),
    ranks_per_node: int = typer.Option(..., "--ranks-per-node", help="Ranks (GPUs) per node."),
    model: Optional[str] = typer.Option(None, "--model", help="A model.json from `model fit`."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Which backend of the model file (all its groups), or one group (mpi/kernel)."),
    intra: Optional[str] = typer.Option(None, "--intra", help="Inside a node: BANDWIDTH_GBPS,LATENCY_US (e.g. 450,2)."),
    inter: Optional[str] = typer.Option(None, "--inter", help="Between nodes, per link: BANDWIDTH_GBPS,LATENCY_US (e.g. 50,5)."),
    reduce_bw: float = typer.Option(0.0, "--reduce-bw", help="Without --model: reduction speed in GB/s (0: free)."),
    links_per_node: Optional[int] = typer.Option(None, "--links-per-node", help="Inter-node links per node (default: one per rank with --inter, the model's with --model)."),
    collective: str = typer.Option("all_reduce", "-c", "--collective", help=f"{names()}."),
    min_bytes: str = typer.Option("8", "-b", "--min-bytes"),
    max_bytes: str = typer.Option("8G", "-e", "--max-bytes"),
    step_factor: float = typer.Option(4.0, "-f", "--step-factor"),
    segment_bytes: str = typer.Option("1M", "--segment-bytes", help="Pipelining unit assumed for the algorithms."),
    out: Optional[str] = typer.Option(None, "--out", help="Also write the predictions as a results folder (for report)."),
):
    """Predicted time, busbw and inter-node bytes per algorithm at any scale; best per size."""
    import math

    from commbench.run.api import new_run_id
    from commbench.analysis.model.costs import Params, Shape
    from commbench.analysis.model.predict import check_out, check_scale, predict, write
    from commbench.spec import parse_size, size_range

    if nodes < 1 or ranks_per_node < 1:
        raise InputError("--nodes and --ranks-per-node must be at least 1")
    check_scale(nodes, ranks_per_node)
    _check_links(links_per_node)
    if not (0 <= reduce_bw < math.inf):
        raise InputError(f"invalid --reduce-bw {reduce_bw}: a reduction speed in GB/s, 0 (free) or more")
    if model is not None and reduce_bw:
        raise InputError("--reduce-bw sets the reduction speed without --model; the model file has its own")
    lookup(collective)  # an InputError naming the accepted collectives
    sizes = size_range(parse_size(min_bytes), parse_size(max_bytes), step_factor)
    check_scale(nodes, ranks_per_node, len(sizes))
    segment = parse_size(segment_bytes)
    if out:
        check_out(out)  # before the predictions, which print
    values, source, default_links = _predict_params(model, backend, intra, inter, reduce_bw, nodes, ranks_per_node)
    params = {engine: Params.from_values(v) for engine, v in values.items()}
    shape = Shape(nodes, ranks_per_node, "block", links_per_node or default_links)
    table = predict(params, shape, collective, sizes, segment)
    if table.empty:
        raise InputError(f"the model's algorithms ({', '.join(values)}) have no {collective} at "
                         f"{nodes} node(s) x {ranks_per_node}")
    _print_predictions(table, shape, collective, source)
    if out:
        run_id = new_run_id()
        write(table, out, run_id, {"label": f"predicted {nodes}x{ranks_per_node}", "backend": "model",
                                   "source": source, "params": {e: p.__dict__ for e, p in params.items()},
                                   "nodes": nodes, "ranks_per_node": ranks_per_node,
                                   "links_per_node": shape.links_per_node})
        err.print(f"predictions written to {escape(out)}")


def _predict_params(model, backend, intra, inter, reduce_bw, nodes, ranks_per_node) -> tuple[dict, str, int]:
    """The parameters of `model predict` per engine (engine -> name -> value): a fitted model's
    groups of one backend, the links given replacing theirs (without a model: the step
    algorithms'); where they come from; and the default links per node."""
    from commbench.analysis.model.costs import Shape
    from commbench.analysis.model.fit import load_model
    from commbench.analysis.model.predict import links, predicted, runs_at

    if model is None and (intra is None or inter is None):
        raise InputError("give --model, or both --intra and --inter")
    if model is not None:
        fitted = load_model(model, backend)
        values = {f.engine: dict(f.params) for f in fitted}
        source = f"{model} ({', '.join(f.group for f in fitted)})"
        default_links = fitted[0].links_per_node
    else:
        values = {"steps": {"gamma": 1 / (reduce_bw * 1e9) if reduce_bw > 0 else 0.0}}
        source, default_links = f"--reduce-bw {reduce_bw}", ranks_per_node
    for cls, text in (("intra", intra), ("inter", inter)):  # given links replace the model's
        if text is not None:
            for v in values.values():
                v[f"alpha_{cls}"], v[f"beta_{cls}"] = links(text, f"--{cls}")
            source += f" --{cls} {text}"
    shape = Shape(nodes, ranks_per_node)
    values = {e: v for e, v in values.items() if any(runs_at(a, shape) for a in predicted(e))}
    if not values:
        raise InputError(f"the model's algorithms do not run on {nodes} nodes (the kernels run the ranks of one node)")
    needed = (["intra"] if ranks_per_node > 1 else []) + (["inter"] if nodes > 1 else [])
    for cls in needed:
        if any(v.get(f"beta_{cls}") is None for v in values.values()):
            raise InputError(f"the model has no {cls}-node parameters (its runs had no {cls}-node links); "
                             f"give --{cls} BANDWIDTH_GBPS,LATENCY_US")
    return values, source, default_links


def _print_predictions(table, shape, collective: str, source: str) -> None:
    """busbw per algorithm and size, the best per size, its crossovers and the inter-node bytes."""
    from commbench.analysis.model.predict import best_and_crossovers
    from commbench.spec import format_size

    best, changes = best_and_crossovers(table)
    wide = table.pivot(index="size_bytes", columns="algorithm", values="busbw_gbps")
    print(f"{collective}, {shape.nodes} nodes x {shape.per_node} ranks ({shape.n}), {shape.links_per_node} inter-node "
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
