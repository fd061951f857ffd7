"""`commbench model fit|validate|predict`: the cost model."""

from __future__ import annotations

import inspect
from typing import Optional

import typer
from rich.markup import escape

from commbench import options
from commbench.cli.app import app, err, old_spelling, pick
from commbench.errors import InputError
from commbench.options import MAX_PREDICT_RANK_SIZES, MAX_PREDICT_RANKS
from commbench.collectives import COLLECTIVES
from commbench.spec import collective_aliases, resolve_names

model_app = typer.Typer(help="The α-β-γ cost model: fit it to sweeps, check it, predict cluster scale.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


def intra_option():
    """--intra, as `model predict` and `workload` take it."""
    return typer.Option(None, "--intra", help="Inside a node: BANDWIDTH_GBPS,LATENCY_US (e.g. 450,2).")


def inter_option():
    """--inter, as `model predict` and `workload` take it."""
    return typer.Option(None, "--inter", help="Between nodes, per link: BANDWIDTH_GBPS,LATENCY_US (e.g. 50,5).")


def _fmt_param(name: str, value, rel, undetermined: dict | None) -> str:
    """One parameter of a fit: its value and 95 % interval, or why it is not determined and what
    data would determine it."""
    from commbench.analysis.model.determined import interval, shown

    if undetermined is not None or value is None:
        u = undetermined or {"why": "not in the model", "needs": "a refit"}
        return f"{name:12} not determined: {u['why']}; needs {u['needs']}"
    if name.startswith(("beta", "gamma")):
        text = f"{shown(name, value)} ({value:.3e} s/B)"
    elif name == "mem_factor":
        text = f"{shown(name, value)} on β_intra and γ for bytes beyond the cache"
    elif name == "cache_bytes":
        text = f"{shown(name, value)} per node"
    else:
        text = shown(name, value)
    span = interval(name, value, rel)
    return f"{name:12} {text}" + (f"  95 % interval {span}" if span else "")


@model_app.command("fit")
def model_fit(
    results: list[str] = typer.Argument(..., help="Result folders (runs, or sweeps holding runs)."),
    output: str = typer.Option("model.json", "--output", help="Where to write the fitted model."),
    links_per_node: int = typer.Option(1, "--links-per-node", help="Links each node has to the others (1 on the emulated cluster)."),
    old_output: Optional[str] = old_spelling("-o"),
):
    """Fit α, β per link class (intra-, inter-node) and γ per backend from measured sweeps (the kernels apart)."""
    import json

    from commbench.analysis.model import load_rows
    from commbench.analysis.model.at_scale import check_links
    from commbench.analysis.model.fit import fit
    from commbench.analysis.model.model_file import to_json
    from commbench.folder.outputs import output_file, write_text

    check_links(links_per_node)
    flag = "-o" if old_output is not None else "--output"
    output = pick(output, old_output, "--output", "-o", default="model.json")
    output_file(output, flag, inputs=results)  # before the fit, which prints
    fits = fit(load_rows(results), links_per_node)
    for f in fits:
        print(f"{f.group}: {f.points} points ({', '.join(f.algorithms)}); fit error median "
              f"{100 * f.median_error:.1f} %, p90 {100 * f.p90_error:.1f} %")
        for name, value in f.params.items():
            lender = f.borrowed.get(name)
            print("  " + _fmt_param(name, value, f.rel_std.get(name), f.undetermined.get(name))
                  + (f"  (the {lender} fit's)" if lender else ""))
    write_text(output, json.dumps(to_json(fits, results), indent=2, allow_nan=False), "model")
    err.print(f"model written to {escape(output)}")


@model_app.command("validate")
def model_validate(
    results: list[str] = typer.Argument(..., help="Result folders."),
    links_per_node: int = typer.Option(1, "--links-per-node", help="As for fit."),
    output: Optional[str] = typer.Option(None, "--output", help="Write every held-out prediction to this CSV file."),
    csv: Optional[str] = old_spelling("--csv"),
):
    """Held-out error: refit without one size, then without one algorithm, and predict it."""
    import pandas as pd

    from commbench.analysis.model import load_rows
    from commbench.analysis.model.at_scale import check_links
    from commbench.analysis.model.fit import usable
    from commbench.analysis.model.validate import held_out, summary
    from commbench.folder.outputs import csv_text, output_file, write_text

    check_links(links_per_node)
    flag = "--csv" if csv is not None else "--output"
    csv = pick(output, csv, "--output", "--csv")
    if csv is not None:
        output_file(csv, flag, inputs=results)  # before the fits, which print
    rows = load_rows(results)
    usable(rows)  # none: the fit's own reason, not "too few points"
    methods = []
    for by, what in (("size_bytes", "leave one size out"), ("algorithm", "leave one algorithm out")):
        errors = held_out(rows, by, links_per_node)
        methods.append((by, what, errors, summary(errors)))
    if not any(s for *_, s in methods):
        raise InputError("nothing to validate: too few points to leave a size or an algorithm out and refit "
                         "(sweep more sizes and algorithms)")
    frames = []
    for by, what, errors, s in methods:
        if not s:
            print(f"{what}: not enough points")
            continue
        print(f"{what}: {s['points']} held-out points, median |error| {100 * s['median_abs_error']:.1f} %, "
              f"p90 {100 * s['p90_abs_error']:.1f} %")
        for band in s["bands"]:
            print(f"  {band['band']:6} ({band['edges']}): " + (
                f"{band['points']} points, median |error| {100 * band['median_abs_error']:.1f} %, "
                f"p90 {100 * band['p90_abs_error']:.1f} %" if band["points"] else "no points"))
        for (group, algo), g in errors.groupby(["group", "algorithm"]):
            print(f"  {algo:14} ({group}) median |error| {100 * g.error.abs().median():.1f} % over {len(g)} points")
        frames.append(errors.assign(method=by))
    if csv:
        write_text(csv, csv_text(pd.concat(frames)), flag)


def _with_run_options(*names: str):
    """The command's own parameters, then `commbench run`'s options of these names, with run's
    flags, defaults and help (commbench.options, through commbench.cli.common.with_options)."""
    from commbench.cli.common import with_options

    def wrap(func):
        own = tuple(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in inspect.signature(func).parameters.values()
                    if p.kind is not p.VAR_KEYWORD and p.name != "ctx")
        return with_options(tuple(options.BY_NAME[n] for n in names), own)(func)
    return wrap


# the options `model predict` shares with `commbench run`: what to predict, as run measures it
PREDICT_RUN_OPTIONS = ("collective", "min_bytes", "max_bytes", "step_factor", "sizes", "segment_bytes")


@model_app.command("predict")
@_with_run_options(*PREDICT_RUN_OPTIONS)
def model_predict(
    ctx: typer.Context,
    nodes: int = typer.Option(..., "--nodes", help=f"Nodes (nodes x ranks per node: at most {MAX_PREDICT_RANKS}; "
                              f"x the sizes x the collectives: at most {MAX_PREDICT_RANK_SIZES})."),
    ranks_per_node: int = typer.Option(..., "--ranks-per-node", help="Ranks (GPUs) per node."),
    model: Optional[str] = typer.Option(None, "--model", help="A model.json from `model fit`."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Which backend of the model file (all its groups), or one group (mpi/kernel)."),
    intra: Optional[str] = intra_option(),
    inter: Optional[str] = inter_option(),
    reduce_bw: float = typer.Option(0.0, "--reduce-bw", help="Without --model: reduction speed in GB/s (0: free)."),
    links_per_node: Optional[int] = typer.Option(None, "--links-per-node", help="Inter-node links per node (default: one per rank with --inter, the model's with --model)."),
    out: Optional[str] = typer.Option(None, "--out", help="Also write the predictions as a results folder (for report)."),
    **values,
):
    """Predicted time, busbw and inter-node bytes per algorithm at any scale; best per size.
    Which collectives and sizes: as `commbench run` takes them (-c, -b, -e, -f, --sizes)."""
    import pandas as pd

    from commbench.analysis.model.at_scale import Request, check, predict_at_scale
    from commbench.analysis.model.predict import check_out, write
    from commbench.folder.place import new_run_id
    from commbench.spec import parse_size

    request = Request(nodes, ranks_per_node, [], [], model, backend, intra, inter, reduce_bw, links_per_node)
    check(request)  # the shape first: the sizes below may be many
    request.collectives = resolve_names("collective", values["collective"], COLLECTIVES, collective_aliases())
    request.sizes = _sizes(values)
    request.segment = parse_size(values["segment_bytes"])
    check(request)
    if out:
        check_out(out)  # before the predictions, which print
    p = predict_at_scale(request)
    for line in (*p.notes, *p.dropped_lines()):
        print(line)
    for c, table in p.tables.items():
        if table.empty:
            print(f"{c}: nothing predicted at {nodes} node(s) x {ranks_per_node}")
        else:
            _print_predictions(table, p.shape, c, p.source)
    if out:
        write(pd.concat([t for t in p.tables.values() if not t.empty], ignore_index=True), out, new_run_id(),
              {"label": f"predicted {nodes}x{ranks_per_node}", "backend": "model",
               "source": p.source, "params": {e: v.__dict__ for e, v in p.params.items()},
               "nodes": nodes, "ranks_per_node": ranks_per_node, "links_per_node": p.shape.links_per_node})
        err.print(f"predictions written to {escape(out)}")


def _sizes(values: dict) -> list[int]:
    """The sizes of -b/-e/-f, or of --sizes, as `commbench run` takes them."""
    from commbench.options import MAX_SIZES
    from commbench.spec import parse_size, size_range, split_list

    if values["sizes"] is None:
        return size_range(parse_size(values["min_bytes"]), parse_size(values["max_bytes"]), values["step_factor"])
    items = split_list(values["sizes"])
    if not items or len(items) > MAX_SIZES:
        raise InputError(f"--sizes takes 1 to {MAX_SIZES} sizes")
    return sorted({parse_size(s) for s in items})


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
