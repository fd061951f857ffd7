"""Importers read real nccl-tests and OSU outputs into the results layout; bad files get one line
and exit 2."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commbench.analysis.importers import parse_nccl_tests, parse_osu
from commbench.errors import InputError
from conftest import DATA, commbench, load_run

SAMPLES = DATA / "osu"
NCCL_TEXT = DATA / "nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = DATA / "nccl_tests_all_gather.json"


def test_nccl_tests_text_real_output(tmp_path):
    commbench("import", "nccl-tests", NCCL_TEXT, "--out", tmp_path / "n", check_rc=0)
    rows, samples, meta = load_run(tmp_path / "n")
    assert len(rows) == 62 and set(rows.in_place) == {0, 1} and (rows.world_size == 16).all()
    assert (rows.collective == "all_reduce").all() and (rows.dtype == "float32").all() and (rows.wrong == 0).all()
    assert meta["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"] and meta["gpus"] == ["NVIDIA H100 80GB HBM3"]
    # our algbw/busbw from size and time match what nccl-tests printed (2 decimals)
    big = rows[(rows.size_bytes == 8589934592) & (rows.in_place == 0)].iloc[0]
    assert big.time_us == 47535 and abs(big.algbw_gbps - 180.71) < 0.01 and abs(big.busbw_gbps - 338.82) < 0.01
    assert len(samples) == 62


def test_nccl_tests_json_with_per_iteration_times(tmp_path):
    commbench("import", "nccl-tests", NCCL_JSON, "--out", tmp_path / "j", check_rc=0)
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
    commbench("import", "osu", f"{SAMPLES}/{name}", "-n", 4, "--out", tmp_path / "o", check_rc=0)
    rows, _, _ = load_run(tmp_path / "o")
    assert len(rows) == 21 and (rows.collective == collective).all()
    assert list(rows.size_bytes) == [s * scale for s in [4 << i for i in range(21)]]
    assert rows.time_us.iloc[0] > 0 and rows.wrong.isna().all()  # no validation column: unknown, not zero


def test_osu_full_validated(tmp_path):
    commbench("import", "osu", f"{SAMPLES}/osu_allreduce_4ranks_full_validated.txt", "-n", 4, "--out", tmp_path / "o",
              check_rc=0)
    rows, _, _ = load_run(tmp_path / "o")
    assert len(rows) == 19 and (rows.wrong == 0).all() and list(rows.iterations[:2]) == [1000, 1000]


BAD_FILES = [
    ("nccl-tests", "", "not nccl-tests output"),
    ("nccl-tests", "hello world\n", "not nccl-tests output"),
    ("nccl-tests", "#  Rank  0 Group  0 Pid 1 on h device  0 [0000:04:00] GPU\n8 2 float sum -1 1 0 0 0 1 0 0 0\n",
     "cannot tell which collective"),
    ("nccl-tests", "# all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on h device  0 [0000:04:00] GPU\n", "no result lines"),
    ("nccl-tests", "{\"results\": 3}", "not an nccl-tests JSON report"),
    ("nccl-tests", "{not json", "not an nccl-tests JSON report"),
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
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_binary_and_missing_files(tmp_path):
    binary = tmp_path / "bin"
    binary.write_bytes(bytes(range(256)) * 4)
    for path in (binary, tmp_path / "missing.txt"):
        proc = commbench("import", "nccl-tests", path)
        assert proc.returncode == 2 and "cannot read" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_osu_needs_the_rank_count(tmp_path):
    proc = commbench("import", "osu", f"{SAMPLES}/osu_allgather_4ranks.txt")
    assert proc.returncode == 2 and "give --nprocs" in proc.stderr


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
