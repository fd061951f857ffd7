"""Strings from files in every output of compare and report: a label, MPI version, host, environment
value and folder name crafted by whoever wrote the folder come out text printable, JSON strict,
markdown without injected markup, JUnit valid XML and HTML escaped; whatever run.json says about its
jobs and context ends in a verdict or one line."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from trust_sides import sides, strict_json  # noqa: F401 - sides: a fixture

from commbench.analysis import compare as cmp_module
from commbench.analysis import compare_formats
from commbench.errors import BAD_INPUT, FAILED, OK

MARKDOWN_SPECIALS = "[]()!<`*_|#&~$@"  # ">" too where it starts a line: never inside these segments


def _unescaped_markdown(segment: str) -> str:
    """The characters of segment that markdown would read as markup (backslash escapes removed)."""
    return "".join(c for c in re.sub(r"\\.", "", segment) if c in MARKDOWN_SPECIALS)


def _crafted(sides_root: Path, tag: str, s: str) -> Path:
    """A copy of the candidate with s (between markers QX .. QY) as its label, MPI version, host and
    an environment value, in a folder whose name is s too."""
    name = "c-" + re.sub(r"[/\x00]", "", s)[:40].encode("utf-8")[:120].decode("utf-8", "ignore")
    folder = sides_root / tag / name
    shutil.copytree(sides_root / "cand", folder)
    meta = json.loads((folder / "run.json").read_text())
    value = f"QX{s}QY"
    meta.update(label=value, versions={**meta["versions"], "mpi_library": value},
                ranks=[{"hostname": value, "rank": 0}, {"hostname": value, "rank": 1}],
                rank0_environment={**meta["rank0_environment"], "NCCL_ALGO": value})
    (folder / "run.json").write_text(json.dumps(meta))
    return folder


def _check_outputs(base: Path, cand: Path) -> None:
    from markdown_it import MarkdownIt

    result = cmp_module.compare(base, cand)
    text = compare_formats.to_text(result)
    assert all(c.isprintable() or c == "\n" for c in text), ascii(text)
    assert "QX" in text
    doc = strict_json(compare_formats.to_json(result))
    assert doc["candidate"] == str(cand)
    markdown = compare_formats.to_markdown(result)
    assert all(c.isprintable() or c == "\n" for c in markdown)
    segments = re.findall(r"QX(.*?)QY", markdown)
    assert segments and not any(map(_unescaped_markdown, segments)), segments
    page = MarkdownIt("commonmark").enable("table").render(markdown)
    assert not re.search(r"<(a|img|code|em|script|iframe)\b", page), page
    assert page.count("<strong>") == 1 and page.count("<tr>") == len(result.verdicts) + 1
    assert all(row.count("<td") == 9 for row in re.findall(r"<tr>.*?</tr>", page, re.S)[1:])


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_fuzz_crafted_strings_in_compare_formats(sides, s):
    base, _ = sides
    tag = tempfile.mkdtemp(dir=base.parent)
    _check_outputs(base, _crafted(base.parent, Path(tag).name, s))


json_any = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=3), max_leaves=8)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.sampled_from(["job", "points", "hosts", "background_cores", "cpu_count"]), json_any),
       json_any, st.sampled_from(["versions", "world_size", "launcher", "launcher_args", "rank0_environment"]))
def test_fuzz_run_json_facts_that_compare_reads(sides, job, value, field):
    """Whatever run.json says about its jobs and context: a verdict (strict JSON) or one line."""
    base, _ = sides
    folder = Path(tempfile.mkdtemp(dir=base.parent)) / "cand"
    shutil.copytree(base.parent / "cand", folder)
    meta = json.loads((folder / "run.json").read_text())
    meta["jobs"] = [job, *meta["jobs"]]
    meta[field] = {"mpi_library": value, "NCCL_ALGO": value} if field.endswith(("versions", "environment")) else value
    (folder / "run.json").write_text(json.dumps(meta))
    outcome = run_cli("compare", base, folder, "--format", "json")
    outcome.assert_clean(codes=(OK, FAILED, BAD_INPUT))
    if outcome.code != BAD_INPUT:
        strict_json(outcome.stdout)


HOSTILE_LABEL = "\x1b]8;;http://e\x07[l](http://e) ![i](x) <img src=x onerror=alert(1)>\u202e`*_|"  # < 80 chars


def test_crafted_strings_through_the_cli_and_html_pages(tmp_path, sides):
    base, _ = sides
    cand = _crafted(base.parent, "cli", HOSTILE_LABEL)
    _check_outputs(base, cand)
    for fmt in ("text", "markdown", "json", "junit"):
        outcome = run_cli("compare", base, cand, "--format", fmt, "-o", tmp_path / f"out.{fmt}",
                          "--html", tmp_path / f"page.{fmt}.html")
        outcome.assert_clean()
        assert "\x1b" not in outcome.stdout + outcome.stderr + (tmp_path / f"out.{fmt}").read_text()
        assert (tmp_path / f"out.{fmt}").read_text() == outcome.stdout
    from xml.etree import ElementTree as ET
    ET.parse(tmp_path / "out.junit")  # valid XML: no control character in it
    outcome = run_cli("report", base, cand, "-o", tmp_path / "r.html")
    outcome.assert_clean(codes=(OK,))
    for page in (tmp_path / "r.html", tmp_path / "page.text.html"):
        html = page.read_text()
        assert "<img src=x" not in html and "\x1b" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_markdown_escapes_what_could_start_markup_and_leaves_plain_text_as_written():
    """What a file says reaches a CI summary as text: links (autolinks too), HTML, emphasis, code, emoji
    shortcodes and table cells cannot start in it; commas, hyphens, slashes, a colon before a space read as
    written (they were all backslashed, `context changes\\, baseline \\-\\> candidate\\:`)."""
    md = compare_formats._md
    assert md("version python_executable: /tmp/old/py -> /venv/bin/python") == (
        "version python\\_executable: /tmp/old/py -> /venv/bin/python")
    assert md("interval straddles 1.05, in-place") == "interval straddles 1.05, in-place"
    assert md(":x: see www.evil.example or http://x.y, mail a@b.c") == (
        "\\:x\\: see www\\.evil.example or http\\://x.y, mail a\\@b.c")
    assert md("> quote | [l](u) <b> *x* `c` # & ~ $m$") == (
        "\\> quote \\| \\[l\\]\\(u\\) \\<b> \\*x\\* \\`c\\` \\# \\& \\~ \\$m\\$")
