"""Importers read real nccl-tests and OSU outputs into the results layout; bad files get one line
and exit 2."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commbench.analysis.importers import parse_nccl_tests, parse_osu
from commbench.errors import BAD_INPUT, InputError, OK
from conftest import DATA, commbench, load_run

SAMPLES = DATA / "osu"
NCCL_TEXT = DATA / "nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = DATA / "nccl_tests_all_gather.json"


def test_nccl_tests_text_real_output(tmp_path):
    commbench("import", "nccl-tests", NCCL_TEXT, "--out", tmp_path / "n", check_rc=OK)
    rows, samples, meta = load_run(tmp_path / "n")
    assert len(rows) == 62 and set(rows.in_place) == {0, 1} and (rows.world_size == 16).all()
    assert (rows.collective == "all_reduce").all() and (rows.dtype == "float32").all() and (rows.wrong == 0).all()
    assert meta["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"] and meta["gpus"] == ["NVIDIA H100 80GB HBM3"]
    # our algbw/busbw from size and time match what nccl-tests printed (2 decimals)
    big = rows[(rows.size_bytes == 8589934592) & (rows.in_place == 0)].iloc[0]
    assert big.time_us == 47535 and abs(big.algbw_gbps - 180.71) < 0.01 and abs(big.busbw_gbps - 338.82) < 0.01
    assert len(samples) == 62


def test_nccl_tests_json_with_per_iteration_times(tmp_path):
    commbench("import", "nccl-tests", NCCL_JSON, "--out", tmp_path / "j", check_rc=OK)
    rows, samples, meta = load_run(tmp_path / "j")
    assert len(rows) == 6 and (rows.collective == "all_gather").all() and (rows.world_size == 2).all()
    assert (rows.samples == 5).all() and len(samples) == 30
    doc = json.loads(open(NCCL_JSON).read())
    first = doc["results"][0]
    row = rows[(rows.size_bytes == first["size"]) & (rows.in_place == 0)].iloc[0]
    assert row.time_us == pytest.approx(np.median(first["out_of_place_per_iter"]["times_us"]))
    assert meta["nccl_version"] == 22703


@pytest.mark.parametrize("name,collective,scale", [("osu_allreduce_4ranks.txt", "all_reduce", 1),
                                                   ("osu_allgather_4ranks.txt", "all_gather", 4),
                                                   ("osu_reduce_scatter_4ranks.txt", "reduce_scatter", 1)])
def test_osu_samples(tmp_path, name, collective, scale):
    commbench("import", "osu", f"{SAMPLES}/{name}", "-n", 4, "--out", tmp_path / "o", check_rc=OK)
    rows, _, _ = load_run(tmp_path / "o")
    assert len(rows) == 21 and (rows.collective == collective).all()
    assert list(rows.size_bytes) == [s * scale for s in [4 << i for i in range(21)]]
    assert rows.time_us.iloc[0] > 0 and rows.wrong.isna().all()  # no validation column: unknown, not zero


def test_osu_full_validated(tmp_path):
    commbench("import", "osu", f"{SAMPLES}/osu_allreduce_4ranks_full_validated.txt", "-n", 4, "--out", tmp_path / "o",
              check_rc=OK)
    rows, _, _ = load_run(tmp_path / "o")
    assert len(rows) == 19 and (rows.wrong == 0).all() and list(rows.iterations[:2]) == [1000, 1000]


def _devices(n: int, group: bool = True) -> str:
    return "".join(f"#  Rank {r:2d} {'Group  0 ' if group else ''}Pid {40211 + r:6d} on gpu-node-1 device {r:2d} "
                   f"[0000:{0x18 + r:02x}:00] NVIDIA H100 80GB HBM3\n" for r in range(n))


# nccl-tests 2.13+, all_gather_perf -b 8 -e 512 -f 4 on 4 ranks: -b below ranks x 4 B prints a line of size 0
ALL_GATHER_WITH_SIZE_0 = f"""# nccl-tests version 2.14.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_gather_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 512 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
{_devices(4)}#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           0             0     float    none      -1     0.17    0.00    0.00      0     0.16    0.00    0.00      0
          32             2     float    none      -1    10.64    0.00    0.00      0    10.41    0.00    0.00      0
         128             8     float    none      -1    10.83    0.01    0.01      0    10.59    0.01    0.01  1e+06
         512            32     float    none      -1    10.92    0.05    0.04      0    10.71    0.05    0.04    N/A
