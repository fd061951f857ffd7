"""Hostile inputs, class 8 of issue 20 (crafted strings): control sequences, bidi overrides, markdown
and HTML from files and options, escaped for terminals, markdown, JSON, XML and HTML (the contract:
tests/hostile_contract.py; besides it, compare's markdown has no unescaped link, image or HTML outside
code spans, its JSON is strict, its JUnit XML well-formed, HTML pages hold no crafted markup verbatim)."""

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import DATA
from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import (NCCL_JSON, OSU, RUN_SMALL, copy, edit_csv, edit_json, json_lines, nccl_text_with,
                              params, strict_json, write)
from commbench.errors import BAD_INPUT, FAILED, OK

ANSI = "\x1b[31mEVIL-RED\x1b[0m"
OSC8 = "\x1b]8;;http://evil.example/\x07EVIL-LINK\x1b]8;;\x07"
OSC52 = "\x1b]52;c;ZXZpbA==\x07"
BIDI = "\u202eLIVE-EVIL"
MDLINK = "[EVIL](http://evil.example/)"
MDIMG = "![EVIL](http://evil.example/x.png)"
HTML = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(1)</script>"
ALL = f"{ANSI} {OSC8} {OSC52} {BIDI} {MDLINK} {MDIMG} {HTML} {SCRIPT}"

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_MD_ACTIVE = re.compile(r"\]\(|!\[|<[A-Za-z/!?]")


def _escaped(text: str, i: int) -> bool:
    """Is text[i] backslash-escaped (an odd number of backslashes before it)?"""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def markdown_safe(s: Path, out: Outcome) -> list[str]:
    """No link, image or raw HTML can start outside code spans (commbench's own markdown has none):
    a `](`, `![` or `<tag` whose first character is not backslash-escaped."""
    if out.rc not in (OK, FAILED):
        return []
    text = _CODE_SPAN.sub("", out.stdout.decode("utf-8", "replace"))
    for found in _MD_ACTIVE.finditer(text):
        if not _escaped(text, found.start()):
            return [f"markdown has an unescaped {found.group()!r}: "
                    f"...{text[max(0, found.start() - 30):found.end() + 30]!r}"]
    return []


def junit_xml(s: Path, out: Outcome) -> list[str]:
    if out.rc not in (OK, FAILED):
        return []
    try:
        ET.fromstring(out.stdout)
    except ET.ParseError as exc:
        return [f"--format junit is not well-formed XML ({exc})"]
    return []


def file_lacks(rel: str, *needles: str):
    """An output file (an HTML page) does not hold the crafted markup verbatim."""
    def check(s: Path, out: Outcome) -> list[str]:
        p = s / rel
        if not p.is_file():
            return []
        text = p.read_text(errors="replace")
        return [f"{rel} holds {n!r} verbatim" for n in needles if n in text]
    return check


def evil_context(value: str) -> tuple:
    """B: SYN with the crafted string in every fact compare shows (versions, hosts, environment,
    launcher arguments, label)."""
    def fn(d, s):
        d["versions"]["mpi_library"] = value
        d["label"] = value
        d["launcher_args"] = [value]
        d["ranks"] = [{"hostname": value, "rank": 0}, {"hostname": value + "2", "rank": 1}]
        d["rank0_environment"] = {"OMPI_MCA_evil": value, "NCCL_EVIL": value}
        for job in d.get("jobs", []):
            job["hosts"] = [value]
    return copy("SYN", "B"), edit_json("B/run.json", fn), edit_csv("B/results.csv", "label", value)


def hosts(value: str) -> tuple:
    def fn(d, s):
        d["ranks"] = [{"hostname": value, "rank": 0}]
        for job in d.get("jobs", []):
            job["hosts"] = [value]
    return copy("SYN", "B"), edit_json("B/run.json", fn)


