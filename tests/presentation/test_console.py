"""The terminal view of a run (commbench/presentation/console.py): the Renderer fed with rank 0's events (the
opening line, one header per group of points, skips once per group, warnings even when quiet, rows
as JSON on stdout under --json), the progress bar on a terminal, AbRenderer's lines, the topology
comparison table; every string from outside escaped. The tables' layout (both modes on one line,
averages, unreliable points, --repeat's medians): tests/presentation/test_console_layout.py."""

from __future__ import annotations

import io
import json

import pandas as pd
from rich.console import Console

from commbench.folder.schema import COLUMNS, RANK_SUMMARY, build_row
from commbench.presentation import tables
from commbench.analysis.topology_comparison import group_tables
from commbench.presentation.console import AbRenderer, Renderer, comparison_table, format_line, group_title

POINT = {"collective": "all_reduce", "backend": "mpi", "algorithm": "ring", "dtype": "float32", "op": "sum",
         "in_place": False}


def _console(**kwargs) -> Console:
    return Console(file=io.StringIO(), width=300, highlight=False, soft_wrap=True, **kwargs)


def _renderer(**kwargs) -> Renderer:
    renderer = Renderer(**kwargs)
    renderer.console = _console()
    return renderer


def _shown(renderer) -> str:
    return renderer.console.file.getvalue()


def _row(size=1024, time_us=10.0, wrong=0, job=1, **fields) -> dict:
    fields = {"dtype": "float32", **fields}
    return build_row(run_id="r", point=0, collective="all_reduce", backend="mpi", algorithm="ring", device="cpu",
                     op="sum", in_place=0, world_size=4, size_bytes=size, count=size // 4, time_us=time_us,
                     samples=10, iterations=40, wrong=wrong, job=job, **fields)


def _ready(**extra) -> dict:
    return {"event": "ready", "world_size": 4, "nodes": 2, "hosts": ["node-a", "node-b"], "total": 3, **extra}


def test_group_title_names_the_point_and_leaves_out_no_op():
    assert group_title(POINT) == "all_reduce · mpi · ring · float32 · sum · out-of-place"
    gather = {**POINT, "collective": "all_gather", "op": "none", "in_place": 1}
    assert group_title(gather, 8) == "all_gather · mpi · ring · float32 · in-place · 8 ranks"
    assert "None" not in group_title({**POINT, "op": None})


def test_a_line_lines_up_under_the_header_and_marks_wrong_rows():
    row = _row(size=1024, time_us=2.0)
    line = format_line([row])
    assert len(line) == len(tables.header((False,))[0])
    assert line.split() == ["1024", "256", "float32", "sum", "2.00", f"{1024 / 2e-6 / 1e9:.3f}",
                            f"{1024 / 2e-6 / 1e9 * 1.5:.3f}", "0", "40"]  # all_reduce on 4 ranks: 2(n-1)/n
    wrong = format_line([_row(wrong=3)])
    assert wrong.startswith("[bold red]") and wrong.endswith("[/]") and line not in wrong


def test_rows_are_grouped_under_one_header_each():
    renderer = _renderer()
    renderer(_ready(already=1, note="rows of an earlier run are kept"))
    renderer({"event": "row", "row": _row(size=1024)})
    renderer({"event": "row", "row": _row(size=2048)})
    renderer({"event": "row", "row": _row(size=1024, dtype="int32")})
    renderer({"event": "done"})
    shown = _shown(renderer).splitlines()
    # not a terminal (a CI log): an out-of-place half waiting for its table line is said at once
    progress = [line for line in shown if line.startswith("  measured ")]
    assert progress == [f"  measured {size} B out-of-place: 10.00 µs (all_reduce · mpi · ring · {dtype} · sum; its "
                        "table line comes with the in-place half)"
                        for size, dtype in ((1024, "float32"), (2048, "float32"), (1024, "int32"))]
    assert shown.index(progress[0]) < shown.index(next(line for line in shown if line.startswith("# all_reduce")))
    lines = [line for line in shown if line not in progress]
    assert lines[0] == "commbench: 4 ranks on 2 node(s) (node-a, node-b), 3 points, 1 measured before"
    assert lines[1] == "rows of an earlier run are kept"
    headers = [i for i, line in enumerate(lines) if line.startswith("# all_reduce")]
    assert [lines[i] for i in headers] == ["# all_reduce · mpi · ring · float32 · sum · out-of-place · 4 ranks",
                                           "# all_reduce · mpi · ring · int32 · sum · out-of-place · 4 ranks"]
    assert all(lines[i + 1:i + 3] == tables.header((False,)) for i in headers)
    assert [line.split()[0] for line in lines[headers[0] + 3:headers[1]] if line] == ["1024", "2048", "#"]
    assert renderer.progress is None  # not a terminal: no bar


