"""The report's charts (commbench/analysis/report/charts.py): the median job of a repeated point (the
lower middle of an even count, carrying the most wrong elements of any job), bandwidth and latency
per size with one line per series (wrong points red crosses, the p95 / min spread as error bars and
said so), log axes where values span a decade, speedups over a reference on the sizes both
measured, the topology-aware rows only of multi-node runs, power where rows carry it; every name
from a file escaped."""

import numpy as np
import pandas as pd
import pytest

from synthetic_runs import write_run

from commbench.folder.load import load_runs
from commbench.analysis.report.charts import (log_ticks, median_job, multi_node, power_charts, size_charts,
                                              speedup_chart)
from commbench.analysis.report.series import WRONG_COLOUR, Series

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
    assert bw.layout.title.text == "all_reduce: bus bandwidth" and lat.layout.title.text == "all_reduce: latency"
    assert bw.layout.xaxis.type == "log" and bw.layout.yaxis.type != "log"  # busbw 1..3: less than a decade
    assert list(bw.layout.xaxis.tickvals) == [8, 4096] and list(bw.layout.xaxis.ticktext) == ["8", "4K"]
    names = [t.name for t in bw.data]
    assert names == ["run-a · native", "run-a · ring"]  # what every series shares is left out (Series.shared)
    assert list(bw.data[0].x) == [8, 4096] and list(bw.data[0].y) == [1.0, 3.0] and list(lat.data[0].y) == [1.0, 4.0]
    assert [t.name for t in lat.data] == names and lat.data[0].error_y.array is None  # no p95: no bars
    everything = Series(rows.assign(dtype=["float32", "float32", "float32", "int8"]))  # the report's series
    assert size_charts(rows, "all_reduce", everything)[0].data[0].name == "run-a · native · float32"


def test_no_op_is_left_out_of_the_name_and_wrong_points_are_red():
    rows = _rows({"size_bytes": 8, "time_us": 1.0, "op": "none", "wrong": 2},
                 {"size_bytes": 16, "time_us": 1.0, "op": "none", "wrong": 3})
    bw, lat = size_charts(rows.assign(op=["none", "none"], dtype=["float32", "int8"]), "all_reduce")
    assert [t.name for t in bw.data] == ["run-a · float32", "run-a · int8"]
    bw, lat = size_charts(rows, "all_reduce")
    assert list(bw.data[0].marker.color) == [WRONG_COLOUR] * 2 and list(lat.data[0].marker.color) == [WRONG_COLOUR] * 2
    assert list(bw.data[0].marker.symbol) == ["x", "x"]
    clean = size_charts(_rows({"size_bytes": 8, "time_us": 1.0}), "all_reduce")[0]
    assert clean.data[0].marker.color == clean.data[0].line.color and clean.data[0].marker.symbol is None


def test_only_the_wrong_points_of_a_series_are_red():
    rows = _rows({"size_bytes": 8, "time_us": 1.0, "wrong": 0}, {"size_bytes": 16, "time_us": 1.0, "wrong": 3})
    bw, lat = size_charts(rows, "all_reduce")
    colours = list(bw.data[0].marker.color)
    assert colours == [bw.data[0].line.color, WRONG_COLOUR] and list(lat.data[0].marker.color) == colours


def test_error_bars_span_min_to_p95_never_below_zero():
    rows = _rows({"size_bytes": 8, "time_us": 10.0, "time_us_p95": 12.5, "time_us_min": 9.0},
                 {"size_bytes": 16, "time_us": 10.0, "time_us_p95": 9.0, "time_us_min": 11.0})  # inconsistent
    lat = size_charts(rows, "all_reduce")[1]
    bars = lat.data[0].error_y
    assert bars.symmetric is False and list(bars.array) == [2.5, 0.0] and list(bars.arrayminus) == [1.0, 0.0]
    assert "bars: smallest to 95th-percentile sample" in lat.layout.meta["note"]  # said where it is drawn
    assert [list(c) for c in lat.data[0].customdata] == [[9.0, 12.5], [11.0, 9.0]]  # and in the hover text


