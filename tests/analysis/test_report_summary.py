"""The report's summary (commbench/analysis/report/summary.py): per run and collective, the peak busbw,
the latency at the smallest size, the fastest algorithm per size band and the wrong elements, each
checked against the same figure computed here from the rows by plain loops."""

import re

import numpy as np
import pandas as pd
import pytest

from synthetic_runs import write_run

from commbench.analysis.report import build_report
from commbench.analysis.report.summary import BANDS, summarize, summary_table

SIZES = [8, 1024, 65536, 1 << 20, 16 << 20, 64 << 20]


def _random_rows(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    records, point = [], {}
    for run in ("ci_a/native", "ci_b/native"):
        for collective in ("all_reduce", "all_gather"):
            for algo in ("native", "ring", "rhd"):
                for size in rng.choice(SIZES, size=4, replace=False):
                    key = (run, "p")
                    point[key] = point.get(key, -1) + 1
                    records.append({"run": run, "folder": run, "point": point[key], "collective": collective,
                                    "backend": "mpi", "algorithm": algo, "world_size": 2, "size_bytes": int(size),
                                    "time_us": float(rng.uniform(1, 100)), "busbw_gbps": float(rng.uniform(0, 50)),
                                    "wrong": int(rng.choice([0, 0, 0, 3])), "job": 1})
    return pd.DataFrame(records)


def _expected(rows: pd.DataFrame) -> dict:
    """Every figure of the summary, from the records one by one."""
    out = {}
    for r in rows.to_dict("records"):
        e = out.setdefault((r["run"], r["collective"]), {"peak": (-1.0, None, None), "small": None, "sizes": {},
                                                         "wrong": 0, "bad": set(), "points": set()})
        if r["busbw_gbps"] > e["peak"][0]:
            e["peak"] = (r["busbw_gbps"], r["size_bytes"], r["algorithm"])
        e["sizes"].setdefault(r["size_bytes"], []).append((r["time_us"], r["algorithm"]))
        e["wrong"] += r["wrong"]
        e["points"].add(r["point"])
        if r["wrong"]:
            e["bad"].add(r["point"])
    for e in out.values():
        smallest = min(e["sizes"])
        e["small"] = (smallest,) + min(e["sizes"][smallest])
        e["bands"] = {}
        for low, high, label in BANDS:
            winners = [min(e["sizes"][s])[1] for s in e["sizes"] if low <= s < high]
            if winners:
                best = max(set(winners), key=lambda a: (winners.count(a), [-ord(c) for c in a]))
                e["bands"][label] = f"{best} ({winners.count(best)}/{len(winners)})"
    return out


@pytest.mark.parametrize("seed", range(5))
def test_the_summary_holds_the_figures_of_the_rows(seed):
    rows = _random_rows(seed)
    expected = _expected(rows)
    summary = summarize(rows, rows)
    order = ["all_reduce", "all_gather"]  # the registry's order within a run
    assert list(zip(summary.run, summary.collective)) == sorted(expected, key=lambda k: (k[0], order.index(k[1])))
    for s in summary.to_dict("records"):
        e = expected[(s["run"], s["collective"])]
        assert (s["peak_busbw"], s["peak_size"], s["peak_algorithm"]) == e["peak"]
        assert (s["small_size"], s["small_time_us"], s["small_algorithm"]) == e["small"]
        for _, _, label in BANDS:
            best = s[f"best {label}"]
            if label not in e["bands"]:
                assert best == ""
            elif " / " not in best:  # random times: a tie only where two algorithms won as often
                assert best == e["bands"][label]
        assert (s["wrong"], s["bad_points"], s["points"]) == (e["wrong"], len(e["bad"]), len(e["points"]))
        assert s["ranks"] == "2"


def test_a_tie_names_both_and_a_second_backend_is_named():
    rows = pd.DataFrame([{"run": "r", "point": i, "collective": "all_reduce", "backend": b, "algorithm": a,
                          "world_size": 4, "size_bytes": s, "time_us": t, "busbw_gbps": 1.0, "wrong": 0}
                         for i, (b, a, s, t) in enumerate([("mpi", "ring", 8, 1.0), ("mpi", "native", 8, 2.0),
                                                           ("mpi", "ring", 16, 2.0), ("gloo", "native", 16, 1.0)])])
    s = summarize(rows, rows).iloc[0]
    assert s["best < 64K"] == "gloo native / mpi ring (1/2 each)" and s["best ≥ 8M"] == ""
    assert s.small_algorithm == "mpi ring" and s.small_time_us == 1.0


def test_correctness_counts_every_job_and_figures_come_from_the_median_job(tmp_path):
    """--repeat 3: a wrong element in any job counts; the peak is the median job's, not the luckiest."""
    run = write_run(tmp_path / "rep", [10.0, 30.0, 20.0])
    results = pd.read_csv(run / "results.csv")
    results.loc[(results.job == 1) & (results.point == 1), "wrong"] = 4
    results.loc[(results.job == 2) & (results.point == 1), "wrong"] = 1
    results.to_csv(run / "results.csv", index=False)
    page = build_report([str(run)], tmp_path / "r.html").read_text()
    assert ('<span class="bad">1 of 2 points have wrong results</span> (every job checked: 6 measurements)'
            in page)
    table = page.split('<table class="summary">')[1].split("</table>")[0]
    cells = re.findall(r"<td>(.*?)</td>", table)
    median = results[results.job == 3]  # the job of median 20
    peak = median.busbw_gbps.max()
    assert cells[:3] == ["rep", "all_reduce", "2"]
    assert cells[3].startswith(f"{peak:.3g} <span") and peak < results.busbw_gbps.max()
    assert cells[4].startswith(f"{median[median.size_bytes == 1024].time_us.iloc[0]:.3g} µs")
    assert cells[-1] == '<span class="bad">5 / 1</span> <span class="muted">of 2 points</span>'
    assert re.findall(r"<th>(.*?)</th>", table)[5:] == ["fastest &lt; 64K", "fastest 64K – 8M",
                                                       "wrong elements / points with errors"]


def test_the_table_leaves_out_bands_nothing_measured_and_escapes_names():
    rows = pd.DataFrame([{"run": "<b>x</b>", "point": 0, "collective": "all_reduce", "backend": "mpi",
                          "algorithm": "<i>", "world_size": 2, "size_bytes": 8, "time_us": 1.0,
                          "busbw_gbps": float("nan"), "wrong": 0}])
    table = summary_table(summarize(rows, rows))
    assert "<b>" not in table and "<i>" not in table and "&lt;b&gt;x&lt;/b&gt;" in table
    assert "64K – 8M" not in table and "fastest &lt; 64K" in table and "<td>–</td>" in table  # no busbw


def test_the_report_shows_what_the_terminal_flags_unreliable(tmp_path):
    """A point measured beside other work is correct but its time is not to be trusted: the headline says
    how many, the points table has the unreliable and background columns and marks the row, the charts draw
    it hollow. A run with nothing flagged says nothing of it."""
    run = write_run(tmp_path / "busy", [10.0])
    results = pd.read_csv(run / "results.csv")
    results["unreliable"] = results.unreliable.astype(object)
    results.loc[results.point == 1, ["unreliable", "background_cores"]] = ["busy machine (1.5 cores of other work)", 1.5]
    results.to_csv(run / "results.csv", index=False)
    page = build_report([str(run)], tmp_path / "r.html").read_text()
    assert ('<span class="ok">all 2 points correct</span>; <span class="warn">1 of them flagged unreliable</span> '
            "(their times are not to be trusted: the unreliable column of Every point says why; up to 1.5 cores' "
            "worth of other work beside the ranks)") in page
    points = page.split('id="points"')[1].split("</table>")[0]
    assert "<th>unreliable</th>" in points and "<th>background (cores)</th>" in points
    assert len(re.findall(r'<tr class="unreliable">', points)) == 1 and "busy machine (1.5 cores" in points
    assert '"symbol":["circle","circle-open"]' in page.replace(" ", "")
    quiet = build_report([str(write_run(tmp_path / "quiet", [10.0]))], tmp_path / "q.html").read_text()
    assert "flagged unreliable" not in quiet and '<tr class="unreliable">' not in quiet
