"""A cost model for the workload tests, fitted by the real `commbench model fit` (in this process) to a
one-node MPI run folder whose times follow known parameters (written through the one writer,
RunFolder + build_row), so that a prediction can be checked against the truth."""

from __future__ import annotations

import json
import math

import numpy as np

from cli_inprocess import run_cli

from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.errors import OK
from commbench.folder.schema import build_row
from commbench.folder.write import RunFolder

TRUTH = Params(5e-6, 2e-10, 0.0, 0.0, 1e-10)  # 5 µs a message, 5 GB/s copies, 10 GB/s reductions
RANKS = 4
SIZES = tuple(4 * RANKS * 8**k for k in range(8))  # 16 B .. 32 MB: one element per rank, then x8
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


def truth_us(collective: str, size: int, ranks: int = RANKS, in_place: bool = False) -> float:
    return time_s(TRUTH, "ring", collective, Shape(1, ranks), size, in_place=in_place) * 1e6


def fitted_model(tmp_path, noise: float = 0.0) -> tuple[str, str]:
    """(the model file, `model fit`'s stdout) of a ring sweep on 4 ranks of one node; noise: the σ
    of lognormal noise on its times (seeded), which gives the fit's parameters an uncertainty."""
    rng = np.random.default_rng(0)
    run = tmp_path / "truth-run"
    folder = RunFolder(run)
    folder.create({"run_id": "truth", "label": "truth", "status": "completed", "world_size": RANKS, "nodes": 1,
                   "ranks_per_node": RANKS, "spec": {"segment_bytes": 1 << 20}})
    point = 0
    for collective in COLLECTIVES:
        for in_place in (False, True):
            for size in SIZES:
                us = truth_us(collective, size, in_place=in_place) * math.exp(noise * rng.standard_normal())
                folder.add(build_row(run_id="truth", point=point, collective=collective, backend="mpi",
                                     algorithm="ring", device="cpu", dtype="float32",
                                     op="none" if collective == "all_gather" else "sum", in_place=int(in_place),
                                     world_size=RANKS, nodes=1, ranks_per_node=RANKS, size_bytes=size, time_us=us,
                                     samples=1, wrong=0), [us])
                point += 1
    folder.finalize()
    model = tmp_path / "model.json"
    outcome = run_cli("model", "fit", run, "--output", model)
    outcome.assert_clean(codes=(OK,))
    assert json.loads(model.read_text())["fits"]["mpi"]["points"] == point
    return str(model), outcome.stdout
