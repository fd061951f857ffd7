"""The run's tables in nccl-tests' layout (commbench/presentation/console.py, commbench/presentation/tables.py), fed
with rank 0's row events in the plan's order (a table's out-of-place sizes, then its in-place ones):
out-of-place and in-place of a size on one line, printed as soon as both halves are in (or at the
table's end where one never comes); a mode that is not measured leaves its half out; `# Avg bus
bandwidth` under every table; a row flagged unreliable ends with `!` and is named under the table
and counted in the closing summary; --repeat prints one line per job's table, then one table of
each point's median over the jobs with their spread; the suite's progress bar."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from commbench.folder.schema import build_row
from commbench.presentation.console import Renderer, summary_text

HEAD_BOTH = [
    "#                                                  out-of-place                                in-place",
    "#     size      count     type redop      time    algbw    busbw #wrong  iters      time    algbw    busbw #wrong  iters",
    "#      (B) (elements)                     (us)   (GB/s)   (GB/s)                    (us)   (GB/s)   (GB/s)",
]
HEAD_ONE = [
    "#     size      count     type redop      time    algbw    busbw #wrong  iters",
    "#      (B) (elements)                     (us)   (GB/s)   (GB/s)",
]


def _renderer(**kwargs) -> Renderer:
    renderer = Renderer(**kwargs)
    renderer.console = Console(file=io.StringIO(), width=300, highlight=False, soft_wrap=True)
    return renderer


def _lines(renderer) -> list[str]:
    """The tables' lines; not the lines that say an out-of-place half was measured while its table line waits
    (a log's progress: tests/presentation/test_console.py)."""
    return [line for line in renderer.console.file.getvalue().splitlines() if not line.startswith("  measured ")]


def _row(size: int, in_place: bool, time_us: float, job: int = 1, collective="all_reduce", wrong=0, **fields) -> dict:
    return build_row(run_id="r", point=0, collective=collective, backend="mpi", algorithm="native", device="cpu",
                     dtype="float32", op="sum" if collective != "all_gather" else "none", in_place=int(in_place),
                     world_size=2, size_bytes=size, count=size // 4, time_us=time_us, samples=10, iterations=200,
                     wrong=wrong, job=job, **fields)


def _ready(total=6, **extra) -> dict:
    return {"event": "ready", "world_size": 2, "nodes": 1, "hosts": ["vm"], "total": total, **extra}


def _feed(renderer, *rows):
    for row in rows:
        renderer({"event": "row", "row": row})


def test_both_modes_of_a_size_share_one_line_with_the_average_bus_bandwidth_under_the_table():
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(8, False, 0.16), _row(1024, False, 0.32), _row(65536, False, 10.24))
    assert len(_lines(renderer)) == 1  # the out-of-place halves wait for their in-place halves
    renderer({"event": "row", "row": _row(8, True, 0.2)})
    assert _lines(renderer)[1:] == ["", "# all_reduce · mpi · native · float32 · sum · 2 ranks", *HEAD_BOTH,
        "         8          2  float32   sum      0.16    0.050    0.050      0    200      0.20    0.040    0.040      0    200"]
    _feed(renderer, _row(1024, True, 0.4), _row(65536, True, 8.192))
    renderer({"event": "done"})
    assert _lines(renderer)[7:] == [
        "      1024        256  float32   sum      0.32    3.200    3.200      0    200      0.40    2.560    2.560      0    200",
        "     65536      16384  float32   sum     10.24    6.400    6.400      0    200      8.19    8.000    8.000      0    200",
        "# Avg bus bandwidth    : 3.375 GB/s (mean busbw of the 6 points above, out-of-place and in-place)",
    ]
    assert (0.05 + 3.2 + 6.4 + 0.04 + 2.56 + 8.0) / 6 == 3.375


def test_the_bus_factor_shows_in_busbw_and_a_collective_without_op_has_none():
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(1024, False, 0.32, collective="all_gather"), _row(1024, True, 0.4, collective="all_gather"))
    renderer({"event": "done"})
    assert _lines(renderer)[2:] == ["# all_gather · mpi · native · float32 · 2 ranks", *HEAD_BOTH,
        "      1024        256  float32  none      0.32    3.200    1.600      0    200      0.40    2.560    1.280      0    200",
        "# Avg bus bandwidth    : 1.440 GB/s (mean busbw of the 2 points above, out-of-place and in-place)"]


