"""commbench compare's (and ab's) verdicts as text, markdown, JSON and JUnit (FORMATS, one per
--format): commbench.analysis.compare builds the Comparison, this renders it. Every string from a
result folder is escaped as compare's docstring says: text and JUnit on one line
(terminal.inline), markdown with every ASCII punctuation character backslash-escaped (_md), JSON
strict (null for a number that is not finite)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from xml.etree import ElementTree as ET

from commbench.analysis.compare import Comparison, Verdict, point_name
from commbench.options import COMPARE_FORMATS
from commbench.presentation.terminal import inline

ORDER = {"regression": 0, "inconclusive": 1, "improvement": 2, "unchanged": 3}
_MD_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")  # CommonMark's ASCII punctuation: each may be backslash-escaped
_MD_PLAIN = set(",-+=%'\";?{}^/")  # never markup inside a line: left as they are, so the text reads as written
_MD_SHORTCODE = re.compile(r":[\w+-]+:")  # an emoji shortcode (GitHub: ":x:", ":rocket:")


def _md(value) -> str:
    """A string from a file as literal markdown: terminal.inline, then every ASCII punctuation character that
    could start markup backslash-escaped, so no link (autolinks included: "www.", "x://", "@"), image, HTML,
    code, emphasis, heading, math, emoji shortcode or table cell can start in it; the rest (commas, hyphens,
    slashes, a ">" past the first character, a "." that begins no "www." link, a ":" before a space or at the
    end) stays as it is."""
    text = inline(value)
    shortcodes = {i for m in _MD_SHORTCODE.finditer(text) for i in (m.start(), m.end() - 1)}  # ":x:", both colons

    def escape(m: re.Match) -> str:
        c, i = m.group(), m.start()
        plain = (c in _MD_PLAIN or (c == ">" and i > 0) or (c == "." and not text[max(0, i - 3):i].lower() == "www")
                 or (c == ":" and i not in shortcodes and (i + 1 == len(text) or text[i + 1].isspace())))
        return c if plain else "\\" + c

    return _MD_PUNCTUATION.sub(escape, text)


def _fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def in_order(cmp: Comparison) -> list[Verdict]:
    """The verdicts as every format lists them: regressions first, then by name, its numbers as numbers
    (64 B before 1024 B, x2 before x16)."""
    return sorted(cmp.verdicts, key=lambda v: (ORDER[v.verdict], _natural(v.name())))


def _natural(text: str) -> list:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def _trend(v: Verdict) -> str:
    return " ".join("-" if "ratio" not in h else f"{h['ratio']:.2f}" for h in v.history)


def context_lines(cmp: Comparison) -> list[str]:
    """What differs, as raw lines (each format escapes them its own way)."""
    out = []
    for path, changes in zip(cmp.candidates, cmp.context, strict=True):
        if changes:
            where = f" (candidate {path})" if len(cmp.candidates) > 1 else ""
            out.append(f"context changes, baseline -> candidate{where}:")
            out += [f"  {c}" for c in changes]
    return out


def legend(cmp: Comparison) -> str:
    """One line that explains the table's columns (the same for every format)."""
    return (f"columns: point (collective, algorithm, backend, dtype, op, buffers, size, xN = N ranks); base us / cand "
            f"us: each side's time per call; ratio: candidate / baseline (> 1: slower); {cmp.INTERVAL}: the ratio's "
            f"interval; p: the test's p-value for a difference; {cmp.UNIT}: baseline/candidate; verdicts judge the "
            f"ratio against the threshold {cmp.threshold_text()}")


def to_text(cmp: Comparison) -> str:
    lines = [f"baseline:  {inline(cmp.baseline)}"]
    lines += ([f"candidate: {inline(cmp.candidate)}"] if len(cmp.candidates) == 1 else
              [f"candidates (oldest first): {', '.join(map(inline, cmp.candidates))}; verdicts of the last"])
    lines += [""] + [inline(line) for line in context_lines(cmp)]
    lines += [""] if lines[-1] else []
    names = {id(v): inline(v.name()) for v in cmp.verdicts}
    width = max(map(len, names.values()))
    trend = len(cmp.candidates) > 1
    lines.append(f"{'point':<{width}}  {'verdict':<12} {'base us':>10} {'cand us':>10} {'ratio':>7} {cmp.INTERVAL:>13} "
                 f"{'p':>8} {cmp.UNIT:>5}" + ("  history" if trend else "") + "  note")
    for v in in_order(cmp):
        ci = f"{_fmt(v.ci_low)}-{_fmt(v.ci_high)}" if v.ci_low is not None else "-"
        lines.append(f"{names[id(v)]:<{width}}  {v.verdict:<12} {v.baseline_us:>10.2f} {v.candidate_us:>10.2f} "
                     f"{v.ratio:>7.3f} {ci:>13} {_fmt(v.p_value, '.2g'):>8} {v.jobs[0]:>2}/{v.jobs[1]:<2}"
                     + (f"  {_trend(v)}" if trend else "") + f"  {inline(v.note)}".rstrip())
    for m in cmp.missing:
        lines.append(f"missing in candidate: {inline(point_name(m))}")
    lines += ["", legend(cmp), "", cmp.summary()] + cmp.advice()
    return "\n".join(lines)


