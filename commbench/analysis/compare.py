"""Regression verdicts between two result sets, from their per-iteration samples.

Points are matched on (collective, backend, algorithm, dtype, op, size_bytes, world_size,
in_place). A point measured in several runs of a side (a suite's `repeat`) has one median per run; the
side's estimate is the smallest of those medians: on a shared machine a disturbance (another
process, a VM neighbour) only ever slows a job down, so the best repetition is the undisturbed
one (measured here: 3 in 10 jobs of 2 ranks on 2 cores had points 25-60% slow). For each
pair: ratio = estimate(candidate) / estimate(baseline), a two-sided Mann-Whitney U test on all
samples, and a bootstrap 95% confidence interval of the ratio.

  regression   ratio > 1 + threshold and p < alpha   (slower, beyond noise and beyond the threshold)
  improvement  ratio < 1 - threshold and p < alpha
  unchanged    otherwise

With fewer than MIN_SAMPLES samples on a side (imported results carry one average) no test is
possible and the ratio alone decides; such points are marked `low samples`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np

from commbench.analysis.load import load_runs
from commbench.errors import InputError

KEY = ["collective", "backend", "algorithm", "dtype", "op", "size_bytes", "world_size", "in_place"]
MIN_SAMPLES = 5
ALPHA = 0.01


@dataclass
class Verdict:
    key: dict
    verdict: str
    baseline_us: float
    candidate_us: float
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    samples: tuple[int, int]
    note: str = ""

    def name(self) -> str:
        k = self.key
        mode = "in-place" if k["in_place"] else "out-of-place"
        op = "" if k["op"] in ("none", None) else f" {k['op']}"
        return (f"{k['collective']} {k['algorithm']} {k['backend']} {k['dtype']}{op} {mode} "
                f"{k['size_bytes']} B x{k['world_size']}")


@dataclass
class Comparison:
    baseline: str
    candidate: str
    threshold: float
    verdicts: list[Verdict] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)  # in the baseline, not in the candidate
    new: list[dict] = field(default_factory=list)  # in the candidate only

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def regressed(self) -> bool:
        return self.count("regression") > 0

    def summary(self) -> str:
        return (f"{self.count('regression')} regressions, {self.count('improvement')} improvements, "
                f"{self.count('unchanged')} unchanged, {len(self.missing)} missing, {len(self.new)} new "
                f"(threshold {self.threshold:.0%})")


def load(path: str | Path):
    """Rows (with their samples as arrays) of every run under path, one row per KEY."""
    rows, _ = load_runs([path], samples=True)
    # repetitions of a point (several runs): keep every run's samples, one entry per point
    return (rows.groupby(KEY, sort=False, dropna=False)
                .agg(sample_values=("sample_values", list), time_us=("time_us", "median")).reset_index())


def estimate(runs: list[np.ndarray]) -> float:
    """The best (smallest) of the per-run medians; with one run, its median."""
    return float(min(np.median(r) for r in runs))


def _bootstrap_ci(base: list[np.ndarray], cand: list[np.ndarray], rng: np.random.Generator, n: int = 1000):
    """Resample within each run, keep the best-of-run-medians estimate."""
    def draws(runs):
        return np.min(np.stack([np.median(rng.choice(r, size=(n, len(r))), axis=1) for r in runs]), axis=0)
    ratios = draws(cand) / draws(base)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def judge(base_runs: list[np.ndarray], cand_runs: list[np.ndarray], threshold: float,
          rng: np.random.Generator) -> tuple:
    from scipy.stats import mannwhitneyu

    base, cand = np.concatenate(base_runs), np.concatenate(cand_runs)
    ratio = estimate(cand_runs) / estimate(base_runs)
    if min(len(base), len(cand)) < MIN_SAMPLES:
        verdict = "regression" if ratio > 1 + threshold else "improvement" if ratio < 1 - threshold else "unchanged"
        return verdict, ratio, None, None, None, "low samples"
    p = float(mannwhitneyu(cand, base, alternative="two-sided").pvalue)
    low, high = _bootstrap_ci(base_runs, cand_runs, rng)
    if ratio > 1 + threshold and p < ALPHA:
        verdict = "regression"
    elif ratio < 1 - threshold and p < ALPHA:
        verdict = "improvement"
    else:
        verdict = "unchanged"
    return verdict, ratio, low, high, p, ""


def compare(baseline: str | Path, candidate: str | Path, threshold: float = 0.05, seed: int = 0) -> Comparison:
    if not 0 < threshold < 1:
        raise InputError(f"invalid threshold {threshold}: give a fraction between 0 and 1 (e.g. 5%)")
    base, cand = load(baseline), load(candidate)
    result = Comparison(str(baseline), str(candidate), threshold)
    rng = np.random.default_rng(seed)
    cand_by_key = {tuple(r[k] for k in KEY): r for r in cand.to_dict("records")}
    seen = set()
    for b in base.to_dict("records"):
        key = tuple(b[k] for k in KEY)
        c = cand_by_key.get(key)
        keyd = {k: _plain(b[k]) for k in KEY}
        if c is None:
            result.missing.append(keyd)
            continue
        seen.add(key)
        verdict, ratio, low, high, p, note = judge(b["sample_values"], c["sample_values"], threshold, rng)
        result.verdicts.append(Verdict(keyd, verdict, estimate(b["sample_values"]), estimate(c["sample_values"]),
                                       ratio, low, high, p, (sum(map(len, b["sample_values"])),
                                                             sum(map(len, c["sample_values"]))), note))
    result.new = [{k: _plain(r[k]) for k in KEY} for key, r in cand_by_key.items() if key not in seen]
    if not result.verdicts:
        raise InputError("no point of the baseline matches a point of the candidate")
    return result


def _plain(v):
    return v.item() if hasattr(v, "item") else v


# --- output formats ---------------------------------------------------------------------------------

def _fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def to_text(cmp: Comparison) -> str:
    lines = [f"baseline:  {cmp.baseline}", f"candidate: {cmp.candidate}", ""]
    width = max(len(v.name()) for v in cmp.verdicts)
    lines.append(f"{'point':<{width}}  {'verdict':<11} {'base us':>10} {'cand us':>10} {'ratio':>7} {'95% CI':>15} {'p':>8}")
    for v in sorted(cmp.verdicts, key=lambda v: (v.verdict == "unchanged", v.verdict, v.name())):
        ci = f"{_fmt(v.ci_low)}-{_fmt(v.ci_high)}" if v.ci_low is not None else "-"
        lines.append(f"{v.name():<{width}}  {v.verdict:<11} {v.baseline_us:>10.2f} {v.candidate_us:>10.2f} "
                     f"{v.ratio:>7.3f} {ci:>15} {_fmt(v.p_value, '.2g'):>8} {v.note}".rstrip())
    for m in cmp.missing:
        lines.append(f"missing in candidate: {m}")
    lines += ["", cmp.summary()]
    return "\n".join(lines)


def _md_escape(s: str) -> str:
    return str(s).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def to_markdown(cmp: Comparison) -> str:
    icon = {"regression": ":x: regression", "improvement": ":rocket: improvement", "unchanged": "unchanged"}
    out = ["### commbench compare", "", f"**{cmp.summary()}**", "",
           "| point | verdict | baseline (us) | candidate (us) | ratio | 95% CI | p |", "|---|---|---:|---:|---:|---|---:|"]
    for v in sorted(cmp.verdicts, key=lambda v: (v.verdict == "unchanged", v.verdict, v.name())):
        ci = f"{_fmt(v.ci_low)}–{_fmt(v.ci_high)}" if v.ci_low is not None else "-"
        out.append(f"| {_md_escape(v.name())} | {icon[v.verdict]} | {v.baseline_us:.2f} | {v.candidate_us:.2f} | "
                   f"{v.ratio:.3f} | {ci} | {_fmt(v.p_value, '.2g')} |")
    if cmp.missing:
        out += ["", f"Missing in candidate: {len(cmp.missing)} points"]
    return "\n".join(out)


def to_json(cmp: Comparison) -> str:
    return json.dumps({"baseline": cmp.baseline, "candidate": cmp.candidate, "threshold": cmp.threshold,
                       "summary": cmp.summary(), "regressed": cmp.regressed,
                       "points": [asdict(v) for v in cmp.verdicts], "missing": cmp.missing, "new": cmp.new}, indent=2)


def to_junit(cmp: Comparison) -> str:
    suite = ET.Element("testsuite", name="commbench compare", tests=str(len(cmp.verdicts) + len(cmp.missing)),
                       failures=str(cmp.count("regression")), skipped=str(len(cmp.missing)))
    for v in cmp.verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"commbench.{v.key['collective']}", name=v.name())
        if v.verdict == "regression":
            ET.SubElement(case, "failure", message=f"{v.ratio:.3f}x slower (p={_fmt(v.p_value, '.2g')})",
                          type="regression").text = (f"baseline {v.baseline_us:.3f} us, candidate {v.candidate_us:.3f} us, "
                                                     f"95% CI of the ratio {_fmt(v.ci_low)}-{_fmt(v.ci_high)}")
    for m in cmp.missing:
        case = ET.SubElement(suite, "testcase", classname="commbench.missing", name=json.dumps(m))
        ET.SubElement(case, "skipped", message="missing in the candidate")
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="unicode", xml_declaration=True)


FORMATS = {"text": to_text, "markdown": to_markdown, "json": to_json, "junit": to_junit}
