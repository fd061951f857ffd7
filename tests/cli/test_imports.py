"""`commbench import nccl-tests|osu` (commbench/cli/imports.py), in-process: the folder checked
before the file is read (_out_folder: a new run id, results/<id>-<tool> by default, never a folder
already holding results), the collective named up front, the label defaulting to the tool, the line
saying what was imported where; the loader reads what was written. (The parsers' own cases:
tests/analysis/test_importers.py; hostile inputs: tests/analysis/test_importers_hostile.py.)"""

import re

import pytest

from cli_inprocess import run_cli
from conftest import DATA

from commbench.folder.load import load_run
from commbench.cli.imports import _out_folder
from commbench.collectives import COLLECTIVES
from commbench.errors import BAD_INPUT, InputError, OK
from commbench.folder.outputs import READ_FILES

NCCL_TEXT = DATA / "nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = DATA / "nccl_tests_all_gather.json"
OSU_GATHER = DATA / "osu" / "osu_allgather_4ranks.txt"
RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")


def test_out_folder_defaults_under_results_with_a_new_run_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_id, folder = _out_folder(None, "osu")
    assert RUN_ID.match(run_id) and folder == f"results/{run_id}-osu"
    assert _out_folder(None, "osu")[0] != run_id  # a new id each time
    assert _out_folder(str(tmp_path / "new" / "deeper"), "osu")[1] == str(tmp_path / "new" / "deeper")
    assert not (tmp_path / "results").exists() and not (tmp_path / "new").exists()  # checked, not made


@pytest.mark.parametrize("name", READ_FILES)
def test_out_folder_refuses_a_folder_holding_what_readers_read(tmp_path, name):
    (tmp_path / name).write_text("")
    with pytest.raises(InputError, match=rf"^--out '{re.escape(str(tmp_path))}' already holds results "
                                         rf"\({re.escape(name)}\); choose another --out$"):
        _out_folder(str(tmp_path), "nccl-tests")


def test_an_nccl_tests_text_import(tmp_path):
    out = tmp_path / "imp"
    outcome = run_cli("import", "nccl-tests", NCCL_TEXT, "--out", out)
    assert outcome.code == OK and outcome.stdout == ""
    assert outcome.stderr == f"imported 62 points (all_reduce, 16 ranks) into {out}\n"
    rows, meta = load_run(out)
    assert len(rows) == 62 and set(rows.collective) == {"all_reduce"} and set(rows.world_size) == {16}
    assert set(rows.backend) == {"nccl"} and set(rows.algorithm) == {"native"} and set(rows.device) == {"cuda"}
    assert (meta["label"], meta["imported_from"], meta["source_file"]) == ("nccl-tests", "nccl-tests", str(NCCL_TEXT))
    assert RUN_ID.match(meta["run_id"]) and set(rows.run_id) == {meta["run_id"]}
    assert (meta["status"], meta["points_measured"]) == ("completed", 62)


@pytest.mark.parametrize("broken", [0, 1])
def test_a_lenient_import_records_the_lines_it_left_out(tmp_path, broken):
    """--lenient: run.json's skipped_lines counts the result lines left out (0 where none was), and the
    closing line says so where any was."""
    text = NCCL_TEXT.read_text()
    row = next(line for line in text.splitlines() if line.lstrip().startswith("8 "))
    source = tmp_path / "nccl.txt"
    source.write_text(text.replace(row, row.replace(" 8 ", " -8 ", 1)) if broken else text)
    out = tmp_path / "imp"
    outcome = run_cli("import", "nccl-tests", source, "--lenient", "--out", out)
    assert outcome.code == OK, outcome.stderr
    rows, meta = load_run(out)
    assert meta["skipped_lines"] == broken and meta["status"] == "completed" and len(rows) == 62 - 2 * broken
    assert ("left out 1 result line(s)" in outcome.stderr) == bool(broken)


def test_an_osu_import_with_a_label(tmp_path):
    out = tmp_path / "imp"
    outcome = run_cli("import", "osu", OSU_GATHER, "-n", "4", "--out", out, "--label", "cluster A")
    assert outcome.code == OK and outcome.stderr == f"imported 21 points (all_gather, 4 ranks) into {out}\n"
    rows, meta = load_run(out)
    assert meta["label"] == "cluster A" and set(rows.label) == {"cluster A"} and meta["imported_from"] == "osu"
    assert set(rows.device) == {"cpu"} and meta["world_size"] == 4


def test_the_default_folder_is_under_results_here(tmp_path):
    outcome = run_cli("import", "nccl-tests", NCCL_JSON, cwd=tmp_path)
    assert outcome.code == OK
    folder = outcome.stderr.rsplit(" into ", 1)[1].strip()
    assert re.match(r"^results/\d{8}T\d{6}Z-[0-9a-f]{6}-nccl-tests$", folder)
    rows, meta = load_run(tmp_path / folder)
    assert len(rows) == 6 and set(rows.collective) == {"all_gather"} and folder.endswith(f"{meta['run_id']}-nccl-tests")


def test_the_collective_is_checked_before_the_file_is_read(tmp_path):
    outcome = run_cli("import", "nccl-tests", tmp_path / "no-such-file", "--collective", "alltoallw",
                      "--out", tmp_path / "imp")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and outcome.stderr.startswith(
        "commbench: error: unknown collective 'alltoallw' (accepted: all_reduce, all_gather, reduce_scatter, "
        "all_to_all, all_to_allv, broadcast, gather, reduce, scatter, send_recv)")
    assert not (tmp_path / "imp").exists()


def test_the_folder_is_checked_before_the_file_is_read(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "results.csv").write_text("x\n")
    outcome = run_cli("import", "osu", tmp_path / "no-such-file", "-n", "4", "--out", tmp_path / "taken")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "already holds results (results.csv)" in outcome.stderr
    assert (tmp_path / "taken" / "results.csv").read_text() == "x\n"


def test_a_missing_file_is_one_line_and_no_folder(tmp_path):
    outcome = run_cli("import", "nccl-tests", tmp_path / "missing.txt", "--out", tmp_path / "imp")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "missing.txt" in outcome.stderr and not (tmp_path / "imp").exists()


def test_the_help_names_what_each_tool_imports():
    nccl = run_cli("import", "nccl-tests", "--help")
    osu = run_cli("import", "osu", "--help")
    assert nccl.code == osu.code == OK
    flat = " ".join(nccl.stdout.split())
    assert all(name in flat for name in COLLECTIVES) and " or send_recv" in flat
    assert all(name in " ".join(osu.stdout.split()) for name in ("osu_allreduce", "osu_allgather", "osu_reduce_scatter",
                                                                  "osu_bcast", "osu_alltoall", "osu_gather"))


@pytest.mark.parametrize("args,message", [(["--label", "x" * 300], "--label is 300 characters long; at most 256"),
                                          (["--out", " "], "--out: an empty folder name")])
def test_import_checks_its_label_and_folder_as_run_does(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    outcome = run_cli("import", "nccl-tests", NCCL_TEXT, *args)
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and not list(tmp_path.iterdir())  # nothing written, not even results/
