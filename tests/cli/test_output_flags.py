"""One spelling for outputs (commbench/cli/reports.py, commbench/cli/ab.py): a file a command writes is
--output FILE, its format from its name where there is a choice (.md, .xml, .json, .html), else
--format's; the former spellings (report -o, compare -o and --html, topo-compare --csv) still work
but are no longer shown."""

from __future__ import annotations

import json

import pytest

from cli_inprocess import run_cli
from trust_sides import sides  # noqa: F401 - sides: a fixture

from commbench.cli.reports import output_format
from commbench.errors import BAD_INPUT, OK


@pytest.mark.parametrize("name,fmt", [("v.md", "markdown"), ("v.MARKDOWN", "markdown"), ("v.xml", "junit"),
                                      ("v.json", "json"), ("v.txt", "text"), ("verdicts", "text")])
def test_an_output_files_name_says_its_format(name, fmt):
    assert output_format(name, "text") == fmt
    assert output_format("plain", "json") == "json"  # no suffix: --format's


def test_compare_writes_each_output_in_the_format_its_name_says(tmp_path, sides):
    base, cand = sides
    md, js, plain, page = (tmp_path / n for n in ("v.md", "v.json", "v.out", "trend.html"))
    outcome = run_cli("compare", base, cand, "--output", md, "--output", js, "--output", plain, "--output", page)
    assert outcome.code == OK, outcome.stderr
    assert outcome.stderr == f"comparison page written to {page}\n"
    assert plain.read_text() == outcome.stdout  # --format's (text), as printed
    assert md.read_text() == run_cli("compare", base, cand, "--format", "markdown").stdout
    assert json.loads(js.read_text())["points"]
    assert "<h2>History</h2>" in page.read_text()
    as_json = run_cli("compare", base, cand, "--format", "json", "--output", plain)
    assert plain.read_text() == as_json.stdout and json.loads(plain.read_text())


def test_compare_refuses_one_file_named_twice(tmp_path, sides):
    base, cand = sides
    twice = run_cli("compare", base, cand, "--output", tmp_path / "x.md", "--output", tmp_path / "x.md")
    twice.assert_clean()
    assert twice.code == BAD_INPUT and "--output names the same file" in twice.stderr
    mixed = run_cli("compare", base, cand, "--output", tmp_path / "x.md", "--html", tmp_path / "x.md")
    assert mixed.code == BAD_INPUT and "--output and --html name the same file" in mixed.stderr
    assert not (tmp_path / "x.md").exists()


def test_the_former_spellings_still_work(tmp_path, sides):
    base, cand = sides
    old = run_cli("compare", base, cand, "--format", "markdown", "-o", tmp_path / "v.txt",
                  "--html", tmp_path / "p.page")
    assert old.code == OK and (tmp_path / "v.txt").read_text() == old.stdout  # -o: --format's, whatever the name
    assert "<h2>History</h2>" in (tmp_path / "p.page").read_text()
    report = run_cli("report", base, "-o", tmp_path / "r.html")
    assert report.code == OK and (tmp_path / "r.html").exists()
    both = run_cli("report", base, "-o", tmp_path / "r.html", "--output", tmp_path / "s.html")
    both.assert_clean()
    assert both.code == BAD_INPUT and "-o is the old spelling of --output: give one of them" in both.stderr


def test_report_writes_output(tmp_path, sides):
    base, _ = sides
    outcome = run_cli("report", base, "--output", tmp_path / "r.html")
    assert outcome.code == OK and outcome.stderr == f"report written to {tmp_path / 'r.html'}\n"
    refused = run_cli("report", base, "--output", base / "results.csv")
    assert refused.code == BAD_INPUT and f"--output '{base / 'results.csv'}' is one of the inputs" in refused.stderr


@pytest.mark.parametrize("command", [["report"], ["compare"], ["topo-compare"]])
def test_help_shows_output_and_not_the_former_spellings(command):
    text = run_cli(*command, "-h").stdout
    assert "--output" in text
    assert not [flag for flag in (" -o ", "--html", "--csv") if flag in text]


def test_topo_compare_output_is_checked_first(tmp_path, sides):
    base, _ = sides
    for flag in ("--output", "--csv"):
        outcome = run_cli("topo-compare", base, flag, base / "results.csv")
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and f"{flag} '{base / 'results.csv'}' is one of the inputs" in outcome.stderr
    for name in ("cmp.html", "cmp.JSON", "cmp.md"):  # a name that asks for another format is refused, none written
        outcome = run_cli("topo-compare", base, "--output", tmp_path / name)
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and "topo-compare writes CSV only" in outcome.stderr, outcome.stderr
        assert outcome.stdout == "" and not (tmp_path / name).exists()
