"""`commbench check`: measure a whole allocation's fabric and name the slow node or link
(commbench.run.check launches it, commbench.analysis.fabric judges it)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Optional

import typer
from rich.markup import escape

from commbench import options
from commbench.cli.app import app, err
from commbench.cli.common import extra_option, say_backend_choice, with_options
from commbench.errors import FAILED, InputError
from commbench.spec import SweepSpec

# the run options that say where and how the ranks start (the rest are the check's own)
CHECK_OPTIONS = tuple(options.BY_NAME[n] for n in (
    "backend", "device", "nprocs", "oversubscribe", "launcher", "launcher_args", "ranks_per_node", "emulate",
    "link_rate", "node_link_rate", "placement", "timeout", "label", "out"))
_EXTRA = (
    extra_option("size", str, "4M", "--size", help="Bytes of a link's message each way, and of the all-reduces "
                                                   "(K/M/G suffixes)."),
    extra_option("peers", int, 0, "--peers", help="Sampled mode for large clusters: each node meets this many others "
                                                  "(O(N) pairs); 0: every other node (a round-robin tournament, N-1 "
                                                  "rounds of N/2 pairs at once)."),
    extra_option("budget", float, 150.0, "--budget", help="Seconds of repetitions at most; the ranks stop earlier "
                                                          "once every verdict is decided."),
    extra_option("floors", Optional[str], None, "--floors", help="A JSON file of absolute bars besides the cluster's "
                 "median: link_gbps (a node's links, a link), path_gbps (inside a node), node_all_reduce_us (a "
                 "node's all-reduce, at most)."),
    extra_option("fmt", str, "text", "--format", help="text, markdown or json."),
    extra_option("json_out", bool, False, "--json", help="Print one JSON object (the verdict and what is flagged), as "
                                                         "--format json."),
)


@app.command(help="Check a cluster: every node pair's link (N/2 disjoint pairs at once, N-1 rounds), inside each "
                  "node every pair of its ranks and its all-reduce, one all-reduce across the nodes, repeated until "
                  "each verdict is decided; each node, link, rank and path judged against the cluster's median. "
                  "Exit 0 healthy, 1 something flagged, 2 bad input.")
@with_options(table=CHECK_OPTIONS, extra=_EXTRA)
def check(ctx: typer.Context, **values):
    from commbench.analysis.fabric import FORMATS, read_check, read_floors, render
    from commbench.run.check import check_fabric
    from commbench.presentation.console import Renderer

    json_out, fmt = values.pop("json_out"), values.pop("fmt")
    fmt = "json" if json_out else fmt
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (accepted: {', '.join(FORMATS)})")
    size, peers, budget = values.pop("size"), values.pop("peers"), values.pop("budget")
    floors = read_floors(values.pop("floors"))  # before anything starts
    if peers < 0:
        raise InputError(f"invalid --peers {peers}: 0 (every other node) or more")
    launcher_args = options.launcher_argv(values["launcher_args"])
    fields = dict(values) | {"collective": "all_reduce", "sizes": size, "mode": "out-of-place"}
    spec = SweepSpec.from_options(**options.spec_arguments(fields))
    spec = dataclasses.replace(spec, check=True, check_peers=peers or None, check_budget=budget).validate()
    say_backend_choice([values["backend"]])
    renderer = Renderer(quiet=True, modes=spec.all_modes(), stderr=True)  # the verdict table is the output
    try:
        result = check_fabric(spec, launcher_args, on_event=renderer, argv=sys.argv)
    finally:
        renderer.close()
    found = read_check(result.out_dir, floors)
    print(render(found, fmt))
    if fmt != "json":
        err.print(f"results in {escape(str(result.out_dir))}")
    if found.flagged or result.wrong:
        raise typer.Exit(FAILED)