def test_names_and_titles_from_files_are_escaped():
    evil = '<img src=x onerror="alert(1)">\x1b[31m'
    rows = _rows({"size_bytes": 8, "time_us": 1.0, "run": evil, "collective": evil, "dtype": "<b>"},
                 {"size_bytes": 8, "time_us": 1.0, "run": evil, "collective": evil, "dtype": "<i>", "backend": "<u>"})
    assert "<" not in Series(rows.iloc[:1]).shared() and "&lt;b&gt;" in Series(rows.iloc[:1]).shared()
    for fig in size_charts(rows, evil):
        text = fig.layout.title.text + "".join(t.name for t in fig.data)
        assert "<" not in text and "\x1b" not in text
        assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;\\x1b[31m" in fig.data[0].name
        assert "&lt;b&gt;" in "".join(t.name for t in fig.data) and "&lt;u&gt;" in fig.data[0].name


# --- speedups ---------------------------------------------------------------------------------------------

def _algorithms() -> pd.DataFrame:
    return _rows(*({"algorithm": "native", "size_bytes": s, "time_us": t} for s, t in ((8, 10.0), (16, 20.0),
                                                                                          (32, 40.0))),
                 *({"algorithm": "ring", "size_bytes": s, "time_us": t} for s, t in ((32, 10.0), (8, 5.0))),
                 *({"algorithm": "hierarchical", "size_bytes": s, "time_us": t} for s, t in ((16, 40.0),)),
                 {"algorithm": "ring", "size_bytes": 8, "time_us": 1.0, "world_size": 8})  # no native at 8 ranks


def test_speedup_is_the_references_time_over_the_algorithms_on_common_sizes():
    rows = _algorithms()
    fig = speedup_chart(rows, "all_reduce", "native", "each algorithm vs native")
    assert fig.layout.title.text == "all_reduce: each algorithm vs native"
    by_name = {t.name: (list(t.x), list(t.y)) for t in fig.data}
    assert by_name == {"run-a · hierarchical vs native · 4 ranks": ([16], [0.5]),
                       "run-a · ring vs native · 4 ranks": ([8, 32], [2.0, 4.0])}
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].y0 == 1.0  # the line of no speedup
    series = Series(rows)  # each line in its algorithm's colour, as in the bandwidth chart
    ring = size_charts(rows, "all_reduce", series)[0].data[2]
    assert ring.name == "run-a · ring · 4 ranks" and fig.data[1].line.color == ring.line.color


def test_only_the_algorithms_asked_for_and_none_without_a_pair():
    fig = speedup_chart(_algorithms(), "all_reduce", "native", "t", only=["hierarchical"])
    assert [t.name.split(" · ")[1] for t in fig.data] == ["hierarchical vs native"]
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
    assert power.layout.title.text == "all_reduce: average power" and energy.layout.yaxis.type != "log"  # 1..2e-9
    assert list(power.data[0].x) == [8, 16] and list(power.data[0].y) == [250.0, 300.0]
    assert list(energy.data[0].y) == [2e-9, 1e-9]
    half = rows.assign(power_w_avg=[300.0, np.nan])  # a point without a reading is left out
    assert list(power_charts(half, "all_reduce")[0].data[0].x) == [16]
    assert power_charts(half, "all_reduce")[1].data == ()  # no energy per byte column: an empty chart


def test_power_charts_draw_the_cpus_next_to_the_gpus():
    rows = _rows({"size_bytes": 8, "time_us": 1.0}, {"size_bytes": 16, "time_us": 1.0})
    cpu_only = rows.assign(cpu_power_w_avg=[40.0, 42.0], cpu_energy_j_per_byte=[5e-6, 3e-6])
    power, energy = power_charts(cpu_only, "all_reduce")
    assert [t.name for t in power.data] == ["run-a"]
    assert list(power.data[0].y) == [40.0, 42.0] and list(energy.data[0].y) == [5e-6, 3e-6]
    both = cpu_only.assign(power_w_avg=[300.0, 310.0], energy_j_per_byte=[1e-9, 2e-9])
    power, energy = power_charts(both, "all_reduce")
    assert [t.name.rsplit(" · ", 1)[1] for t in power.data] == ["GPU", "CPU"] and len(energy.data) == 2
    assert power.data[0].line.color == power.data[1].line.color and power.data[1].line.dash == "dot"
    assert energy.layout.yaxis.type == "log"  # 1e-9 .. 5e-6: decades apart
    assert list(energy.data[1].y) == [5e-6, 3e-6]


