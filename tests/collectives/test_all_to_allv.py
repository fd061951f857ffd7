"""The uneven all-to-all (issue 65): nccl-tests' alltoallv_perf traffic (its spread generator and its matrix
files), every block's placement checked, MPI's Alltoallv (timed by the C loop), gloo's all_to_all_single with
split sizes and the own pairwise exchange in real jobs, exact; its options refused where they mean nothing."""

import numpy as np
import pytest

from commbench.collectives import COLLECTIVES
from commbench.collectives.all_to_allv import layout
from commbench.collectives.patterns import Pattern, tile
from commbench.collectives.peer_traffic import MATRIX_ENV, SCALE_ENV, SPREAD_ENV, PeerTraffic, read_matrix
from commbench.dtypes import DTYPES
from commbench.errors import BAD_INPUT, OK, InputError
from commbench.spec import SweepSpec
from conftest import commbench, fault_env, load_run, needs_mpirun

F32 = DTYPES["float32"]
V = COLLECTIVES["all_to_allv"]


def test_the_spread_is_nccl_tests_formula():
    """4 ranks, 4 KB a rank: (1 - s) T/n + s d T/(n(n-1)/2), rounded down to 16 B (nccl-tests 2.19's
    AlltoAllvGetPeerBytesDistanceWeighted: 4096/6 = 682.7 -> 672; 0.5 x 1024 + 0.5 x 682.7 = 853.3 -> 848)."""
    assert PeerTraffic(0.0).peer_bytes(4096, 4, 4)[0].tolist() == [1024] * 4
    assert PeerTraffic(1.0).peer_bytes(4096, 4, 4)[0].tolist() == [0, 672, 1360, 2048]
    assert PeerTraffic(0.5).peer_bytes(4096, 4, 4)[0].tolist() == [512, 848, 1184, 1536]
    assert PeerTraffic(1.0).peer_bytes(4096, 4, 4)[1].tolist() == [2048, 0, 672, 1360]  # by distance ahead


@pytest.mark.parametrize("world", [2, 3, 5, 8])
@pytest.mark.parametrize("spread", [0.0, 0.3, 1.0])
def test_every_rank_sends_and_receives_the_same_total(world, spread):
    b = PeerTraffic(spread).peer_bytes(1 << 20, 4, world)
    assert len(set(b.sum(axis=0)) | set(b.sum(axis=1))) == 1
    assert (b % 16 == 0).all() and (b >= 0).all()
    counts = V.counts_for(1 << 20, 4, world, PeerTraffic(spread))
    assert counts.size_bytes == b.sum(axis=1).max() and counts.in_count == counts.out_count == counts.size_bytes // 4


def test_at_spread_zero_it_moves_the_bytes_of_the_even_all_to_all():
    for world in (2, 3, 4, 8):  # (blocks of whole 16 B: the alignment both tools give the uneven one)
        size = world * 4096
        even, uneven = COLLECTIVES["all_to_all"].counts(size, 4, world), V.counts_for(size, 4, world, PeerTraffic(0.0))
        assert even.size_bytes == uneven.size_bytes == size


def test_the_layout_is_mpi_alltoallvs_four_arrays():
    """Blocks packed in rank order: rank 1 of [[0, 2, 5], [1, 0, 4], [3, 6, 0]] (elements i -> j)."""
    assert layout(((0, 2, 5), (1, 0, 4), (3, 6, 0)), 1) == ([1, 0, 4], [0, 1, 1], [2, 0, 6], [0, 2, 2])


def test_a_matrix_beside_other_collectives_is_refused(tmp_path):
    matrix = tmp_path / "m.txt"
    matrix.write_text("0 32\n32 0\n")
    with pytest.raises(InputError, match="measure all_to_allv in a run of its own, not beside all_reduce"):
        SweepSpec.from_options(collective="all_reduce,all_to_allv", nprocs=2, backend="mpi", matrix=str(matrix))


def _simulate(counts, world, shift_rank=None):
    """Every rank's output as MPI_Alltoallv defines it, from the ranks' inputs; shift_rank: that rank's
    receive displacements off by one element (a misplaced block)."""
    p = Pattern(None, F32, world)
    outs = []
    for r in range(world):
        out = np.full(counts.out_count, float(F32.sentinel))
        _, _, got, at = layout(counts.peers, r)
        for q in range(world):
            sent, sent_at, _, _ = layout(counts.peers, q)
            block = tile(p.values(q), sent_at[r], sent[r])
            start = at[q] + (1 if r == shift_rank and q == 0 else 0)
            out[start:start + got[q]] = block[:len(out[start:start + got[q]])]
        outs.append(out)
    return p, outs


