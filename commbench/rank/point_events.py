"""What rank 0 sends the parent for one measured point: its row (make_row, from a harness Measurement),
then its samples and each rank's samples, in event lines under 4 KB (a pipe writes such a line whole,
other ranks sharing it; commbench.events.SAMPLES_PER_EVENT), the row last (commbench.folder.write writes
a point only with all its samples). Used by the sweep (commbench.rank.worker) and the check
(commbench.rank.fabric)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from commbench.collectives import COLLECTIVES
from commbench.events import SAMPLES_PER_EVENT
from commbench.metrics import bandwidth, summarize
from commbench.folder.schema import build_row


def make_row(spec, point, counts, m, world, nodes, per_node, device, **extra) -> dict:
    """A sweep point's results row from its Measurement m (commbench.rank.harness)."""
    return build_row(
        run_id=spec.run_id, label=spec.label, point=point.index, collective=point.collective, backend=point.backend,
        algorithm=point.algorithm, device=device, dtype=point.dtype, op=point.op or "none", in_place=point.in_place,
        world_size=world, nodes=nodes, ranks_per_node=per_node, size_bytes=counts.size_bytes, count=counts.count,
        **summarize(m.samples_s), iterations=m.iterations, batch=m.batch, warmup=m.warmup, timer=m.timer, wrong=m.wrong,
        placement=spec.row_placement, root=counts.root if COLLECTIVES[point.collective].rooted else None,
        registration=spec.row_registration, **extra)


def group_columns(split: str, collective: str, counts, group_s: np.ndarray, comm_size: int) -> dict:
    """--split's columns of a row from every group's seconds per call (groups x samples): the split, the
    groups, each group's median time and its busbw (nccl-tests' convention, over the group's ranks), and their
    total busbw (what every group moves at once)."""
    medians = np.median(np.asarray(group_s), axis=1) * 1e6
    factor = COLLECTIVES[collective].bus_factor(comm_size)
    busbw = [bandwidth(counts.size_bytes, t, factor)[1] for t in medians]
    return {"split": split, "groups": len(medians), "group_time_us": ";".join(f"{t:.4f}" for t in medians),
            "group_busbw_gbps": ";".join(f"{b:.6g}" for b in busbw), "busbw_total_gbps": float(sum(busbw))}


def send_point(emit: Callable[..., None], index: int, row: dict, samples_s, rank_s=None, late_s=None) -> None:
    """The point's samples (seconds per call), each rank's own and outside-the-calls seconds (ranks x
    samples, where measured), then its row with each rank's medians (the `run --json` row's)."""
    samples = [round(t, 4) for t in (np.asarray(samples_s) * 1e6).tolist()]
    for i in range(0, len(samples), SAMPLES_PER_EVENT):
        emit("samples", point=index, values=samples[i:i + SAMPLES_PER_EVENT])
    if rank_s is None:
        emit("row", row=row)
        return
    step = SAMPLES_PER_EVENT // 2  # two lists a line: still a line under 4 KB
    for r in range(rank_s.shape[0]):
        own, late = (rank_s[r] * 1e6).round(4).tolist(), (late_s[r] * 1e6).round(4).tolist()
        for i in range(0, len(own), step):
            emit("ranks", point=index, rank=r, start=i, time_us=own[i:i + step], late_us=late[i:i + step])
    emit("row", row=row, ranks={"rank_time_us": (np.median(rank_s, axis=1) * 1e6).round(4).tolist(),
                                "rank_late_us": (np.median(late_s, axis=1) * 1e6).round(4).tolist()})