def test_only_out_of_place_measured_is_one_half_printed_when_the_table_ends():
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(8, False, 0.16), _row(1024, False, 0.32))
    renderer({"event": "start", "point": {"collective": "all_gather", "backend": "mpi", "algorithm": "native",
                                          "dtype": "float32", "op": None, "in_place": False, "size": 8, "index": 2}})
    assert _lines(renderer)[2:] == ["# all_reduce · mpi · native · float32 · sum · out-of-place · 2 ranks", *HEAD_ONE,
        "         8          2  float32   sum      0.16    0.050    0.050      0    200",
        "      1024        256  float32   sum      0.32    3.200    3.200      0    200",
        "# Avg bus bandwidth    : 1.625 GB/s (mean busbw of the 2 points above, out-of-place)"]


def test_a_caller_that_knows_the_modes_gets_each_line_at_once():
    renderer = _renderer(modes={"all_reduce": [False]})
    renderer(_ready())
    _feed(renderer, _row(8, False, 0.16))
    assert _lines(renderer)[-1] == "         8          2  float32   sum      0.16    0.050    0.050      0    200"
    both = _renderer(modes={"all_reduce": [True, False]})
    both(_ready())
    _feed(both, _row(8, False, 0.16))
    assert _lines(both)[2:] == ["# all_reduce · mpi · native · float32 · sum · 2 ranks", *HEAD_BOTH]  # waits
    # each collective its own modes: one without an in-place form (all_to_allv) streams beside one that has both
    mixed = _renderer(modes={"all_reduce": [True, False], "all_to_allv": [False]})
    mixed(_ready())
    _feed(mixed, _row(8, False, 0.16) | {"collective": "all_to_allv", "op": "none"})
    assert _lines(mixed)[-1].startswith("         8          2  float32  none      0.16")


def test_only_in_place_measured_streams_one_half():
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(8, True, 0.2))
    assert _lines(renderer)[2:] == ["# all_reduce · mpi · native · float32 · sum · in-place · 2 ranks", *HEAD_ONE,
        "         8          2  float32   sum      0.20    0.040    0.040      0    200"]


def test_a_half_that_was_skipped_shows_dashes():
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(8, False, 0.16), _row(1024, False, 0.32), _row(1024, True, 0.4), _row(4096, True, 0.8))
    renderer({"event": "done"})
    assert _lines(renderer)[6:9] == [
        "         8          2  float32   sum      0.16    0.050    0.050      0    200         -        -        -      -      -",
        "      1024        256  float32   sum      0.32    3.200    3.200      0    200      0.40    2.560    2.560      0    200",
        "      4096       1024  float32   sum         -        -        -      -      -      0.80    5.120    5.120      0    200"]


def _skip(size: int, collective: str, reason: str) -> dict:
    point = {"backend": "mpi", "collective": collective, "algorithm": "native", "dtype": "float32",
             "op": "sum", "in_place": 0, "size": size, "index": size}
    return {"event": "skip", "point": point, "reason": reason}


def test_a_skip_is_said_under_its_own_table_never_inside_another():
    """A skipped point of the next collective ends the open table first; one of the open table's own
    sizes is said under that table's footer, not between its lines."""
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(8, False, 0.16))
    renderer(_skip(4, "all_reduce", "less than one element"))
    _feed(renderer, _row(16, False, 0.2))
    renderer(_skip(8, "all_gather", "less than one element per rank"))
    renderer(_skip(9, "all_gather", "9 B rounds to 8 B over 2 ranks, measured as size 8"))  # another kind: said
    renderer(_skip(10, "all_gather", "10 B rounds to 8 B over 2 ranks, measured as size 8"))  # the same kind: once
    _feed(renderer, _row(16, False, 0.3, collective="all_gather"))
    renderer({"event": "done"})
    lines = [line for line in _lines(renderer) if line]
    assert [line.split()[0] for line in lines[1:]] == [
        "#", "#", "#", "8", "16", "#", "skipped",  # all_reduce's table, its footer, its own skip
        "skipped", "skipped", "#", "#", "#", "16", "#"]  # all_gather's skips before all_gather's table
    assert lines[9].endswith("9 B rounds to 8 B over 2 ranks, measured as size 8")
    assert lines[6].startswith("# Avg bus bandwidth") and lines[7].startswith("skipped all_reduce")
    assert lines[8].startswith("skipped all_gather") and lines[10].startswith("# all_gather")