def test_repeated_jobs_each_get_one_line_and_no_table():
    renderer = _renderer()
    renderer(_ready(repeat=3))
    for job in (1, 1, 2):
        renderer({"event": "row", "row": _row(job=job)})
    renderer.close()
    shown = _shown(renderer)
    assert shown.count("job 1 of 3 · all_reduce") == 1 and shown.count("job 2 of 3 · all_reduce") == 1
    assert "#wrong" not in shown  # no per-job table
    plain = _renderer()
    plain(_ready())
    plain({"event": "row", "row": _row(job=1)})
    assert " of 1" not in _shown(plain) and "job" not in _shown(plain)


def test_a_skip_is_reported_once_per_group_whatever_the_size():
    renderer = _renderer()
    renderer(_ready())
    for size in (8, 16):
        renderer({"event": "skip", "point": {**POINT, "size": size, "index": size}, "reason": "too large"})
    renderer({"event": "skip", "point": {**POINT, "dtype": "int8", "size": 8, "index": 3}, "reason": "no int8"})
    shown = _shown(renderer)
    assert shown.count("skipped all_reduce · mpi · ring · float32 · sum · out-of-place: too large") == 1
    assert shown.count("skipped all_reduce · mpi · ring · int8") == 1


def test_quiet_shows_warnings_only():
    renderer = _renderer(quiet=True)
    renderer(_ready(note="a note"))
    renderer({"event": "row", "row": _row()})
    renderer({"event": "skip", "point": POINT, "reason": "r"})
    renderer({"event": "warning", "text": "the machine is busy"})
    assert _shown(renderer) == "warning: the machine is busy\n"


def test_json_rows_go_to_stdout_whole_and_the_view_to_the_console(capsys):
    renderer = Renderer(json_rows=True)
    assert renderer.console.stderr
    renderer.console = _console()
    row = _row(wrong=2)
    renderer(_ready())
    renderer({"event": "row", "row": row})
    out = capsys.readouterr().out.splitlines()  # at once, while the line waits for its in-place half
    renderer.close()
    # every results.csv column, null where the CSV's cell is empty (issue 66: power, energy, ... were left out)
    assert [json.loads(line) for line in out] == [{c: json.loads(json.dumps(row)).get(c) for c in COLUMNS}
                                                  | {c: None for c in RANK_SUMMARY}]  # (an event without them)
    assert list(json.loads(out[0])) == [*COLUMNS, *RANK_SUMMARY] and json.loads(out[0])["energy_j"] is None
    assert "1024" in _shown(renderer) and "{" not in _shown(renderer)


def test_on_a_terminal_a_progress_bar_counts_the_points():
    renderer = Renderer()
    renderer.console = _console(force_terminal=True)
    renderer(_ready(already=1))
    try:
        assert renderer.progress is not None
        task = renderer.progress.tasks[0]
        assert (task.total, task.completed) == (3, 1)
        renderer({"event": "start", "point": POINT})
        assert task.description == group_title(POINT)
        renderer({"event": "row", "row": _row()})  # out-of-place, its in-place half to come: shown on the bar
        assert task.description == f"{group_title(POINT)} · 1024 B out-of-place: 10.00 µs"
        assert "B out-of-place: 10.00 µs (" not in _shown(renderer)  # the bar says it: no line of its own
        renderer({"event": "skip", "point": POINT, "reason": "r"})
        assert task.completed == 3
    finally:
        renderer({"event": "error"})
    assert renderer.progress is None
    renderer.close()  # twice is harmless