# --- log axes, stable styles, multi-node rows ---------------------------------------------------------

def test_the_bandwidth_axis_is_log_where_a_cpu_run_sits_beside_a_gpu_import():
    cpu = _rows({"size_bytes": 8, "time_us": 1.0, "busbw_gbps": 0.05}, {"size_bytes": 1 << 20, "time_us": 500.0,
                                                                          "busbw_gbps": 3.8})
    bw = size_charts(cpu, "all_reduce")[0]
    assert bw.layout.yaxis.type == "log"  # 0.05 .. 3.8: almost two decades
    assert list(bw.layout.yaxis.tickvals) == log_ticks([0.05, 3.8]) and "0.05" in bw.layout.yaxis.ticktext
    assert bw.layout.yaxis.title.text == "busbw (GB/s), log scale"
    gpu = _rows({"size_bytes": 1 << 30, "time_us": 5000.0, "busbw_gbps": 440.0, "run": "nccl-tests"})
    both = size_charts(pd.concat([_rows({"size_bytes": 8, "time_us": 1.0, "busbw_gbps": 2.0}), gpu]), "all_reduce")[0]
    assert both.layout.yaxis.type == "log"
    flat = size_charts(_rows({"size_bytes": 8, "time_us": 1.0, "busbw_gbps": 2.0},
                             {"size_bytes": 16, "time_us": 1.5, "busbw_gbps": 19.0}), "all_reduce")
    assert [f.layout.yaxis.type for f in flat] == [None, None]  # less than a decade: linear, untouched


def test_log_ticks_are_one_two_five_per_decade_and_decades_only_past_four():
    assert log_ticks([0.3, 7.0]) == [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
    assert log_ticks([0.002, 440.0]) == [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]


def test_a_series_keeps_its_colour_in_every_chart_and_collective():
    rows = _rows(*({"size_bytes": 8, "time_us": 1.0, "algorithm": a, "run": r, "collective": c,
                    "op": "sum" if c == "all_reduce" else "none"}
                   for a in ("native", "ring") for r in ("x/native", "y/native") for c in ("all_reduce", "all_gather")))
    rows = rows[~((rows.collective == "all_gather") & (rows.run == "x/native") & (rows.algorithm == "native"))]
    series = Series(rows)  # a series absent from one collective shifts no other series' colour there
    colours = {}
    for collective in ("all_reduce", "all_gather"):
        for fig in size_charts(rows, collective, series):
            for t in fig.data:
                colours.setdefault(t.name, set()).add((t.line.color, t.line.dash))
    assert len(colours) == 4 and all(len(c) == 1 for c in colours.values())  # one style per name everywhere
    assert len({next(iter(c)) for c in colours.values()}) == 4  # and no two series alike
    alone = Series(rows[rows.run == "y/native"])  # the mapping is the report's, not a chart's
    assert series.colour(("y/native", "mpi", "ring", "float32", "sum", "out-of-place", 4)) != alone.colour(
        ("y/native", "mpi", "ring", "float32", "sum", "out-of-place", 4))


def test_the_topology_aware_chart_reads_only_multi_node_rows():
    rows = _rows({"algorithm": "ring", "size_bytes": 8, "time_us": 2.0, "nodes": 1},
                 {"algorithm": "hierarchical", "size_bytes": 8, "time_us": 1.0, "nodes": 1})
    assert speedup_chart(multi_node(rows), "all_reduce", "ring", "t", only=["hierarchical"]) is None
    assert multi_node(rows.drop(columns="nodes")).empty  # a run that does not say is not multi-node
    two = rows.assign(nodes=2)
    fig = speedup_chart(multi_node(two), "all_reduce", "ring", "t", only=["hierarchical"])
    assert [list(t.y) for t in fig.data] == [[2.0]]
