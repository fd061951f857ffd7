"""The report's charts (commbench/analysis/report/charts.py): the median job of a repeated point (the
lower middle of an even count, carrying the most wrong elements of any job), bandwidth and latency
per size with one line per series (wrong points red, the p95 / min spread as error bars), speedups
over a reference on the sizes both measured, power where rows carry it; every name from a file
escaped."""

import numpy as np
import pandas as pd
import pytest

from synthetic_runs import write_run

from commbench.analysis.load import load_runs
from commbench.analysis.report.charts import median_job, power_charts, size_charts, speedup_chart

DEFAULTS = {"run_id": "r", "run": "run-a", "collective": "all_reduce", "backend": "mpi", "algorithm": "native",
            "dtype": "float32", "op": "sum", "mode": "out-of-place", "world_size": 4, "wrong": 0, "busbw_gbps": 1.0,
            "time_us_p95": np.nan, "time_us_min": np.nan, "job": 1}


def _rows(*records) -> pd.DataFrame:
    return pd.DataFrame([{**DEFAULTS, **r} for r in records])


# --- the median job -----------------------------------------------------------------------------------

def test_one_job_is_left_as_it_is():
    rows = _rows({"point": 0, "size_bytes": 8, "time_us": 1.0}, {"point": 1, "size_bytes": 16, "time_us": 2.0})
    assert median_job(rows) is rows
    assert median_job(rows.drop(columns="job")).equals(rows.drop(columns="job"))


@pytest.mark.parametrize("times,chosen", [([10.0, 30.0, 20.0], 3), ([10.0, 30.0], 1), ([40.0, 10.0, 30.0, 20.0], 4),
                                          ([5.0, 5.0, 5.0], 2)])