def test_an_unreliable_point_is_marked_named_under_its_table_and_counted_in_the_summary():
    renderer = _renderer()
    renderer(_ready())
    _feed(renderer, _row(8, False, 0.16), _row(8, True, 0.2, unreliable="background load: 1.4 cores"),
          _row(16, False, 0.16, unreliable="spread: p95 is 3.1x the median"))
    renderer({"event": "done"})
    lines = _lines(renderer)
    assert lines[6].endswith("      0.20    0.040    0.040      0    200 !")
    assert lines[7].endswith("      -      - !") and lines[7].startswith("        16")
    assert lines[8].startswith("# Avg bus bandwidth")
    assert lines[9] == ("# ! 2 point(s) unreliable: background load (8 in-place), spread (16 out-of-place) "
                        "(the rows' `unreliable` column says how much)")
    assert renderer.flagged == 2
    flagged = [{"unreliable": "spread"}, {"unreliable": "busy machine"}, {}]
    result = SimpleNamespace(rows=flagged, skipped=[{}], out_dir=Path("results/x"), unreliable=2)
    assert summary_text(result) == ("3 points measured (2 unreliable: see the ! lines), 1 skipped; "
                                    "results in results/x")
    assert summary_text(result, quiet=True) == ("3 points measured (2 unreliable: the rows' `unreliable` column), "
                                                "1 skipped; results in results/x")  # --quiet prints no ! line
    resumed = SimpleNamespace(rows=flagged, skipped=[], out_dir=Path("x"), unreliable=5, in_run=9)
    assert summary_text(resumed) == ("3 points measured, 9 in the run (5 unreliable: the rows' `unreliable` "
                                     "column), 0 skipped; results in x")  # 3 of the 5 were flagged before
    complete = SimpleNamespace(rows=[], skipped=[{}], out_dir=Path("x"), unreliable=0, in_run=9)
    assert summary_text(complete) == "0 points measured: the run was complete, 9 in it, 1 skipped; results in x"
    assert summary_text(SimpleNamespace(rows=[{"unreliable": ""}], skipped=[], out_dir=Path("x"))) == (
        "1 points measured, 0 skipped; results in x")
    loaded = [{"background_cores": c} for c in (0.02, 0.05, 1.4, "")]  # every run says its neighbours' load
    assert summary_text(SimpleNamespace(rows=loaded, skipped=[], out_dir=Path("x"))) == (
        "4 points measured, 0 skipped; other work beside the ranks 0.05 cores (median; at most 1.4); results in x")


def test_a_wrong_point_is_red():
    renderer = _renderer()
    renderer.console = Console(file=io.StringIO(), width=300, force_terminal=True, color_system="standard",
                               highlight=False)
    _feed(renderer, _row(8, True, 0.2, wrong=3), _row(16, True, 0.2))
    shown = renderer.console.file.getvalue()
    assert "\x1b[1;31m         8          2  float32   sum      0.20    0.040    0.040      3    200\x1b[0m" in shown
    assert "\n        16          4  float32   sum      0.20    0.080    0.080      0    200\n" in shown


