"""Predict collectives at a scale nobody can book: per algorithm and size, time, busbw and the
bytes that cross node links; the best algorithm per size and where the best one changes.
Written in the results layout (rows marked predicted) so `commbench report` draws them next to
measured runs. Each algorithm is predicted with its engine's parameters (Algorithm.engine, as the
model fits them apart: fit.py); an engine without parameters leaves its algorithms out. An
algorithm mixing engines (hierarchical_kernel: kernels inside nodes, the backend's point-to-point
between them) is predicted with its intra-node engine's group, whose inter-node α', β' the fit
took from the backend's step algorithms (fit.py)."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from commbench import runinfo
from commbench.analysis.model.costs import MEMORY, Params, Shape, modelled, time_s
from commbench.errors import InputError
from commbench.metrics import bandwidth
from commbench.options import MAX_PREDICT_RANK_SIZES, MAX_PREDICT_RANKS
from commbench.algorithms import ALGORITHMS
from commbench.algorithms.base import SEGMENT_BYTES
from commbench.collectives import COLLECTIVES
from commbench.machine.traffic import expected_internode_bytes
from commbench.folder.schema import RunStatus, build_row
from commbench.folder.write import RunFolder
from commbench.folder.place import check_place

ITEMSIZE = 4  # float32
# the scale `model predict` takes: every rank's messages are laid out per algorithm and size
# (16,384 ranks x 16 sizes, the default 8 B - 8 GB, take 20-30 s and 250 MB; 65,536 ranks took 131 s and 500 MB)


def check_scale(nodes: int, per_node: int, sizes: int | None = None, collectives: int = 1) -> None:
    """InputError where a prediction is larger than MAX_PREDICT_RANKS ranks or MAX_PREDICT_RANK_SIZES ranks x
    sizes x collectives (sizes None: the ranks alone, checked before the sizes are made)."""
    ranks = nodes * per_node
    if ranks < 2:
        raise InputError(f"--nodes {nodes} x --ranks-per-node {per_node} is one rank, which communicates nothing: "
                         "predict at least 2")
    if ranks > MAX_PREDICT_RANKS:
        raise InputError(f"--nodes {nodes} x --ranks-per-node {per_node} is {ranks} ranks; model predict takes "
                         f"at most {MAX_PREDICT_RANKS}")
    if sizes is not None and ranks * sizes * collectives > MAX_PREDICT_RANK_SIZES:
        raise InputError(f"{ranks} ranks x {sizes} sizes x {collectives} collective(s) is more than model predict "
                         f"takes (ranks x sizes x collectives at most {MAX_PREDICT_RANK_SIZES}): fewer sizes (-b, -e, a larger "
                         "-f, --sizes), collectives (-c) or ranks")


def predicted(engine: str | None = None) -> list[str]:
    """The algorithms `model predict` shows: the modelled ones that say so (Algorithm.predicted),
    of one engine if given."""
    return [name for name in modelled() if ALGORITHMS[name].predicted and engine in (None, ALGORITHMS[name].engine)]


def runs_at(algorithm: str, shape: Shape) -> bool:
    """Whether the algorithm runs at this shape: ring_kernel and tree_kernel run the ranks of one
    node (Algorithm.one_node)."""
    return shape.nodes == 1 or not ALGORITHMS[algorithm].one_node


def links(text: str, what: str) -> tuple[float, float]:
    """'BW,LAT': GB/s and µs -> (α seconds, β seconds per byte)."""
    try:
        bw, lat = (float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"invalid {what} {text[:40]!r} (expected BANDWIDTH_GBPS,LATENCY_US such as 450,2)") from None
    if not (0 < bw < math.inf and 0 <= lat < math.inf):
        raise InputError(f"invalid {what} {text!r}: bandwidth must be positive and latency not negative (finite)")
    return lat * 1e-6, 1 / (bw * 1e9)


def predict(params: Params | dict[str, Params], shape: Shape, collective: str, sizes: list[int],
            segment_bytes: int = SEGMENT_BYTES) -> pd.DataFrame:
    """params: per engine (Algorithm.engine: "steps", "kernel"), or the step algorithms' alone."""
    per_engine = params if isinstance(params, dict) else {"steps": params}
    coll = COLLECTIVES[collective]
    node_of = shape.node_of()
    rows = []
    for algorithm in predicted():
        p = per_engine.get(ALGORITHMS[algorithm].engine)
        if p is None or not runs_at(algorithm, shape):
            continue
        seen = set()  # sizes that round to one predicted already (nccl-tests' rounding) are predicted once
        for size in sizes:
            counts = coll.counts(size, ITEMSIZE, shape.n)
            t = time_s(p, algorithm, collective, shape, counts.size_bytes, segment_bytes)
            if t is None or counts.size_bytes == 0 or counts.size_bytes in seen:
                continue
            seen.add(counts.size_bytes)
            algbw, busbw = bandwidth(counts.size_bytes, t * 1e6, coll.bus_factor(shape.n))
            rows.append({"collective": collective, "algorithm": algorithm, "world_size": shape.n, "nodes": shape.nodes,
                         "ranks_per_node": shape.per_node, "size_bytes": counts.size_bytes, "count": counts.count,
                         "time_us": t * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
                         "bus_factor": coll.bus_factor(shape.n), "placement": shape.placement,
                         "internode_bytes_expected": expected_internode_bytes(
                             ALGORITHMS[algorithm], collective, counts, ITEMSIZE, node_of, segment_bytes)})
    return pd.DataFrame(rows)