def to_markdown(cmp: Comparison) -> str:
    """For CI job summaries: every string from a file through _md (the summary and advice are
    commbench's own words and numbers)."""
    icon = {"regression": ":x: regression", "improvement": ":rocket: improvement", "unchanged": "unchanged",
            "inconclusive": ":grey_question: inconclusive"}
    trend = len(cmp.candidates) > 1
    out = [f"### {cmp.TITLE}", "", f"**{cmp.summary()}**", ""]
    out += [f"* {a}" for a in cmp.advice()] + ([""] if cmp.advice() else [])
    for path, changes in zip(cmp.candidates, cmp.context, strict=True):  # context_lines' lines, only the data escaped
        if changes:
            where = f" (candidate {_md(path)})" if len(cmp.candidates) > 1 else ""
            out += [f"context changes, baseline -> candidate{where}:"] + [f"* {_md(str(c))}" for c in changes] + [""]
    out += [f"| point | verdict | baseline (us) | candidate (us) | ratio | {cmp.INTERVAL} | p | {cmp.UNIT} |"
            + (" history |" if trend else "") + " note |",
            "|---|---|---:|---:|---:|---|---:|---:|" + ("---|" if trend else "") + "---|"]
    for v in in_order(cmp):
        ci = f"{_fmt(v.ci_low)}–{_fmt(v.ci_high)}" if v.ci_low is not None else "-"
        out.append(f"| {_md(v.name())} | {icon[v.verdict]} | {v.baseline_us:.2f} | {v.candidate_us:.2f} | "
                   f"{v.ratio:.3f} | {ci} | {_fmt(v.p_value, '.2g')} | {v.jobs[0]}/{v.jobs[1]} |"
                   + (f" {_trend(v)} |" if trend else "") + f" {_md(v.note)} |")
    if cmp.missing:
        out += ["", f"Missing in candidate: {len(cmp.missing)} points" + ("" if cmp.allow_missing else " (they fail the "
                                                                          "comparison; --allow-missing accepts them)")]
    return "\n".join(out + ["", _md(legend(cmp))])


def _strict(value):
    """value with every float that is not finite (NaN, infinity) as None: strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def to_json(cmp: Comparison) -> str:
    doc = {"baseline": cmp.baseline, "candidate": cmp.candidate, "candidates": cmp.candidates,
           "threshold": cmp.threshold, "summary": cmp.summary(), "advice": cmp.advice(),
           "regressed": cmp.regressed, "inconclusive": cmp.count("inconclusive"), "strict": cmp.strict,
           "allow_missing": cmp.allow_missing,
           "exit_code": cmp.exit_code,
           "context": [{"candidate": p, "changes": [asdict(c) for c in ch]}
                       for p, ch in zip(cmp.candidates, cmp.context, strict=True)],
           "points": [asdict(v) for v in cmp.verdicts], "missing": cmp.missing, "new": cmp.new}
    return json.dumps(_strict(doc), indent=2, allow_nan=False)


def to_junit(cmp: Comparison) -> str:
    failing = {"regression"} | ({"inconclusive"} if cmp.strict else set())
    missing_fail = cmp.missing_fails
    suite = ET.Element("testsuite", name=cmp.TITLE, tests=str(len(cmp.verdicts) + len(cmp.missing)),
                       failures=str(sum(v.verdict in failing for v in cmp.verdicts) + (len(cmp.missing) * missing_fail)),
                       skipped=str(len(cmp.missing) * (not missing_fail) + (0 if cmp.strict else cmp.count("inconclusive"))))
    for v in cmp.verdicts:
        case = ET.SubElement(suite, "testcase", classname=inline(f"commbench.{v.key['collective']}"),
                             name=inline(v.name()))
        detail = (f"baseline {v.baseline_us:.3f} us, candidate {v.candidate_us:.3f} us ({v.jobs[0]}/{v.jobs[1]} "
                  f"{cmp.UNIT}), {cmp.INTERVAL} of the ratio {_fmt(v.ci_low)}-{_fmt(v.ci_high)}. {inline(v.note)}").strip()
        properties = ET.SubElement(case, "properties")  # every case's figures, passing ones too
        for name, value in (("verdict", v.verdict), ("ratio", f"{v.ratio:.4f}"), ("ci_low", _fmt(v.ci_low, ".4f")),
                            ("ci_high", _fmt(v.ci_high, ".4f")), ("p_value", _fmt(v.p_value, ".3g")),
                            ("baseline_us", f"{v.baseline_us:.3f}"), ("candidate_us", f"{v.candidate_us:.3f}"),
                            (cmp.UNIT, f"{v.jobs[0]}/{v.jobs[1]}")):
            ET.SubElement(properties, "property", name=name, value=value)
        if v.verdict == "regression":
            ET.SubElement(case, "failure", message=f"{v.ratio:.3f}x slower (p={_fmt(v.p_value, '.2g')})",
                          type="regression").text = detail
        elif v.verdict == "inconclusive":
            ET.SubElement(case, "failure" if cmp.strict else "skipped", message=f"inconclusive: {inline(v.note)}",
                          type="inconclusive").text = detail
        else:
            ET.SubElement(case, "system-out").text = f"{v.verdict}, ratio {v.ratio:.3f}: {detail}"
    for m in cmp.missing:
        case = ET.SubElement(suite, "testcase", classname="commbench.missing", name=json.dumps(_strict(m)))
        ET.SubElement(case, "failure" if missing_fail else "skipped", message="missing in the candidate")
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="unicode", xml_declaration=True)


FORMATS = dict(zip(COMPARE_FORMATS, (to_text, to_markdown, to_json, to_junit), strict=True))