def test_the_unreliable_line_groups_points_by_reason_and_stays_short():
    renderer = _renderer()
    renderer(_ready())
    sizes = [1 << k for k in range(3, 13)]
    _feed(renderer, *[_row(n, False, 1.0, unreliable=f"busy machine: {n % 7} cores; uncertain median: {n}..{n + 1}")
                      for n in sizes], _row(8, True, 1.0, unreliable="busy machine: 0.5 cores"),
          _row(16, True, 1.0, unreliable="2 samples cannot bound the median (6 or more can)"),
          _row(32, True, 1.0, unreliable="5 samples cannot bound the median (6 or more can)"))
    renderer({"event": "done"})
    assert _lines(renderer)[-1] == (
        "# ! 13 point(s) unreliable: busy machine (8, 16, 32, 64, 128, 256 and 4 more out-of-place; 1 in-place), "
        "uncertain median (8, 16, 32, 64, 128, 256 and 4 more out-of-place), samples cannot bound the median "
        "(16, 32 in-place) (the rows' `unreliable` column says how much)")


def test_repeat_prints_a_line_per_job_then_the_median_of_the_jobs_with_their_spread():
    renderer = _renderer()
    renderer(_ready(total=12, repeat=3))
    for job, times in ((1, (1.0, 10.0)), (2, (1.2, 12.0)), (3, (0.8, 20.0))):
        _feed(renderer, _row(8, False, times[0], job), _row(1024, False, times[1], job),
              _row(8, True, times[0], job, unreliable="busy" if job == 2 else ""), _row(1024, True, times[1], job))
    renderer({"event": "done"})
    assert _lines(renderer)[1:] == [
        "job 1 of 3 · all_reduce · mpi · native · float32 · sum: 4 points, avg busbw 0.055 GB/s",
        "job 2 of 3 · all_reduce · mpi · native · float32 · sum: 4 points, avg busbw 0.046 GB/s, 1 unreliable",
        "job 3 of 3 · all_reduce · mpi · native · float32 · sum: 4 points, avg busbw 0.031 GB/s",
        "",
        "# all_reduce · mpi · native · float32 · sum · 2 ranks · median of 3 jobs",
        "#                                                  out-of-place                                in-place",
        "#     size      count     type redop      time    algbw    busbw #wrong spread      time    algbw    busbw #wrong spread",
        "#      (B) (elements)                     (us)   (GB/s)   (GB/s)           (%)      (us)   (GB/s)   (GB/s)           (%)",
        "         8          2  float32   sum      1.00    0.008    0.008      0   40.0      1.00    0.008    0.008      0   40.0 !",
        "      1024        256  float32   sum     12.00    0.085    0.085      0   83.3     12.00    0.085    0.085      0   83.3",
        "# Avg bus bandwidth    : 0.047 GB/s (mean busbw of the 4 points above, out-of-place and in-place)",
        "# ! 1 point(s) unreliable: busy (8 in-place) (the rows' `unreliable` column says how much)",
    ]


def test_a_suite_gets_a_bar_over_all_its_points_across_runs():
    renderer = Renderer(suite_points=5)
    renderer.console = Console(file=io.StringIO(), width=200, force_terminal=True)
    try:
        renderer(_ready(total=2))
        _feed(renderer, _row(8, False, 0.1), _row(8, True, 0.1))
        renderer.close()  # between runs (sweep's on_run)
        renderer(_ready(total=3))
        suite, run = renderer.progress.tasks
        assert (suite.description, suite.total, suite.completed) == ("suite", 5, 2)
        assert (run.total, run.completed) == (3, 0)
        renderer({"event": "skip", "point": {"collective": "all_reduce", "backend": "mpi", "algorithm": "native",
                                             "dtype": "float32", "op": "sum", "in_place": False}, "reason": "r"})
        assert (suite.completed, run.completed) == (3, 1)
    finally:
        renderer.close()


def test_the_median_of_an_even_number_of_jobs_keeps_time_and_bandwidths_consistent():
    from commbench.presentation.tables import aggregate

    (point,) = aggregate([_row(1024, False, 1.0, job=1), _row(1024, False, 3.0, job=2, wrong=1)])
    assert (point["time_us"], point["jobs"], point["wrong"], point["iterations"]) == (2.0, 2, 1, 400)
    assert point["algbw_gbps"] == 1024 / 2e-6 / 1e9 and point["busbw_gbps"] == point["algbw_gbps"]  # 2 ranks: factor 1
    assert point["spread_pct"] == 100.0 and point["unreliable"] == ""