# Out of bounds values : 1000000 FAILED
# Avg bus bandwidth    : 0.0125
#
"""

# Older nccl-tests (device lines without Group, an `error` column printed "%5.0le": the largest
# |result - expected|, out of bounds above DeltaMaxValue(type) x (ranks - 1), 1e-5 x 3 for float here)
ALL_REDUCE_ERROR_COLUMN = f"""# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 8(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
{_devices(4, group=False).replace("#  Rank", "#   Rank")}#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    14.52    0.00    0.00  0e+00    14.38    0.00    0.00  0e+00
          64            16   float     sum    14.47    0.00    0.01  0e+00    14.41    0.00    0.01  0e+00
         512           128   float     sum    14.96    0.03    0.05  6e-08    14.90    0.03    0.05  6e-08
        4096          1024   float     sum    16.21    0.25    0.38  1e-07    16.02    0.26    0.38  2e-05
       32768          8192   float     sum    19.77    1.66    2.49  1e-07    19.52    1.68    2.52  4e-05
      262144         65536   float     sum    30.04    8.73   13.09  1e-07    29.81    8.79   13.19  1e-07
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : 2.69436
#
"""

# The older all_gather_perf printed neither redop nor root, and size-0 lines as well
OLD_ALL_GATHER = f"""# nThread 1 nGpus 4 minBytes 8 maxBytes 128 step: 4(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
{_devices(4, group=False).replace("#  Rank", "#   Rank")}#
#                                             out-of-place                       in-place
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           0             0   float     0.14    0.00    0.00  0e+00     0.13    0.00    0.00  0e+00
          32             2   float    12.80    0.00    0.00  0e+00    12.62    0.00    0.00  0e+00
         128             8   float    12.91    0.01    0.01  0e+00    12.70    0.01    0.01    N/A
