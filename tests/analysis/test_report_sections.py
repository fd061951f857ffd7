"""The report's sections and charts appear only where they mean something: the speedup over native
where a run measured native and another algorithm, the topology-aware chart only for runs over
several nodes, power only where it was measured; every chart says what it draws."""

import re

import pandas as pd

from synthetic_runs import write_run

from commbench.analysis.report import build_report


def _run(path, algorithms=("native",), **columns):
    """A run folder (synthetic_runs) holding every algorithm given, each its own points, and columns set."""
    run = write_run(path, [10.0])
    one = pd.read_csv(run / "results.csv")
    rows = pd.concat([one.assign(algorithm=a, point=one.point + i * len(one), time_us=one.time_us * (1 + i))
                      for i, a in enumerate(algorithms)], ignore_index=True)
    rows.assign(**columns).to_csv(run / "results.csv", index=False)
    return run


def _captions(run, tmp_path) -> list[str]:
    page = build_report([str(run)], tmp_path / "r.html").read_text()
    return re.findall(r"<figcaption>(.*?)<span", page)


def test_a_one_node_run_has_no_topology_chart_nor_power(tmp_path):
    run = _run(tmp_path / "one", ("native", "ring", "hierarchical"), nodes=1)
    assert _captions(run, tmp_path) == ["all_reduce: bus bandwidth", "all_reduce: latency",
                                        "all_reduce: each algorithm vs native"]


def test_a_multi_node_run_has_its_topology_chart(tmp_path):
    run = _run(tmp_path / "two", ("native", "ring", "hierarchical"), nodes=2, ranks_per_node=1)
    captions = _captions(run, tmp_path)
    assert captions[-1] == "all_reduce: topology-aware vs flat ring (rank order)" and len(captions) == 4
    page = (tmp_path / "r.html").read_text()
    assert "runs over several nodes: time of the flat ring in rank order / time of the topology-aware" in page


def test_one_algorithm_has_no_speedup_chart_and_power_appears_where_measured(tmp_path):
    plain = _run(tmp_path / "plain")
    assert _captions(plain, tmp_path) == ["all_reduce: bus bandwidth", "all_reduce: latency"]
    measured = _run(tmp_path / "power", power_w_avg=250.0, energy_j_per_byte=1e-9)
    assert _captions(measured, tmp_path)[2:] == ["all_reduce: average power", "all_reduce: energy per byte"]
    empty = _run(tmp_path / "nan", power_w_avg=float("nan"))  # a column with no reading: no power charts
    assert len(_captions(empty, tmp_path)) == 2


def test_every_chart_says_what_it_draws_and_the_bars_are_explained(tmp_path):
    run = _run(tmp_path / "r", ("native", "ring"))
    page = build_report([str(run)], tmp_path / "r.html").read_text()
    notes = dict(re.findall(r'<figcaption>(.*?)<span class="muted">(.*?)</span>', page))
    assert set(notes) == {"all_reduce: bus bandwidth", "all_reduce: latency", "all_reduce: each algorithm vs native"}
    assert notes["all_reduce: latency"].startswith("median time per call; bars: smallest to 95th-percentile sample")
    assert "busbw" in notes["all_reduce: bus bandwidth"] and "time of native" in notes[
        "all_reduce: each algorithm vs native"]
