"""`commbench workload`: one training step's collectives, measured here and predicted at scale
(commbench.workload.api)."""

from __future__ import annotations

import dataclasses
import inspect

import typer
from rich.markup import escape

from commbench import options
from commbench.cli.app import app, err
from commbench.cli.model import inter_option, intra_option
from commbench.cli.common import check_used, given, say_backend_choice, with_options

# `commbench run`'s options a workload's sweeps take (the collectives and sizes come from the mix), from the
# one table (commbench.options), two with defaults of their own: -a ring, an algorithm the cost model
# predicts (native, the library's call, it does not); --min-time 0.3 s, as the fit from this run needs quiet
# points (at 0.1 s, 1 run in 3 of the 7B FSDP mix here left the cache size undetermined, and the predictions
# here out). --both's help says what no buffer switch means here.
RUN_OPTIONS = ("backend", "algorithm", "dtype", "in_place", "out_of_place", "both", "nprocs", "oversubscribe",
               "launcher", "launcher_args", "device", "warmup", "iters", "min_time", "max_iters", "batch", "timer",
               "timeout", "ranks_per_node", "segment_bytes", "channels", "out", "label", "quiet")
OWN = {"algorithm": {"default": "ring"}, "min_time": {"default": 0.3},
       "out": {"help": "Results folder (default results/<UTC time>-<id>-<name>/)."},
       "both": {"help": "In-place and out-of-place (default: each collective's buffers as training uses them: "
                        "all-reduce in place, all-gather and reduce-scatter out of place)."}}
TABLE = tuple(dataclasses.replace(options.BY_NAME[n], **OWN.get(n, {})) for n in RUN_OPTIONS)


def _own(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


_EXTRA = (
    _own("config", str | None, typer.Argument(None, show_default=False, help="A workload file, or a bundled "
                                              "workload's name (--list shows them).")),
    _own("trace", str | None, typer.Option(None, "--trace", help="A PARAM comms basic trace (JSON) instead of a "
                                           "config: its calls are the mix.")),
    _own("gpus_per_node", int | None, typer.Option(None, "--gpus-per-node", help="With --trace: the traced job's "
                                                   "ranks per node (a trace commbench wrote says it itself).")),
    _own("measure", bool, typer.Option(True, "--measure/--no-measure", help="Measure the mix here (--no-measure: "
                                       "predict only, with --model).")),
    _own("scale", float, typer.Option(1.0, "--scale", help="Multiply every message size by this to fit here (sizes "
                                      "are capped at 256M).")),
    _own("model", str | None, typer.Option(None, "--model", help="A model.json from `commbench model fit` "
                                           "(default: fit one from this run's sweeps).")),
    _own("intra", str | None, intra_option()),
    _own("inter", str | None, inter_option()),
    _own("compute_ms", float | None, typer.Option(None, "--compute-ms", help="Compute time per step (ms): "
                                                 "prints communication's share of the step.")),
    _own("param_out", str | None, typer.Option(None, "--param-out", help="Also write the mix as a PARAM basic "
                                               "trace to this file (OUT/param_trace.json always).")),
    _own("spread", float | None, typer.Option(None, "--spread", help="The router's imbalance: the experts' "
                                              "all-to-all as all_to_allv with nccl-tests' spread (0 even to 1 "
                                              "distance-weighted; default: the config's router.spread, else an even "
                                              "all_to_all).")),
    _own("concurrent", bool, typer.Option(False, "--concurrent", help="Also measure each entry with every group of "
                                          "its size that -n holds running it at once (--split): what sharing the "
                                          "links costs, beside the one-group figure.")),
    _own("list_", bool, typer.Option(False, "--list", help="List the bundled workloads and exit.")),
)


@app.command(help="One training step's collectives (from a workload config or a PARAM trace): measured here as "
                  "commbench sweeps, predicted at the config's scale by the cost model, per traffic kind. Writes "
                  "OUT/mix.csv, OUT/workload.json, OUT/param_trace.json and OUT/measured/ (default "
                  "results/<UTC time>-<id>-<name>/).")
@with_options(TABLE, _EXTRA)
def workload(ctx: typer.Context, **values):
    from commbench.presentation.console import Renderer
    from commbench.workload.api import Request, check, run

    if values["list_"]:
        from commbench.workload.config import bundled_workloads, load_workload

        for name in bundled_workloads():
            text = " ".join(load_workload(name).description.split())
            print(f"{name:16} {text[:text.find('. ') + 1] if '. ' in text else text}")
        return
    fields = {o.name: values[o.name] for o in TABLE}
    chosen = given(ctx, TABLE)
    options.check_overridden(chosen)
    request = Request(source=values["config"], trace=values["trace"], gpus_per_node=values["gpus_per_node"],
                      fields=fields, backend_given="backend" in chosen, measure=values["measure"],
                      scale=values["scale"], model=values["model"], compute_ms=values["compute_ms"],
                      intra=values["intra"], inter=values["inter"], out=values["out"], param_out=values["param_out"],
                      spread=values["spread"], concurrent=values["concurrent"])
    checked = check(request)
    if checked.sweeps is not None:
        check_used(chosen, list(checked.sweeps.specs.values()))
    if request.measure:
        say_backend_choice([fields.get("backend") or options.BY_NAME["backend"].default])
    quiet = values["quiet"]
    renderer = Renderer(quiet=quiet)

    def on_run(label, spec):
        renderer.close()
        if not quiet:
            err.print(f"[bold]== {escape(checked.name)} / {escape(label)}[/]: {len(spec.sizes)} sizes")

    try:
        done = run(checked, on_run=on_run, on_event=renderer)
    finally:
        renderer.close()
    from commbench.workload.report import render

    render(err, checked, done)
    if done.wrong:
        err.print(f"[bold red]FAILED[/]: {done.wrong} wrong elements; results in {escape(str(done.out))}")
        raise typer.Exit(1)
    err.print(f"[green]OK[/]: {len(checked.entries)} entries; results in {escape(str(done.out))}")