MD, JS = (markdown_safe,), (strict_json,)
EVIL_DIR = f"B{ANSI}{MDLINK}{BIDI}"
EITHER = (OK, BAD_INPUT)
CASES = [
    case(8, "compare-text-context-ansi", "compare B SYN", copy("SYN"), *evil_context(ANSI), expect=(OK,)),
    case(8, "compare-text-context-all", "compare B SYN", copy("SYN"), *evil_context(ALL), expect=(OK,)),
    case(8, "compare-text-hosts-all", "compare B SYN", copy("SYN"), *hosts(ALL), expect=(OK,)),
    case(8, "compare-text-folder-name", ["compare", EVIL_DIR, "SYN"], copy("SYN"), copy("SYN", EVIL_DIR),
         expect=(OK,)),
    case(8, "compare-text-algorithm-column", "compare B SYN --allow-missing", copy("SYN"), copy("SYN", "B"),
         edit_csv("B/results.csv", "algorithm", ALL, rows="first"), expect=EITHER,
         note="an unknown algorithm name may be refused (BAD_INPUT) or shown escaped (OK; the renamed "
         "point is missing from B, allowed here)"),
    case(8, "compare-markdown-context-all", "compare B SYN --format markdown", copy("SYN"), *evil_context(ALL),
         expect=(OK,), checks=MD),
    case(8, "compare-markdown-context-link", "compare B SYN --format markdown", copy("SYN"), *evil_context(MDLINK),
         expect=(OK,), checks=MD),
    case(8, "compare-markdown-context-html", "compare B SYN --format markdown", copy("SYN"), *evil_context(HTML),
         expect=(OK,), checks=MD),
    case(8, "compare-markdown-folder-name", ["compare", EVIL_DIR, "SYN", "--format", "markdown"], copy("SYN"),
         copy("SYN", EVIL_DIR), expect=(OK,), checks=MD),
    case(8, "compare-markdown-algorithm-column", "compare B SYN --format markdown --allow-missing", copy("SYN"),
         copy("SYN", "B"),
         edit_csv("B/results.csv", "algorithm", f"ring{MDLINK}{HTML}", rows="first"), expect=EITHER, checks=MD),
    case(8, "compare-json-context-all", "compare B SYN --format json", copy("SYN"), *evil_context(ALL),
         expect=(OK,), checks=JS),
    case(8, "compare-json-algorithm-column", "compare B SYN --format json --allow-missing", copy("SYN"), copy("SYN", "B"),
         edit_csv("B/results.csv", "algorithm", ALL, rows="first"), expect=EITHER, checks=JS),
    case(8, "compare-junit-context-all", "compare B SYN --format junit", copy("SYN"), *evil_context(ALL),
         expect=(OK,), checks=(junit_xml,)),
    case(8, "compare-html-page-all", "compare B SYN --html t.html", copy("SYN"), *evil_context(ALL), expect=(OK,),
         outputs=("t.html",), checks=(file_lacks("t.html", HTML, SCRIPT),)),
    case(8, "report-all", "report B -o r.html", *evil_context(ALL), expect=(OK,), outputs=("r.html",),
         checks=(file_lacks("r.html", HTML, SCRIPT),)),
    case(8, "topo-compare-label-all", "topo-compare B", copy("TOPO", "B"), edit_csv("B/results.csv", "label", ALL),
         expect=(OK,)),
    case(8, "model-fit-context-all", "model fit B -o m.json", *evil_context(ALL), expect=(OK,), outputs=("m.json",)),
    case(8, "run-console-label", [*shlex.split(RUN_SMALL), "--label", ALL, "--out", "R"], expect=EITHER,
         outputs=("R",), note="a label with control characters may be refused (BAD_INPUT) or shown escaped (OK)"),
    case(8, "run-json-rows-label", [*shlex.split(RUN_SMALL), "--json", "--label", ALL, "--out", "R"], expect=EITHER,
         outputs=("R",), checks=(json_lines,)),
    case(8, "import-osu-label", ["import", "osu", "osu.txt", "-n", "4", "--out", "O", "--label", ALL],
         copy(OSU, "osu.txt"), expect=EITHER, outputs=("O",)),
    case(8, "import-nccl-text-hostname", "import nccl-tests nccl.txt --out O",
         nccl_text_with("on ztan-mig-235z", f"on {ALL}", 8), expect=EITHER, outputs=("O",)),
    case(8, "import-nccl-json-hostname", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
         edit_json("nccl.json", lambda d, s: [dev.update(hostname=ALL) for dev in d["config"]["devices"]]),
         expect=EITHER, outputs=("O",)),
    case(8, "import-osu-title", "import osu osu.txt -n 4 --out O",
         write("osu.txt", lambda s: (DATA / OSU[5:]).read_text().replace("Allreduce", f"Allreduce{ANSI}{OSC52}")),
         expect=EITHER, outputs=("O",)),
    case(8, "error-echo-path", ["compare", f"nope{ALL}", "SYN"], copy("SYN")),
    case(8, "error-echo-backend", ["run", "--backend", OSC52 + ANSI, "--out", "R"]),
    case(8, "sweep-suite-name", "sweep s.yaml --out S",
         write("s.yaml", "name: \"" + ALL.encode("unicode_escape").decode()
               + "\"\ndefaults: {backend: mpi, nprocs: 2, collective: all_reduce, sizes: [8], iters: 5, warmup: 1, "
                 "mode: in-place}\nruns: [{label: a}]\n"), expect=EITHER, outputs=("S",)),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_crafted_strings(c, tmp_path):
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_crafted_strings_in_run_and_sweep(c, tmp_path, job):
    meets_contract(c, tmp_path)
