"""The commands that read result folders (commbench/cli/reports.py), in-process: report (its default
file, the line saying where), compare (--threshold as a percentage or a fraction, --format, -o and
--html written with what stdout shows, --strict, exit codes), topo-compare (the table of multi-node
variants on stderr, --csv safe for spreadsheets, a refusal in one line when there is nothing to
compare)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from cli_inprocess import run_cli
from synthetic_runs import write_run
from trust_sides import QUIET, sides  # noqa: F401 - sides: a fixture

from commbench.cli.reports import print_comparison, threshold_fraction
from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, InputError, OK
from commbench.folder.schema import build_row
from commbench.folder.write import RunFolder


@pytest.mark.parametrize("text,fraction", [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), ("1e-2", 0.01),
                                           (" 5 %", 0.05)])
def test_a_threshold_is_a_percentage_or_a_fraction(text, fraction):
    assert threshold_fraction(text) == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["", "%", "five", "5%%", "0.05 x"])
def test_a_threshold_that_is_no_number_is_refused_in_one_line(text):
    with pytest.raises(InputError, match=r"^invalid threshold .* \(give a percentage such as 5% or a fraction such as "
                                         r"0\.05\)$"):
        threshold_fraction(text)


def test_a_threshold_with_a_space_after_the_percent_sign():
    assert threshold_fraction("5% ") == pytest.approx(0.05)


@pytest.mark.parametrize("threshold", ["0", "100%", "150%", "-5%", "nan", "inf"])
def test_compare_refuses_a_threshold_outside_zero_to_one(sides, threshold):
    base, cand = sides
    outcome = run_cli("compare", base, cand, "--threshold", threshold)
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "invalid threshold" in outcome.stderr and outcome.stdout == ""


def test_compare_threshold_decides_the_verdict(tmp_path, sides):
    base, _ = sides
    slower = write_run(tmp_path / "slower", [10.8, 11.0, 10.9], seed=5)  # about 9% slower
    assert run_cli("compare", base, slower, "--threshold", "5%").code == FAILED
    outcome = run_cli("compare", base, slower, "--threshold", "0.2", "--format", "json")
    doc = json.loads(outcome.stdout)
    assert outcome.code == OK and doc["threshold"] == 0.2 and {p["verdict"] for p in doc["points"]} != {"regression"}


def test_compare_refuses_an_unknown_format_before_reading(tmp_path):
    outcome = run_cli("compare", tmp_path / "none", tmp_path / "none2", "--format", "yaml")
    assert outcome.code == BAD_INPUT
    assert outcome.stderr == ("commbench: error: unknown format 'yaml' (accepted: text, markdown, json, junit)\n")


@pytest.mark.parametrize("fmt", ["text", "markdown", "json", "junit"])
def test_compare_writes_to_o_what_it_prints(tmp_path, sides, fmt):
    base, cand = sides
    out = tmp_path / "verdict"
    outcome = run_cli("compare", base, cand, "--format", fmt, "-o", out)
    assert outcome.code == OK and outcome.stderr == ""
    assert out.read_text() == outcome.stdout and outcome.stdout.endswith("\n")


def test_compare_html_says_where_the_page_went(tmp_path, sides):
    base, cand = sides
    outcome = run_cli("compare", base, cand, "--html", tmp_path / "p.html")
    assert outcome.code == OK and outcome.stderr == f"comparison page written to {tmp_path / 'p.html'}\n"
    assert "<h2>History</h2>" in (tmp_path / "p.html").read_text()


def test_strict_fails_an_inconclusive_comparison(tmp_path):
    base = write_run(tmp_path / "base", [10.0], seed=1)  # one job a side: inconclusive
    cand = write_run(tmp_path / "cand", [10.0], seed=2)
    plain = run_cli("compare", base, cand)
    assert plain.code == NO_VERDICT and "2 inconclusive" in plain.stdout  # nothing judged: not a pass
    strict = run_cli("compare", base, cand, "--strict")
    assert strict.code == FAILED and "--strict: inconclusive points fail the comparison" in strict.stdout


def test_compare_of_several_candidates_takes_the_last_ones_verdicts(tmp_path, sides):
    base, cand = sides
    slow = write_run(tmp_path / "slow", [12.4, 12.6, 12.55], seed=3)
    outcome = run_cli("compare", base, slow, cand)
    assert outcome.code == OK and "candidates (oldest first):" in outcome.stdout
    assert run_cli("compare", base, cand, slow).code == FAILED


def test_report_writes_report_html_here_by_default(tmp_path, sides):
    base, _ = sides
    outcome = run_cli("report", base, "--title", "t", cwd=tmp_path)
    assert outcome.code == OK and outcome.stderr == "report written to report.html\n"
    assert "<title>t</title>" in (tmp_path / "report.html").read_text()
    missing = run_cli("report", tmp_path / "nothing", "-o", tmp_path / "x.html")
    missing.assert_clean()
    assert missing.code == BAD_INPUT and not (tmp_path / "x.html").exists()


def _multi_node(path, label="=HYPERLINK(\"http://e\")"):
    """A run on 2 nodes x 2 ranks: ring, hierarchical and native at two sizes."""
    folder = RunFolder(path)
    folder.create({"run_id": "m", "label": label, "status": "completed", "world_size": 4, "nodes": 2,
                   "ranks_per_node": 2})
    point = 0
    for algorithm, base_us in (("native", 80.0), ("ring", 100.0), ("hierarchical", 50.0)):
        for size in (1 << 20, 4 << 20):
            row = build_row(run_id="m", label=label, point=point, collective="all_reduce", backend="mpi",
                            algorithm=algorithm, device="cpu", dtype="float32", op="sum", in_place=0, world_size=4,
                            nodes=2, ranks_per_node=2, size_bytes=size, time_us=base_us * size / (1 << 20),
                            samples=3, wrong=0, internode_bytes_measured=size * 1.0,
                            internode_bytes_expected=size * 1.5 if algorithm != "native" else None)
            folder.add(row, np.full(3, row["time_us"]))
            point += 1
    folder.finalize()
    return path


def test_topo_compare_prints_the_variants_and_writes_a_safe_csv(tmp_path):
    run = _multi_node(tmp_path / "m")
    outcome = run_cli("topo-compare", run, "--csv", tmp_path / "t.csv")
    assert outcome.code == OK and outcome.stdout == ""
    for text in ("time per call in µs (speedup over the flat ring)", "native", "ring", "hierarchical", "2 nodes × 2 ranks",
                 "1M", "4M", "80.00 (1.25×)", "100.0", "50.00 (2.00×)", "400.0", "200.0 (2.00×)", "1.05M (1.57M)",
                 "4.19M (6.29M)", "1.05M (-)"):
        assert text in outcome.stderr, (text, outcome.stderr)
    table = list(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))
    assert len(table) == 2 and table[0]["label"] == "'=HYPERLINK(\"http://e\")"  # opens as text, not a formula
    assert float(table[0]["speedup:hierarchical"]) == pytest.approx(2.0)
    assert float(table[1]["time_us:ring"]) == pytest.approx(400.0)


def test_topo_compare_of_single_node_runs_is_refused(sides, tmp_path):
    base, _ = sides
    outcome = run_cli("topo-compare", base, "--csv", tmp_path / "t.csv")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and outcome.stderr == (
        "commbench: error: no multi-node points of two or more of native, native_han, ring, ring_topology, "
        "hierarchical, hierarchical_kernel in these results\n")
    assert not (tmp_path / "t.csv").exists()
    assert print_comparison([str(base)]) is False