def test_ab_renderer_says_the_grain_and_each_round_and_warns_once():
    renderer = AbRenderer()
    renderer.console = _console()
    renderer({"event": "ab", "points": 4, "launcher": "mpirun", "grain": "job", "why": "[b]calls[/b] too short"})
    renderer({"event": "round", "round": 2, "open": 3, "seconds": 12.345})
    for _ in range(2):
        renderer({"event": "warning", "text": "busy"})
    assert _shown(renderer).splitlines() == ["commbench ab: 4 points, mpirun; grain job ([b]calls[/b] too short)",
                                             "round 2: 3 point(s) still open, 12.3 s", "warning: busy"]
    quiet = AbRenderer(quiet=True)
    quiet.console = _console()
    quiet({"event": "round", "round": 1, "open": 1, "seconds": 1.0})
    quiet({"event": "warning", "text": "w"})
    assert _shown(quiet) == "warning: w\n"


def test_comparison_table_shows_times_in_us_speedups_as_ratios_and_bytes_in_100_columns():
    variants = {"native": 12.0, "ring": 18.5, "ring_topology": 18.0, "hierarchical": 9.25, "hierarchical_kernel": 7.4}
    frame = pd.DataFrame([{"label": "", "collective": "all_reduce", "backend": "gloo", "dtype": "float32", "op": "sum",
                           "in_place": 1, "placement": "block", "nodes": 2, "ranks_per_node": 4, "size_bytes": size,
                           **{f"time_us:{v}": t * scale for v, t in variants.items()},
                           **{f"speedup:{v}": 18.5 / t for v, t in variants.items()},
                           "internode_bytes_measured:ring": 3e6 * scale, "internode_bytes_expected:ring": 3.5e6 * scale}
                          for size, scale in ((8, 1), (1 << 24, 10_000))])
    console = _console()
    console.print(comparison_table(group_tables(frame)))
    lines = console.file.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100
    assert [line.rstrip() for line in lines] == [
        "",
        "all_reduce · gloo · float32 · sum · in-place · 2 nodes × 4 ranks · block",
        "time per call in µs (speedup over the flat ring)",
        "                                       ring_                 hierarchical_",
        "size          native    ring        topology   hierarchical         kernel",
        "─" * 74,
        "   8   12.00 (1.54×)   18.50   18.00 (1.03×)   9.25 (2.00×)   7.40 (2.50×)",
        " 16M  120000 (1.54×)  185000  180000 (1.03×)  92500 (2.00×)  74000 (2.50×)",
        "",
        "inter-node bytes per call, measured (expected)",
        "                                ring_                hierarchical_",
        "size  native           ring  topology  hierarchical         kernel",
        "─" * 66,
        "   8   - (-)  3.00M (3.50M)     - (-)         - (-)          - (-)",
        " 16M   - (-)  30.0G (35.0G)     - (-)         - (-)          - (-)",
    ]


def test_run_console_escapes_markup_and_control_characters():
    from rich.console import Console

    from commbench.presentation.console import Renderer, comparison_table
    import pandas as pd

    evil = "\x1b[2J[bold red]owned[/] \u202e"
    renderer = Renderer()
    renderer.console = Console(file=io.StringIO(), width=300, highlight=False)
    point = {"collective": "all_reduce", "backend": "mpi", "algorithm": "ring", "dtype": "float32", "op": "sum",
             "in_place": False}
    renderer({"event": "ready", "world_size": 2, "nodes": 1, "hosts": [evil, "node-b"], "total": 1, "note": evil})
    renderer({"event": "skip", "point": point, "reason": evil})
    renderer({"event": "warning", "text": evil})
    renderer({"event": "done"})
    table = comparison_table(group_tables(pd.DataFrame([{
        "collective": evil, "placement": "block", "nodes": 2, "ranks_per_node": 1, "size_bytes": 1024,
        "time_us:ring": 10.0, "time_us:hierarchical": 5.0, "speedup:hierarchical": 2.0}])))
    renderer.console.print(table)
    shown = renderer.console.file.getvalue()
    assert "\x1b" not in shown and "\u202e" not in shown
    assert shown.count("\\x1b[2J[bold red]owned[/] \\u202e") == 5, shown


def test_under_an_open_table_a_waiting_half_is_said_in_short():
    renderer = _renderer(modes={"all_reduce": [False, True]})  # `run`: both modes known, the table's header printed at once
    renderer(_ready())
    renderer({"event": "row", "row": _row(size=64)})
    lines = _shown(renderer).splitlines()
    assert lines[-1] == "  measured 64 B out-of-place: 10.00 µs (its line comes with the in-place half)"
    assert lines[-5].startswith("# all_reduce · mpi · ring · float32 · sum · 4 ranks")
