"""The importers strict by line (issue 43): a line that starts like a result must read as one, a second
run or test in one file is refused, never merged; lenient leaves unreadable result lines out and counts
them (a second run is refused all the same); the file is a regular file within its limit."""

from __future__ import annotations

import os

import pytest

from conftest import DATA
from commbench.analysis.importers import parse_nccl_tests, parse_osu, read_input
from commbench.errors import InputError

NCCL = (DATA / "nccl_tests_all_reduce_16xH100.txt").read_text()
OSU = (DATA / "osu" / "osu_allreduce_4ranks.txt").read_text()
ROW8 = ("           8             2     float     sum      -1    135.8    0.00    0.00      0"
        "    123.5    0.00    0.00      0")
LINE8 = NCCL.splitlines().index(ROW8) + 1


@pytest.mark.parametrize("size", ["-8", "0x10", "\uff18", "9" * 30, "1e3", "+8", ".8"])
def test_nccl_result_lines_that_do_not_read(size):
    text = NCCL.replace(ROW8, ROW8.replace("           8 ", f"{size:>12} ", 1))
    with pytest.raises(InputError, match=f"line {LINE8}: "):
        parse_nccl_tests(text, "f")
    lenient = parse_nccl_tests(text, "f", lenient=True)
    assert lenient.meta["skipped_lines"] == 1 and len(lenient.points) == len(parse_nccl_tests(NCCL).points) - 2


def test_nccl_a_second_run_is_refused_even_lenient():
    for text, why in ((NCCL * 2, "rank 0 listed again|a device list after the results|second '# nThread'"),
                      (NCCL.replace(ROW8, ROW8 + "\n" + ROW8), "measured again"),
                      (NCCL.replace("#  Rank  1 Group", "#  Rank  0 Group"), "rank 0 listed again")):
        for lenient in (False, True):
            with pytest.raises(InputError, match=why):
                parse_nccl_tests(text, "f", lenient=lenient)


def test_nccl_log_lines_are_left():
    text = NCCL.replace(ROW8, ROW8 + "\nnode-1:12:34 [0] NCCL INFO Init COMPLETE\n[1,0]<stderr>: warning")
    assert len(parse_nccl_tests(text).points) == len(parse_nccl_tests(NCCL).points)


@pytest.mark.parametrize("time", ["1e-320", "1e-7", "5e-324", "0.00004"])
def test_times_below_a_tenth_of_a_nanosecond(time):
    """(samples.csv keeps 1e-4 us: 0.00004 would be written as 0, which no reader takes)"""
    with pytest.raises(InputError, match="expected a time in µs from 0.0001"):
        parse_nccl_tests(NCCL.replace("135.8", time, 1), "f")
    with pytest.raises(InputError, match="line 5: Avg Latency"):
        parse_osu(OSU.replace("13.38", time, 1), "f", 4)


def test_nccl_json_huge_integer_and_repeats():
    import json
    doc = json.loads((DATA / "nccl_tests_all_gather.json").read_text())
    with pytest.raises(InputError, match="not an nccl-tests JSON report"):
        parse_nccl_tests(json.dumps(doc).replace('"size": 1024', '"size": ' + "9" * 5000, 1), "f")
    twice = dict(doc, results=doc["results"] + doc["results"][:1])
    with pytest.raises(InputError, match="result .*measured again"):
        parse_nccl_tests(json.dumps(twice), "f")
    devices = dict(doc, config=dict(doc["config"], devices=doc["config"]["devices"] * 2))
    with pytest.raises(InputError, match="rank 0 listed again"):
        parse_nccl_tests(json.dumps(devices), "f")


def test_osu_second_section_and_bad_lines():
    allgather = (DATA / "osu" / "osu_allgather_4ranks.txt").read_text()
    with pytest.raises(InputError, match="a second test's output"):
        parse_osu(OSU + allgather, "f", 4)
    with pytest.raises(InputError, match="line 5: Size is '-8'"):
        parse_osu(OSU.replace("4                        13.38", "-8      13.38"), "f", 4)
    lenient = parse_osu(OSU.replace("4                        13.38", "\uff18      13.38"), "f", 4, lenient=True)
    assert lenient.meta["skipped_lines"] == 1
    with pytest.raises(InputError, match="Size 4 measured again"):
        parse_osu(OSU + "4   1.0\n", "f", 4, lenient=True)
    assert len(parse_osu(OSU + "[node:1] help message\n", "f", 4).points) == len(parse_osu(OSU, "f", 4).points)