@pytest.mark.parametrize("traffic", [PeerTraffic(1.0), PeerTraffic(0.5),
                                     PeerTraffic(matrix=((0, 64, 0), (4096, 16, 0), (32, 0, 2048)))])
def test_expected_is_every_block_where_its_displacement_puts_it(traffic):
    world = 3
    counts = V.counts_for(40000, 4, world, traffic)
    p, outs = _simulate(counts, world)
    for r in range(world):
        assert np.array_equal(V.expected(p, r, counts, 0, counts.out_count), outs[r])
        assert np.array_equal(V.expected(p, r, counts, 5, 100), outs[r][5:105])  # a window
    _, shifted = _simulate(counts, world, shift_rank=1)
    assert not np.array_equal(V.expected(p, 1, counts, 0, counts.out_count), shifted[1])


def test_a_rank_past_its_own_total_expects_the_sentinel():
    """The buffers are as long as the busiest rank's: what lies past a rank's own blocks must stay untouched."""
    counts = V.counts_for(0, 4, 2, PeerTraffic(matrix=((0, 1024), (16, 0))))
    tail = V.expected(Pattern(None, F32, 2), 0, counts, 0, counts.out_count)[4:]
    assert len(tail) == 252 and (tail == F32.sentinel).all()


def test_a_matrix_file_is_read_scaled_and_aligned(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text("0 100 1e3\n  50 0 17\n\n8 9 4000.5\n")
    assert read_matrix(str(path), 1.0, 3) == [[0, 96, 992], [48, 0, 16], [0, 0, 4000]]
    assert read_matrix(str(path), 2.0, 2) == [[0, 192], [96, 0]]  # the first rows and columns


@pytest.mark.parametrize("text,why", [("1 2\n3\n", "not square"), ("1 -2 0\n3 4 0\n0 0 0\n", "row 1, column 2"),
                                      ("1 2 3\n3 4 x\n0 0 0\n", "row 2, column 3 is 'x'"), ("", "is empty"),
                                      ("1 2\n3 4\n", "is 2 x 2: the run has 3 ranks"),
                                      ("1 nan 1\n1 1 1\n1 1 1\n", "row 1, column 2")])
def test_a_bad_matrix_is_one_line(tmp_path, text, why):
    path = tmp_path / "m.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=why):
        read_matrix(str(path), 1.0, 3)
    path.write_bytes(b"\xff\x00 1")
    with pytest.raises(InputError, match="not text"):
        read_matrix(str(path), 1.0, 1)


def test_the_spec_records_the_traffic_and_refuses_what_means_nothing(tmp_path, monkeypatch):
    for name in (SPREAD_ENV, MATRIX_ENV, SCALE_ENV):
        monkeypatch.delenv(name, raising=False)
    spec = SweepSpec.from_options(collective="all_to_allv", nprocs=4, backend="mpi")
    assert spec.spread == 1.0 and spec.in_place == [False, True] and spec.modes_of("all_to_allv") == [False]
    monkeypatch.setenv(SPREAD_ENV, "0.25")  # nccl-tests' variable stands for the option not given
    assert SweepSpec.from_options(collective="all_to_allv", nprocs=4, backend="mpi").spread == 0.25
    assert SweepSpec.from_options(collective="all_to_allv", nprocs=4, backend="mpi", spread=0.0).spread == 0.0
    matrix = tmp_path / "m.txt"
    matrix.write_text("0 32\n4096 0\n")
    spec = SweepSpec.from_options(collective="all_to_allv", nprocs=2, backend="mpi", matrix=str(matrix),
                                  matrix_scale=0.5)
    assert spec.peer_bytes == [[0, 16], [2048, 0]] and spec.sizes == [2048] and spec.spread is None
    matrix.unlink()  # recorded: the spec needs the file no more
    again = SweepSpec.from_json(spec.to_json()).validate()
    assert again.peer_traffic() == spec.peer_traffic() and again.sizes == [2048]
    for bad, why in [(dict(collective="all_reduce", spread=0.5), "add -c all_to_allv"),
                     (dict(collective="all_to_allv", spread=1.5), "invalid --spread"),
                     (dict(collective="all_to_allv", spread=0.5, matrix="x"), "give one"),
                     (dict(collective="all_to_allv", matrix_scale=2.0), "scales a --matrix"),
                     (dict(collective="all_to_allv", mode="in-place"), "no in-place form")]:
        with pytest.raises(InputError, match=why):
            SweepSpec.from_options(nprocs=2, backend="mpi", **bad)
    monkeypatch.setenv(SPREAD_ENV, "lots")
    with pytest.raises(InputError, match=f"{SPREAD_ENV}='lots' is not a number"):
        SweepSpec.from_options(collective="all_to_allv", nprocs=2, backend="mpi")


def test_the_cli_refuses_sizes_beside_a_matrix(tmp_path):
    (tmp_path / "m.txt").write_text("0 32\n32 0\n")
    proc = commbench("run", "-c", "all_to_allv", "--matrix", tmp_path / "m.txt", "-e", "1M", check_rc=BAD_INPUT)
    assert proc.stderr.count("\n") == 1 and "--matrix sets every block's bytes" in proc.stderr


def _checked(rows, world, traffic, sizes):
    assert (rows.wrong == 0).all() and len(rows) > 0, rows
    assert not rows.in_place.any()
    planned = {(c.size_bytes, c.count) for c in (V.counts_for(s, 4, world, traffic) for s in sizes)}
    for r in rows.to_dict("records"):
        assert (r["size_bytes"], r["count"]) in planned
        assert np.isclose(r["busbw_gbps"], r["algbw_gbps"] * (world - 1) / world, rtol=1e-9)


MATRIX_WITH_ZEROS = "0 0 4096 16\n0 0 0 0\n512 0 0 48\n1024 32 0 0\n"  # rank 1 sends nothing, rank 3 gets 64 B


@needs_mpirun
@pytest.mark.parametrize("backend,world,traffic", [
    pytest.param("mpi", 3, "0.5", marks=pytest.mark.smoke), ("mpi", 2, "0"), ("mpi", 4, "1"), ("mpi", 4, "matrix"),
    ("mpi", 8, "0.5"), ("gloo", 2, "1"), ("gloo", 3, "0"), ("gloo", 4, "matrix"), ("gloo", 4, "0.5")])
def test_all_to_allv_exact_in_jobs(job, tmp_path, backend, world, traffic):
    if backend == "gloo":
        pytest.importorskip("torch")
    out = tmp_path / "run"
    if traffic == "matrix":
        (tmp_path / "m.txt").write_text(MATRIX_WITH_ZEROS)
        shape, given = PeerTraffic(matrix=tuple(map(tuple, read_matrix(str(tmp_path / "m.txt"), 1.0, world)))), \
            ["--matrix", tmp_path / "m.txt"]
        sizes = [1]
    else:
        shape, given = PeerTraffic(float(traffic)), ["--spread", traffic, "--sizes", "100,4100,70000"]
        sizes = [100, 4100, 70000]
    job("run", "-n", world, "--backend", backend, "-c", "all_to_allv", "-a", "native,pairwise", *given,
        "--iters", 3, "-w", 1, "--out", out, "--quiet", check_rc=OK)
    rows, _, meta = load_run(out)
    _checked(rows, world, shape, sizes)
    assert set(rows.algorithm) == {"native", "pairwise"}
    if backend == "mpi":
        assert set(rows[rows.algorithm == "native"].timer) == {"native"}  # MPI_Alltoallv in the C loop
    assert meta["spec"]["spread"] == (None if traffic == "matrix" else float(traffic))


@needs_mpirun
def test_a_misplaced_element_is_caught(job, tmp_path):
    out = tmp_path / "run"
    proc = job("run", "-n", 2, "--backend", "mpi", "-c", "all_to_allv", "--spread", "1", "--sizes", "4096",
               "--iters", 2, "-w", 1, "--out", out, "--quiet", env=fault_env(wrong=1))
    assert proc.returncode != OK
    rows, _, _ = load_run(out)
    assert (rows.wrong > 0).all()


def test_nccl_tests_alltoallv_perf_is_imported_as_the_uneven_all_to_all():
    from commbench.analysis.importers import parse_nccl_tests

    devices = "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on node-1 device {r:2d} [0000:{0x18 + r:02x}:00] "
                      "NVIDIA H100 80GB HBM3\n" for r in range(4))
    text = ("# Collective test starting: alltoallv_perf\n# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 2(factor)\n"
            f"#\n# Using devices\n{devices}#\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "        1008            64     float    none      -1    20.10    0.05    0.04      0    20.00    0.05    0.04    N/A\n"
            "        2040           128     float    none      -1    21.00    0.10    0.07      0    21.00    0.10    0.07    N/A\n")
    imp = parse_nccl_tests(text, "x.txt")
    assert imp.collective == "all_to_allv" and imp.world == 4
    assert [p["size_bytes"] for p in imp.points if not p["in_place"]] == [1008, 2040]
