"""The importers read the other six collectives (issue 36): nccl-tests' broadcast_perf (with its root
column), alltoall_perf and sendrecv_perf, and OSU's osu_bcast, osu_gather and osu_alltoall, whose
title has several words; every point filed under its own collective, never as all-reduce."""

import pytest

from commbench.analysis.importers import parse_nccl_tests, parse_osu


def _devices(n: int) -> str:
    return "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on node-1 device {r:2d} [0000:{0x18 + r:02x}:00] "
                   "NVIDIA H100 80GB HBM3\n" for r in range(n))


def _nccl(binary: str, op: str, root: str) -> str:
    return (f"# Collective test starting: {binary}\n# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 8(factor)\n#\n"
            f"# Using devices\n{_devices(4)}#\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            f"          32             8     float    {op}      {root}    10.64    0.00    0.00      0    10.41    0.00    0.00      0\n"
            f"         256            64     float    {op}      {root}    11.83    0.02    0.02      0    11.59    0.02    0.02      0\n")


@pytest.mark.parametrize("binary,collective,op,root,kept", [
    ("broadcast_perf", "broadcast", "none", "2", 2), ("reduce_perf", "reduce", "sum", "0", 0),
    ("alltoall_perf", "all_to_all", "none", "-1", None), ("sendrecv_perf", "send_recv", "none", "-1", None),
    ("gather_perf", "gather", "none", "3", 3), ("scatter_perf", "scatter", "none", "1", 1)])
def test_nccl_tests_of_every_collective(binary, collective, op, root, kept):
    imp = parse_nccl_tests(_nccl(binary, op, root), "x.txt")
    assert imp.collective == collective and imp.world == 4 and len(imp.points) == 4
    assert {p.get("root") for p in imp.points} == {kept}  # nccl-tests' -r, for the rooted ones


@pytest.mark.parametrize("title,collective,blocks", [("Broadcast", "broadcast", 1), ("Gather", "gather", 4),
                                                     ("Scatter", "scatter", 4), ("Reduce", "reduce", 1),
                                                     ("All-to-All Personalized Exchange", "all_to_all", 4)])
def test_osu_of_every_collective_it_has(title, collective, blocks):
    """OSU's Size of a gather, scatter and all-to-all is one rank's block (its message to or from each rank);
    commbench's size is the n blocks (an all-to-all's Size as the size gave 4x too little busbw)."""
    text = (f"\n# OSU MPI {title} Latency Test v7.3\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n"
            "1                       1.45\n2                       1.47\n1024                    3.90\n")
    imp = parse_osu(text, "osu.txt", world=4)
    assert imp.collective == collective and [p["size_bytes"] for p in imp.points] == [b * blocks for b in (1, 2, 1024)]


@pytest.mark.parametrize("title,dtype", [("Allreduce", "float32"), ("Reduce", "float32"),
                                         ("Reduce_scatter", "float32"), ("Allgather", "int8"), ("Broadcast", "int8")])
def test_osu_before_7_without_a_datatype_line(title, dtype):
    """OSU 5.x and 6.x print no Datatype line: their reductions sum floats (osu_allreduce's float buffers and
    MPI_FLOAT), the other tests move chars; a 4-byte float is one element, not four."""
    text = (f"\n# OSU MPI {title} Latency Test v5.6.3\n# Size       Avg Latency(us)\n"
            "4                       1.45\n8                       1.47\n1024                    3.90\n")
    imp = parse_osu(text, "osu.txt", world=2)
    assert {p["dtype"] for p in imp.points} == {dtype}
    assert imp.points[0]["count"] == (1 if dtype == "float32" else 4) * (2 if title == "Allgather" else 1)