def test_special_and_large_files(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="not a regular file"):
        read_input(tmp_path / "fifo")  # refused, not waited on
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(2 << 20)
    monkeypatch.setenv("COMMBENCH_MAX_IMPORT_MB", "1")
    with pytest.raises(InputError, match="more than the limit of 1 MiB .*COMMBENCH_MAX_IMPORT_MB=4"):
        read_input(big)


def test_what_a_file_says_and_the_flags_must_agree():
    """Found by a hostile probe: each of these was imported (exit 0) with figures that were wrong or that
    every reader then refused."""
    import json
    with pytest.raises(InputError, match="the file is nccl-tests' all_reduce_perf, not all_gather"):
        parse_nccl_tests(NCCL, "f", "all_gather")  # (its busbw was all-gather's)
    assert parse_nccl_tests(NCCL, "f", "all_reduce").collective == "all_reduce"
    with pytest.raises(InputError, match=f"line {LINE8}: #wrong is '9007199254740993'"):  # past what a reader takes
        parse_nccl_tests(NCCL.replace(ROW8, ROW8[:-1] + "9007199254740993"), "f")
    with pytest.raises(InputError, match=f"line {LINE8}: type is 'foo': expected one of nccl-tests'"):
        parse_nccl_tests(NCCL.replace(ROW8, ROW8.replace("float", "  foo")), "f")
    assert {p["dtype"] for p in parse_nccl_tests(NCCL.replace(ROW8, ROW8.replace(" float", "uint32")), "f").points
            } == {"float32", "uint32"}  # nccl-tests' own types stay
    doc = (DATA / "nccl_tests_all_gather.json").read_text()
    with pytest.raises(InputError, match="key 'results' given twice"):
        parse_nccl_tests(doc.rstrip().rstrip("}") + ', "results": []}', "f")
    assert json.loads(doc)  # (the report itself reads)


def test_a_root_past_the_ranks_is_refused():
    text = (DATA / "nccl_tests_all_reduce_16xH100.txt").read_text().replace("all_reduce_perf", "broadcast_perf")
    row = ROW8.replace("sum      -1", "sum       3")
    assert parse_nccl_tests(text.replace(ROW8, row), "f").points[0]["root"] == 3
    with pytest.raises(InputError, match=f"line {LINE8}: root is '16'"):
        parse_nccl_tests(text.replace(ROW8, row.replace("       3", "      16")), "f")


@pytest.mark.parametrize("changes,message", [
    ([("# Datatype: MPI_CHAR.", "# Datatype: MPI_LONG.")], "Datatype MPI_LONG: expected one of MPI_CHAR"),
    ([("# Datatype: MPI_CHAR.", "# Datatype: MPI_FLOAT."), ("\n4    ", "\n6    ")],
     "line 5: Size 6 is not whole float32 elements"),
    ([("# Size         Avg Latency(us)", "# Size  Avg Latency(us)  Avg Latency(us)")], "names a column twice"),
])
def test_osu_header_and_types_must_fit_the_data(changes, message):
    text = OSU
    for change in changes:
        assert change[0] in text
        text = text.replace(*change, 1)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_osu(text, "f", 4)


def test_osu_min_avg_max_must_be_in_order():
    text = OSU.replace("# Size         Avg Latency(us)", "# Size  Avg Latency(us)  Min Latency(us)  Max Latency(us)")
    text = "\n".join(line + ("  1.00  9999.00" if line[:1].isdigit() else "") for line in text.splitlines())
    assert len(parse_osu(text, "f", 4).points) == text.count("  1.00  9999.00")
    with pytest.raises(InputError, match=r"Avg Latency\(us\) 13.38 is not between Min 14 and Max 9999"):
        parse_osu(text.replace("13.38  1.00", "13.38  14.00"), "f", 4)


def test_a_json_result_names_the_field_that_is_not_an_object():
    import json
    doc = json.loads((DATA / "nccl_tests_all_gather.json").read_text())
    doc["results"][0]["out_of_place_per_iter"] = [1, 2]
    with pytest.raises(InputError, match="result 1: out_of_place_per_iter is not an object"):
        parse_nccl_tests(json.dumps(doc), "f")
    doc["results"][0]["out_of_place"] = [1, 2]
    with pytest.raises(InputError, match="result 1: out_of_place is not an object"):
        parse_nccl_tests(json.dumps(doc), "f")