def test_the_job_of_the_median_time_is_kept_the_lower_middle_of_an_even_count(times, chosen):
    rows = _rows(*({"point": 0, "size_bytes": 8, "time_us": t, "job": j} for j, t in enumerate(times, 1)))
    one = median_job(rows)
    assert len(one) == 1 and one.job.iloc[0] == chosen and one.time_us.iloc[0] == sorted(times)[(len(times) - 1) // 2]


def test_the_median_job_carries_the_most_wrong_elements_of_the_point():
    rows = _rows({"point": 0, "size_bytes": 8, "time_us": 1.0, "job": 1, "wrong": 0},
                 {"point": 0, "size_bytes": 8, "time_us": 2.0, "job": 2, "wrong": 0},
                 {"point": 0, "size_bytes": 8, "time_us": 3.0, "job": 3, "wrong": 7},
                 {"point": 1, "size_bytes": 16, "time_us": 1.0, "job": 1, "wrong": 0},
                 {"point": 1, "size_bytes": 16, "time_us": 2.0, "job": 2, "wrong": 0},
                 {"point": 1, "size_bytes": 16, "time_us": 3.0, "job": 3, "wrong": 0})
    one = median_job(rows)
    assert list(one.point) == [0, 1] and list(one.job) == [2, 2] and list(one.wrong) == [7, 0]
    assert list(rows.wrong) == [0, 0, 7, 0, 0, 0]  # the rows given are left alone


def test_points_of_different_runs_are_apart(tmp_path):
    a = write_run(tmp_path / "a", [10.0, 30.0, 20.0], run_id="ra")
    b = write_run(tmp_path / "b", [5.0, 1.0, 3.0], run_id="rb")
    rows, _ = load_runs([a, b])
    one = median_job(rows)
    assert sorted(zip(one.run_id, one.point, one.job)) == [("ra", 0, 3), ("ra", 1, 3), ("rb", 0, 3), ("rb", 1, 3)]


# --- bandwidth and latency ----------------------------------------------------------------------------

def test_one_line_per_series_sorted_by_size():
    rows = _rows({"size_bytes": 4096, "time_us": 4.0, "busbw_gbps": 3.0}, {"size_bytes": 8, "time_us": 1.0},
                 {"size_bytes": 8, "time_us": 2.0, "algorithm": "ring"},
                 {"size_bytes": 8, "time_us": 9.0, "collective": "all_gather"})
    bw, lat = size_charts(rows, "all_reduce")
    assert bw.layout.title.text == "all_reduce: bus bandwidth" and lat.layout.title.text == "all_reduce: latency (median)"
    assert bw.layout.xaxis.type == "log" and lat.layout.yaxis.type == "log" and bw.layout.yaxis.type != "log"
    names = [t.name for t in bw.data]
    assert names == ["run-a · mpi native · float32 sum · out-of-place · 4 ranks",
                     "run-a · mpi ring · float32 sum · out-of-place · 4 ranks"]
    assert list(bw.data[0].x) == [8, 4096] and list(bw.data[0].y) == [1.0, 3.0] and list(lat.data[0].y) == [1.0, 4.0]
    assert [t.name for t in lat.data] == names and lat.data[0].error_y.array is None  # no p95: no bars


def test_no_op_is_left_out_of_the_name_and_wrong_points_are_red():
    rows = _rows({"size_bytes": 8, "time_us": 1.0, "op": "none", "wrong": 2},
                 {"size_bytes": 16, "time_us": 1.0, "op": "none", "wrong": 3})
    bw, lat = size_charts(rows, "all_reduce")
    assert bw.data[0].name == "run-a · mpi native · float32 · out-of-place · 4 ranks"
    assert list(bw.data[0].marker.color) == ["red", "red"] and list(lat.data[0].marker.color) == ["red", "red"]
    clean = size_charts(_rows({"size_bytes": 8, "time_us": 1.0}), "all_reduce")[0]
    assert clean.data[0].marker.color is None


def test_only_the_wrong_points_of_a_series_are_red():
    rows = _rows({"size_bytes": 8, "time_us": 1.0, "wrong": 0}, {"size_bytes": 16, "time_us": 1.0, "wrong": 3})
    bw, lat = size_charts(rows, "all_reduce")
    colours = list(bw.data[0].marker.color)
    assert colours[1] == "red" and colours[0] != "red" and list(lat.data[0].marker.color) == colours


def test_error_bars_span_min_to_p95_never_below_zero():
    rows = _rows({"size_bytes": 8, "time_us": 10.0, "time_us_p95": 12.5, "time_us_min": 9.0},
                 {"size_bytes": 16, "time_us": 10.0, "time_us_p95": 9.0, "time_us_min": 11.0})  # inconsistent
    lat = size_charts(rows, "all_reduce")[1]
    bars = lat.data[0].error_y
    assert bars.symmetric is False and list(bars.array) == [2.5, 0.0] and list(bars.arrayminus) == [1.0, 0.0]


def test_names_and_titles_from_files_are_escaped():
    evil = '<img src=x onerror="alert(1)">\x1b[31m'
    rows = _rows({"size_bytes": 8, "time_us": 1.0, "run": evil, "collective": evil, "dtype": "<b>"})
    for fig in size_charts(rows, evil):
        text = fig.layout.title.text + "".join(t.name for t in fig.data)
        assert "<" not in text and "\x1b" not in text
        assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;\\x1b[31m" in fig.data[0].name
        assert "&lt;b&gt;" in fig.data[0].name


# --- speedups ---------------------------------------------------------------------------------------------

def _algorithms() -> pd.DataFrame:
    return _rows(*({"algorithm": "native", "size_bytes": s, "time_us": t} for s, t in ((8, 10.0), (16, 20.0),
                                                                                          (32, 40.0))),
                 *({"algorithm": "ring", "size_bytes": s, "time_us": t} for s, t in ((32, 10.0), (8, 5.0))),
                 *({"algorithm": "hierarchical", "size_bytes": s, "time_us": t} for s, t in ((16, 40.0),)),
                 {"algorithm": "ring", "size_bytes": 8, "time_us": 1.0, "world_size": 8})  # no native at 8 ranks


def test_speedup_is_the_references_time_over_the_algorithms_on_common_sizes():
    fig = speedup_chart(_algorithms(), "all_reduce", "native", "each algorithm vs native")
    assert fig.layout.title.text == "all_reduce: each algorithm vs native"
    by_name = {t.name: (list(t.x), list(t.y)) for t in fig.data}
    assert by_name == {"run-a · mpi hierarchical vs native · float32 sum · out-of-place · 4 ranks": ([16], [0.5]),
                       "run-a · mpi ring vs native · float32 sum · out-of-place · 4 ranks": ([8, 32], [2.0, 4.0])}
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].y0 == 1.0  # the line of no speedup


def test_only_the_algorithms_asked_for_and_none_without_a_pair():
    fig = speedup_chart(_algorithms(), "all_reduce", "native", "t", only=["hierarchical"])
    assert [t.name.split(" · ")[1] for t in fig.data] == ["mpi hierarchical vs native"]
    assert speedup_chart(_algorithms(), "all_reduce", "tree", "t") is None  # no reference measured
    assert speedup_chart(_algorithms(), "all_gather", "native", "t") is None
    assert speedup_chart(_algorithms(), "all_reduce", "native", "t", only=["rhd"]) is None
    apart = _rows({"algorithm": "native", "size_bytes": 8, "time_us": 1.0},
                  {"algorithm": "ring", "size_bytes": 16, "time_us": 1.0})
    assert speedup_chart(apart, "all_reduce", "native", "t") is None  # no size in common


# --- power ----------------------------------------------------------------------------------------------

def test_power_charts_only_where_rows_carry_power():
    rows = _rows({"size_bytes": 16, "time_us": 1.0}, {"size_bytes": 8, "time_us": 1.0})
    assert power_charts(rows, "all_reduce") == []
    assert power_charts(rows.assign(power_w_avg=np.nan), "all_reduce") == []
    measured = rows.assign(power_w_avg=[300.0, 250.0], energy_j_per_byte=[1e-9, 2e-9])
    assert power_charts(measured, "all_gather") == []
    power, energy = power_charts(measured, "all_reduce")
    assert power.layout.title.text == "all_reduce: average power" and energy.layout.yaxis.type == "log"
    assert list(power.data[0].x) == [8, 16] and list(power.data[0].y) == [250.0, 300.0]
    assert list(energy.data[0].y) == [2e-9, 1e-9]
    half = rows.assign(power_w_avg=[300.0, np.nan])  # a point without a reading is left out
    assert list(power_charts(half, "all_reduce")[0].data[0].x) == [16]
    assert power_charts(half, "all_reduce")[1].data == ()  # no energy per byte column: an empty chart


def test_power_charts_draw_the_cpus_next_to_the_gpus():
    rows = _rows({"size_bytes": 8, "time_us": 1.0}, {"size_bytes": 16, "time_us": 1.0})
    cpu_only = rows.assign(cpu_power_w_avg=[40.0, 42.0], cpu_energy_j_per_byte=[5e-6, 3e-6])
    power, energy = power_charts(cpu_only, "all_reduce")
    assert [t.name for t in power.data] == ["run-a · mpi native · float32 sum · out-of-place · 4 ranks"]
    assert list(power.data[0].y) == [40.0, 42.0] and list(energy.data[0].y) == [5e-6, 3e-6]
    both = cpu_only.assign(power_w_avg=[300.0, 310.0], energy_j_per_byte=[1e-9, 2e-9])
    power, energy = power_charts(both, "all_reduce")
    assert [t.name.rsplit(" · ", 1)[1] for t in power.data] == ["GPU", "CPU"] and len(energy.data) == 2
    assert list(energy.data[1].y) == [5e-6, 3e-6]
