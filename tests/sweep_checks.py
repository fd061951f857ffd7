"""Assertions every real sweep must pass: exact results, nccl-tests formulas, complete files."""

import numpy as np

from commbench.dtypes import DTYPES
from commbench.collectives import COLLECTIVES

ROW_COLUMNS = ["run_id", "label", "collective", "backend", "algorithm", "device", "dtype", "op", "in_place",
               "world_size", "nodes", "ranks_per_node", "size_bytes", "count", "iterations", "samples", "batch", "time_us",
               "time_us_mean", "time_us_min", "time_us_p95", "time_us_p99", "time_us_max", "algbw_gbps",
               "busbw_gbps", "wrong", "timestamp"]


def points_measured(collective: str, dtype: str, sizes, world: int) -> int:
    """How many of the sizes a sweep measures for one collective and dtype over `world` ranks: those of
    at least one element per rank, each size they round to once (8 and 12 B of float32 all-gather over
    2 ranks are one point of 8 B; the other is skipped, naming it)."""
    counts = {COLLECTIVES[collective].counts(int(s), DTYPES[dtype].itemsize, world) for s in sizes}
    return sum(c.size_bytes > 0 for c in counts)


def check_sweep(rows, samples, meta, world, expected_points):
    assert list(rows.columns[:3]) == ["run_id", "label", "point"]
    assert set(ROW_COLUMNS) <= set(rows.columns)
    assert len(rows) == expected_points
    assert (rows.wrong == 0).all(), rows[rows.wrong != 0]
    assert (rows.world_size == world).all()
    for r in rows.to_dict("records"):
        coll = COLLECTIVES[r["collective"]]
        assert r["count"] * DTYPES[r["dtype"]].itemsize == r["size_bytes"] > 0
        counts = coll.counts(r["size_bytes"], DTYPES[r["dtype"]].itemsize, world)  # the collective's own sizing
        assert (counts.count, counts.size_bytes) == (r["count"], r["size_bytes"])
        algbw = r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9
        assert np.isclose(r["algbw_gbps"], algbw, rtol=1e-9)
        assert np.isclose(r["busbw_gbps"], algbw * coll.bus_factor(world), rtol=1e-9)
        assert r["time_us_min"] <= r["time_us"] <= r["time_us_max"]
        assert r["time_us_min"] <= r["time_us_p95"] <= r["time_us_p99"] <= r["time_us_max"]
    # every row's per-iteration samples are kept, and its headline time is their median
    per_point = samples.groupby("point").time_us
    assert dict(per_point.size()) == dict(zip(rows.point, rows.samples))
    assert (rows.iterations == rows.samples * rows.batch).all()
    medians = per_point.median()
    # samples are kept to 1e-4 us (a kernel's call is ~0.2 us): the medians agree to that
    assert np.allclose(rows.set_index("point").time_us, medians.loc[rows.point], rtol=1e-4, atol=1e-4)
    assert meta["status"] == "completed" and meta["world_size"] == world
    assert meta["points_measured"] == expected_points and meta["wrong_total"] == 0
    for key in ("python", "commbench", "numpy", "platform"):
        assert meta["versions"][key]
    check_efficiency(rows, meta)
    assert meta["command_line"] and meta["start_time"] and meta["end_time"] and meta["ranks"]


def check_efficiency(rows, meta):
    """Every point read against its machine's floors (commbench.kernels.floor): one node on the CPU,
    the exchange floor's time over the point's and busbw over one core's copy rate; across nodes
    (the floors are a node's) and at one rank (nothing crosses) empty."""
    floors = meta["floors"]
    host = meta["ranks"][0]["hostname"]
    assert isinstance(floors.get(host), dict), floors
    mine = floors[host]
    assert mine["exchange_us"] > 0 and mine["handoff_us"] > 0 and mine["copy_GBps"] > 0
    single = (rows.nodes == 1) & (rows.device == "cpu") & (rows.world_size > 1)
    assert np.allclose(rows.latency_efficiency[single], mine["exchange_us"] / rows.time_us[single], rtol=1e-3)
    assert np.allclose(rows.bandwidth_efficiency[single], rows.busbw_gbps[single] / mine["copy_GBps"], rtol=1e-3,
                       atol=1e-9)
    apart = (rows.nodes > 1) | (rows.world_size == 1)
    assert rows.latency_efficiency[apart].isna().all() and rows.bandwidth_efficiency[rows.world_size == 1].isna().all()