"""


def test_nccl_tests_lines_of_size_0_are_left_out(tmp_path):
    """all_gather/reduce_scatter/alltoall print size 0 where -b < ranks x element size: it measured
    nothing, the rest imports (#wrong as nccl-tests prints it: a count, "%5g" past 1e6, or N/A)."""
    imp = parse_nccl_tests(ALL_GATHER_WITH_SIZE_0, "ag.txt")
    assert imp.collective == "all_gather" and imp.world == 4 and imp.meta["nccl_tests_version"] == "2.14.1"
    assert [(p["size_bytes"], p["count"], p["op"], p["in_place"], p["wrong"]) for p in imp.points] == [
        (32, 2, "none", 0, 0), (32, 2, "none", 1, 0), (128, 8, "none", 0, 0), (128, 8, "none", 1, 10**6),
        (512, 32, "none", 0, 0), (512, 32, "none", 1, None)]
    f = tmp_path / "ag.txt"
    f.write_text(ALL_GATHER_WITH_SIZE_0)
    commbench("import", "nccl-tests", f, "--out", tmp_path / "o", check_rc=OK)
    rows, _, meta = load_run(tmp_path / "o")
    assert list(rows.size_bytes) == [32, 32, 128, 128, 512, 512] and meta["wrong_total"] == 10**6
    only_zero = "".join(line for line in ALL_GATHER_WITH_SIZE_0.splitlines(keepends=True)
                        if not line.strip()[:1].isdigit() or line.split()[0] == "0")
    with pytest.raises(InputError, match=r"no result lines .*\(only 1 of size 0, which measure nothing\)"):
        parse_nccl_tests(only_zero, "ag.txt")


def test_nccl_tests_json_results_of_size_0_are_left_out():
    doc = json.loads(NCCL_JSON.read_text())
    doc["results"].insert(0, {**doc["results"][0], "size": 0, "count": 0})
    imp = parse_nccl_tests(json.dumps(doc), "ag.json")
    assert len(imp.points) == 6 and min(p["size_bytes"] for p in imp.points) == 1024


def test_nccl_tests_older_error_column(tmp_path):
    """The `error` column of older nccl-tests is read as checked: within nccl-tests' tolerance for
    the type and ranks 0 wrong, beyond it 1 (the count is not printed)."""
    imp = parse_nccl_tests(ALL_REDUCE_ERROR_COLUMN, "old.txt", "all_reduce")
    assert imp.world == 4 and imp.meta["hosts"] == ["gpu-node-1"] and len(imp.points) == 12
    assert [p["wrong"] for p in imp.points] == [0] * 9 + [1] + [0] * 2  # 4e-05 > 1e-5 x 3; 2e-05 within
    assert {p["dtype"] for p in imp.points} == {"float32"} and {p["op"] for p in imp.points} == {"sum"}
    f = tmp_path / "old.txt"
    f.write_text(ALL_REDUCE_ERROR_COLUMN)
    commbench("import", "nccl-tests", f, "--collective", "all_reduce", "--out", tmp_path / "o", check_rc=OK)
    rows, _, meta = load_run(tmp_path / "o")
    assert len(rows) == 12 and rows.wrong.sum() == 1 and meta["wrong_total"] == 1
    # integer types: any difference is out of bounds (DeltaMaxValue 1e-200)
    ints = ALL_REDUCE_ERROR_COLUMN.replace("   float ", "   int32 ").replace("6e-08", "1e+00")
    assert [p["wrong"] for p in parse_nccl_tests(ints, "old.txt", "all_reduce").points][4:6] == [1, 1]


def test_nccl_tests_older_all_gather_without_redop_and_root():
    imp = parse_nccl_tests(OLD_ALL_GATHER, "old.txt", "all_gather")
    assert [(p["size_bytes"], p["count"], p["op"], p["wrong"]) for p in imp.points] == [
        (32, 2, "none", 0), (32, 2, "none", 0), (128, 8, "none", 0), (128, 8, "none", None)]


BAD_FILES = [
    ("nccl-tests", "", "not nccl-tests output"),
    ("nccl-tests", "hello world\n", "not nccl-tests output"),
    ("nccl-tests", "#  Rank  0 Group  0 Pid 1 on h device  0 [0000:04:00] GPU\n8 2 float sum -1 1 0 0 0 1 0 0 0\n",
     "cannot tell which collective"),
    ("nccl-tests", "# all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on h device  0 [0000:04:00] GPU\n", "no result lines"),
    ("nccl-tests", "{\"results\": 3}", "not an nccl-tests JSON report"),
    ("nccl-tests", "{not json", "not an nccl-tests JSON report"),
    ("nccl-tests", "[{\"results\": []}]\n", "not an nccl-tests JSON report (TypeError: its top level is not the "
                                            "report's object)"),  # (was read as text: "no '#  Rank N' lines")
    ("nccl-tests", json.dumps({"args": ["all_reduce_perf"], "config": {"devices": []}, "results": []}), "lists no devices"),
    ("nccl-tests", json.dumps({"args": ["all_reduce_perf"], "config": {"devices": [{}]},
                               "results": [{"size": 8, "out_of_place": {"time": 1}}]}), "result 1: type is missing"),
    ("osu", "", "not OSU"),
    ("osu", "# OSU MPI Bcast Latency Test\n", "not OSU"),
    ("osu", "# OSU MPI Allreduce Latency Test\n# Size  Avg Latency(us)\n4 1.0 2.0 3.0\n", "does not match the header"),
    ("osu", "# OSU MPI Allreduce Latency Test\n# Size  Avg Latency(us)\n", "no result lines"),
]


@pytest.mark.parametrize("kind,content,message", BAD_FILES)
def test_malformed_import_files(tmp_path, kind, content, message):
    f = tmp_path / "input.txt"
    f.write_text(content)
    extra = ["-n", "4"] if kind == "osu" else []
    proc = commbench("import", kind, f, *extra, "--out", tmp_path / "o")
    assert proc.returncode == BAD_INPUT and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_binary_and_missing_files(tmp_path):
    binary = tmp_path / "bin"
    binary.write_bytes(bytes(range(256)) * 4)
    for path in (binary, tmp_path / "missing.txt"):
        proc = commbench("import", "nccl-tests", path)
        assert proc.returncode == BAD_INPUT and "cannot read" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_osu_needs_the_rank_count(tmp_path):
    proc = commbench("import", "osu", f"{SAMPLES}/osu_allgather_4ranks.txt")
    assert proc.returncode == BAD_INPUT and "give --nprocs" in proc.stderr


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.sampled_from(["nccl", "osu"]))
def test_any_text_parses_or_is_one_input_error(text, kind):
    try:
        imp = parse_nccl_tests(text, "f") if kind == "nccl" else parse_osu(text, "f", 4)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert imp.points


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 60), st.integers(0, 200))
def test_truncated_real_outputs(cut_lines, cut_chars):
    """A real output cut anywhere: parsed (what is complete) or one InputError."""
    lines = open(NCCL_TEXT).read().splitlines(keepends=True)
    text = "".join(lines[:cut_lines])
    text = text[:max(0, len(text) - cut_chars)]
    try:
        imp = parse_nccl_tests(text, "f")
    except InputError:
        return
    assert all(p["size_bytes"] > 0 for p in imp.points)
