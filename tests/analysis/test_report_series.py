"""The report's series (commbench/analysis/report/series.py and load.run_names): runs that share a label
are told apart by their folders and never merged, names leave out what every series shares, a
series' colour is fixed once for the whole report, and an axis is logarithmic where its values span
a decade."""

import numpy as np
import pandas as pd
import pytest

from synthetic_runs import write_run

from commbench.folder.load import load_runs, run_names
from commbench.analysis.report.charts import median_job
from commbench.analysis.report.series import DASHES, LARGE_PALETTE, SMALL_PALETTE, Series, decades, log_scale


@pytest.mark.parametrize("folders,labels,names", [
    (["/s/ci_a/native", "/s/ci_b/native"], ["native", "native"], ["ci_a/native", "ci_b/native"]),
    (["/s/ci_a/native", "/s/ci_a/ring"], ["native", "ring"], ["native", "ring"]),  # labels differ: labels
    (["/r/run1", "/r/run2"], ["nightly", "nightly"], ["nightly (run1)", "nightly (run2)"]),
    (["/x/a/s/native", "/y/a/s/native"], ["native", "native"], ["x/a/s/native", "y/a/s/native"]),
    (["/s/ci_a/native", "/s/ci_a/native"], ["native", "native"], ["native", "native #2"]),  # the same folder twice
    (["/s/a", "/s/b"], [None, None], ["a", "b"]),  # no label: the folder's name, not the run id
    (["/r/20240101-x", "/r/20240101-y"], [None, None], ["20240101-x", "20240101-y"]),  # which may be the id
    (["/s/a/x", "/s/b/x", "/s/c"], ["x", "x", "x"], ["a/x", "b/x", "x (c)"]),
])
def test_runs_sharing_a_label_are_named_by_their_folders(folders, labels, names):
    metas = [{"label": label, "run_id": "id"} if label else {"run_id": "raw-id"} for label in labels]
    assert run_names(folders, metas) == names


def test_two_sweeps_of_one_suite_stay_two_runs(tmp_path):
    """The common case of the issue: `sweep ci` twice; a copy of a folder (same run id) too."""
    a = write_run(tmp_path / "ci_a" / "native", [10.0, 12.0, 11.0], run_id="ra")
    b = write_run(tmp_path / "ci_b" / "native", [20.0, 22.0, 21.0], run_id="rb")
    import shutil

    c = shutil.copytree(b, tmp_path / "copy" / "native")
    rows, metas = load_runs([tmp_path / "ci_a", tmp_path / "ci_b", tmp_path / "copy"])
    assert sorted(rows.run.unique()) == ["ci_a/native", "ci_b/native", "copy/native"]
    assert [m["label"] for _, m in metas] == ["native"] * 3  # the record itself is left as it is
    one = median_job(rows)
    assert one.groupby("run").size().to_dict() == {"ci_a/native": 2, "ci_b/native": 2, "copy/native": 2}
    assert set(one[one.run == "ci_a/native"].time_us) == set(rows[(rows.folder == str(a)) & (rows.job == 3)].time_us)
    assert set(rows[rows.run == "copy/native"].folder) == {str(c)}


def _rows(**columns) -> pd.DataFrame:
    base = {"run": "x", "backend": "mpi", "algorithm": "native", "dtype": "float32", "op": "sum",
            "mode": "out-of-place", "world_size": 2}
    return pd.DataFrame([{**base, **dict(zip(columns, values))} for values in zip(*columns.values())])


def test_a_name_says_what_tells_the_series_apart_and_shared_says_the_rest():
    series = Series(_rows(run=["a", "a", "b", "b"], algorithm=["native", "ring", "native", "ring"],
                          op=["sum", "sum", "none", "none"]))
    assert series.name(("a", "mpi", "ring", "float32", "sum", "out-of-place", 2)) == "a · ring"
    assert series.name(("b", "mpi", "native", "float32", "none", "out-of-place", 2), versus="ring") == \
        "b · native vs ring"
    assert series.shared() == "mpi · float32 · out-of-place · 2 ranks"  # all_gather's series have no op
    assert Series(_rows(run=["a", "b"])).shared() == "mpi native · float32 sum · out-of-place · 2 ranks"
    mixed = Series(_rows(backend=["mpi", "gloo"], mode=["in-place", "out-of-place"], world_size=[2, 4.0]))
    assert mixed.name(("x", "gloo", "native", "float32", "sum", "out-of-place", 4)) == \
        "x · gloo · out-of-place · 4 ranks"  # 4.0 read from a column with gaps is the key 4
    assert mixed.shared() == "native · float32 sum"


def test_colours_are_fixed_once_from_the_sorted_series_and_never_repeat():
    runs = [f"r{i:02d}" for i in range(12)]
    series = Series(_rows(run=runs[::-1]))  # given in any order
    styles = [(series.colour(k), series.dash(k)) for k in series.keys]
    assert [k[0] for k in series.keys] == runs and len(set(styles)) == 12
    assert [c for c, _ in styles] == list(LARGE_PALETTE[:12])  # past 10 series: the large palette
    small = Series(_rows(run=["b", "a"]))
    assert [small.colour(k) for k in small.keys] == list(SMALL_PALETTE[:2])
    many = Series(_rows(run=[f"r{i:02d}" for i in range(30)]))
    assert len({(many.colour(k), many.dash(k)) for k in many.keys}) == 30  # past the palette: dashed
    assert {many.dash(k) for k in many.keys} == set(DASHES[:2])


def test_two_ops_of_one_series_share_its_colour_and_differ_by_dash():
    series = Series(_rows(op=["sum", "max", "none"], run=["x", "x", "x"]))
    sum_, max_, none = (("x", "mpi", "native", "float32", op, "out-of-place", 2) for op in ("sum", "max", "none"))
    assert series.colour(sum_) == series.colour(max_) == series.colour(none)
    assert series.dash(max_) != series.dash(sum_) and series.dash(none) == "solid"


@pytest.mark.parametrize("values,spans,log", [
    ([0.09, 2.9], 1.508, True), ([1.0, 9.9], 0.996, False), ([1.0, 10.0], 1.0, True),
    ([0.0, -1.0, 5.0], 0.0, False), ([np.nan, "x", 3.0, 300.0], 2.0, True), ([], 0.0, False),
    ([0.31, 440.0], 3.152, True),  # a CPU run beside an imported 16-GPU nccl-tests run
])
def test_an_axis_is_logarithmic_where_its_values_span_a_decade(values, spans, log):
    assert decades(values) == pytest.approx(spans, abs=1e-3) and log_scale(values) is log
