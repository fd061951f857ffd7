"""Output folders that readers would not find whole are refused up front (issue 20): `run --out`
and `sweep --out` must be usable folders outside any run folder, and `sweep --resume` checks every
run before anything starts. The launch is replaced by a sentinel (tests/folder_fixtures.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT
from folder_fixtures import LAUNCHED, files, folder, make_folder, no_launch  # noqa: F401


RUN = ("run", "-n", "2", "--backend", "mpi", "--sizes", "8", "--iters", "2", "--quiet")


def test_run_out_must_be_a_usable_folder_readers_find(folder, tmp_path, no_launch):
    (tmp_path / "file").write_text("x")
    sweep = tmp_path / "sweep"
    make_folder(sweep / "one")
    for out, fragment in [
        ("/proc/commbench-nope", "cannot be written"),
        (tmp_path / "file" / "sub", "which is a file"),
        (tmp_path / "file", "is a file, not a folder"),
        (folder / "sub", f"is inside the run folder {str(folder)!r}, where report and compare would not see it"),
        (sweep, f"holds run folders ({str(sweep / 'one')!r}): a run's results there would hide them"),
        (folder, "already holds results"),
    ]:
        before = files(tmp_path)
        outcome = run_cli(*RUN, "--out", out)
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and fragment in outcome.stderr, outcome.stderr
        assert files(tmp_path) == before and no_launch == []
    # a new run beside the sweep's runs is one more run of the sweep: allowed
    outcome = run_cli(*RUN, "--out", sweep / "two")
    assert LAUNCHED in outcome.stderr


def _suite(tmp_path, label="one") -> Path:
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: tiny\ndefaults: {nprocs: 2, sizes: [8], iters: 2, collective: all_reduce, backend: mpi}\n"
                     f"runs:\n  - {{label: {label}}}\n")
    return suite


def test_sweep_out_must_not_be_or_be_inside_a_run_folder(folder, tmp_path, no_launch):
    suite = _suite(tmp_path)
    for out, fragment in [(folder, "is a run folder: a sweep needs a folder of its own"),
                          (folder / "sweep", "is inside the run folder"),
                          ("/proc/commbench-nope", "cannot be written")]:
        before = files(tmp_path)
        outcome = run_cli("sweep", suite, "--out", out, "--quiet")
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and fragment in outcome.stderr, outcome.stderr
        assert files(tmp_path) == before


def test_sweep_resume_checks_every_run_before_anything_starts(tmp_path, no_launch):
    suite = _suite(tmp_path)
    sweep = tmp_path / "sweep"
    d = make_folder(sweep / "one")
    shutil.copyfile(suite, sweep / "suite.yaml")
    (d / "run.json").write_text((d / "run.json").read_text()[:150])  # truncated
    before = files(tmp_path)
    outcome = run_cli("sweep", suite, "--out", sweep, "--resume", "--quiet")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "run 'one': " in outcome.stderr and "unreadable run.json" in outcome.stderr
    assert files(tmp_path) == before