def needed(name: str, shape: Shape, collectives: list[str]) -> bool:
    """Whether predictions at this shape use the parameter (the memory term: see `undetermined`)."""
    if name.endswith("_intra"):
        return shape.per_node > 1
    if name.endswith("_inter"):
        return shape.nodes > 1
    if name == "gamma":
        return any(COLLECTIVES[c].reduces for c in collectives)
    return False


def _moved(values: dict, engine: str, changes: list[dict], limit: float, shape: Shape, collectives: list[str],
           sizes: list[int], segment_bytes: int) -> set[tuple[str, str]]:
    """The (collective, algorithm) pairs whose log time moves by more than `limit`, at the
    smallest, middle or largest size, under any of the changes (log parameter -> shift)."""
    picked = sorted({sizes[0], sizes[len(sizes) // 2], sizes[-1]})
    out = set()
    for c in collectives:
        base = predict({engine: Params.from_values(values)}, shape, c, picked, segment_bytes)
        for change in changes:
            moved = values | {k: (values.get(k) or 0.0) * math.exp(d) for k, d in change.items()}
            other = predict({engine: Params.from_values(moved)}, shape, c, picked, segment_bytes)
            if len(base):
                far = (other.time_us / base.time_us).map(math.log).abs() > limit
                out |= {(c, algorithm) for algorithm in base[far].algorithm}
    return out


SPREAD = 0.1  # a prediction moving more than 10 % across an undetermined parameter's 95 % interval depends on it
HALVED = 0.5  # how far along a trade-off of α, β, γ a prediction is tried: until one of them halves
EPS, MOVES = 1e-3, 0.05  # a trade-off with the memory term: a prediction moving MOVES x a step of the logs depends on it


def along(direction: dict) -> tuple[list[dict], float]:
    """The changes (log shifts, for _moved) that try a prediction along a trade-off's weak direction
    (log parameter -> change: fit.Fit.undetermined), and how far it may move on them. Of α, β, γ
    alone, in which the points' times are linear: a straight line in the parameters, along which
    the fitted points stay put however far it goes, both ways until the first parameter it lowers
    halves; a prediction moving more than SPREAD depends on the split. A step of the logs would not
    do: where the fit gave one of the two almost nothing (γ every byte of β + γ/2), it moves no
    prediction at all, while the line reaches the splits in between, where a prediction of
    all_gather (copies only) moves a lot. Where the memory term, which is not linear in them, has a
    part in it: a step of the logs (EPS), a prediction moving more than MOVES x as much depending on it."""
    if any(abs(direction.get(k, 0.0)) > 1e-3 for k in MEMORY):
        return [{k: EPS * d for k, d in direction.items()}], MOVES * EPS
    moves = []
    for sign in (1, -1):
        lowered = [-sign * d for d in direction.values() if sign * d < 0]
        step = (1 - HALVED) / max(lowered) if lowered else 1.0
        moves.append({k: math.log1p(sign * step * d) for k, d in direction.items()})
    return moves, math.log1p(SPREAD)


def undetermined(fits: dict, values: dict, shape: Shape, collectives: list[str], sizes: list[int],
                 segment_bytes: int, given: set[str]) -> tuple[list[str], dict[tuple[str, str], str]]:
    """What a prediction makes of the model's undetermined parameters (fit.Fit.undetermined).
    fits: engine -> its Fit (None: no model); values: engine -> the estimates predicted with;
    given: parameters replaced on the command line. A prediction depends on a parameter
      - with no estimate or an unbounded interval: where its shape or collectives use it (then
        an InputError, one line: every prediction depends on it);
      - that trades off against another (a direction in which the fit's points do not move): where
        it moves more than SPREAD along that direction (`along`: that is, on how the fit split the
        two), unless the other is replaced (then as above);
      - with a finite but wide interval: where it moves more than SPREAD across the interval.
    Returns notes, and the (collective, algorithm) pairs to leave out -> why."""
    from commbench.analysis.model.determined import RANGES, Z95, bounded

    notes, dropped = [], {}
    for engine, f in fits.items():
        if f is None:
            continue
        missing = {k: {"why": "not in the model", "needs": "a refit"} for k, v in values[engine].items()
                   if v is None and k not in f.undetermined and needed(k, shape, collectives)}
        for name, u in (f.undetermined | missing).items():
            if name in given or name not in Params.__dataclass_fields__ or (
                    name not in MEMORY and not needed(name, shape, collectives)):
                continue
            low, high = RANGES[name]
            if u.get("estimate") is not None and not low <= u["estimate"] <= high:
                u = u | {"estimate": None}  # a value no machine has: nothing a prediction can rest on
            sigma = f.rel_std.get(name)
            if u.get("direction") and u.get("estimate") is not None and not set(u["direction"]) & given:
                changes, limit = along(u["direction"])
                why = (f"they depend on how the fit split {' and '.join(u['direction'])}, which its points do not "
                       f"determine apart (that needs {u['needs']})")
            elif u.get("estimate") is not None and bounded(sigma):
                changes, limit = [{name: s * Z95 * sigma} for s in (-1, 1)], math.log1p(SPREAD)
                why = f"they move more than {100 * SPREAD:.0f} % across {name}'s interval ({u['why']}; that needs {u['needs']})"
            elif name in MEMORY:  # without an estimate, no memory term: bytes at the cached β, γ
                if u.get("estimate") is not None:
                    notes.append(f"note: {name} ({f.group}) is not determined ({u['why']}): beyond the cache these "
                                 "predictions rest on its estimate")
                continue
            else:
                cls = name.rpartition("_")[2]
                override = f"; or give --{cls} BANDWIDTH_GBPS,LATENCY_US" if cls in ("intra", "inter") else ""
                raise InputError(f"cannot predict: the model's {name} ({f.group}) is not determined ({u['why']}); "
                                 f"it needs {u['needs']}{override}")
            moved = _moved(values[engine], engine, changes, limit, shape, collectives, sizes, segment_bytes)
            for key in moved:
                dropped.setdefault(key, why)
            if not moved:
                notes.append(f"note: {name} ({f.group}) is not determined ({u['why']}), but these predictions do not "
                             "depend on it")
    return notes, dropped


def best_and_crossovers(table: pd.DataFrame) -> tuple[pd.Series, list[tuple[int, str, str]]]:
    """Fastest algorithm per size (of equal times, the first by name: whatever order the table's rows are
    in), and (size, from, to) wherever it changes."""
    ordered = table.sort_values(["size_bytes", "time_us", "algorithm"], kind="stable")
    best = ordered.drop_duplicates("size_bytes").set_index("size_bytes").algorithm
    changes = [(size, prev, cur) for (size, cur), prev in zip(best.items(), [None, *best.values[:-1]]) if prev and prev != cur]
    return best, changes


def check_out(out_dir) -> Path:
    """--out, checked before anything is predicted: a place for a run folder (check_place) that is
    new or empty (write renames the whole folder into it)."""
    out = check_place(out_dir)
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {str(out_dir)!r} is not empty: predictions go to a new (or empty) folder")
    return out


def write(table: pd.DataFrame, out_dir: str | Path, run_id: str, description: dict) -> Path:
    """The predictions as a run folder, written whole: in a temporary folder beside out_dir,
    renamed into place (a failure leaves no folder, or the empty one that was there)."""
    out = Path(out_dir)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        try:
            os.chmod(tmp, 0o755)
            folder = RunFolder(tmp)
            folder.create({"run_id": run_id, "label": description["label"], "predicted": True, "model": description})
            for i, r in enumerate(table.to_dict("records")):
                folder.add(build_row(**r, run_id=run_id, label=description["label"], point=i,
                                     backend=description["backend"], device="", dtype="float32",
                                     op="sum" if COLLECTIVES[r["collective"]].reduces else "none",
                                     in_place=1, iterations=0, batch=0, warmup=0, predicted=1), [r["time_us"]])
            folder.finalize()
            folder.update({"status": RunStatus.COMPLETED, "end_time": runinfo.utc_now()})
            os.rename(tmp, out)  # onto nothing, or an empty folder
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except OSError as exc:
        raise InputError(f"cannot write --out {str(out)!r}: {exc.strerror or exc}") from None
    return out
