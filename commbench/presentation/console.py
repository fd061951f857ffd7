"""Terminal output: a rich progress bar over the whole sweep (and the suite) and, per group of
points, a table in nccl-tests' layout (commbench.presentation.tables: out-of-place and in-place of a size on
one line) streamed as lines complete, with the average bus bandwidth and the unreliable points
under it; under --repeat, one line per job's table and then one table of the jobs' medians. Fed
with rank 0's events; never measures.

Every text from outside (hosts, labels, notes, reasons, warnings, names read from result files)
is shown through `_safe`: control characters escaped (commbench.presentation.terminal.printable) and rich
markup escaped, so it can neither drive the terminal nor style itself."""

from __future__ import annotations

import json
import re
import statistics

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from commbench.presentation import tables
from commbench.folder.schema import full_row
from commbench.presentation.tables import MODES
from commbench.presentation.terminal import Console, printable


def _safe(text) -> str:
    return escape(printable(text))


def group_title(p: dict, world: int | None = None, mode: bool = True) -> str:
    """The point's group: collective, backend, algorithm, dtype, op, mode (unless mode=False: a
    table of both modes), ranks."""
    parts = [p["collective"], p["backend"], p["algorithm"], p["dtype"]]
    if p.get("op") not in (None, "none"):
        parts.append(p["op"])
    if mode:
        parts.append(MODES[bool(p["in_place"])])
    if world:
        parts.append(f"{world} ranks")
    if p.get("split"):
        parts.append(f"--split {p['split']}: {p.get('groups')} groups of {p.get('world_size')} at once")
    return " · ".join(map(str, parts))


def groups_line(halves: list[dict | None]) -> str | None:
    """Under a --split row's line: each group's time and busbw and their total, per half measured."""
    parts = []
    for row in halves:
        if row and row.get("split"):
            times = str(row.get("group_time_us") or "").split(";")
            busbw = str(row.get("group_busbw_gbps") or "").split(";")
            groups = ", ".join(f"{float(t):.2f} us {float(b):.3f} GB/s" for t, b in zip(times, busbw) if t and b)
            parts.append(f"{MODES[bool(row['in_place'])]}: {groups}; total busbw {row.get('busbw_total_gbps', 0):.3f} GB/s")
    return f"    groups {' | '.join(parts)}" if parts else None


def _key(p: dict) -> tuple:
    """A table's rows: one backend, collective, algorithm, dtype and op (both modes)."""
    return (p["backend"], p["collective"], p["algorithm"], p["dtype"], p.get("op") or "none")


def format_line(halves: list[dict | None], kind: str = "run") -> str:
    text = tables.line(halves, kind, _safe)
    return f"[bold red]{text}[/]" if tables.is_wrong(halves) else text


class _Table:
    """The open table: its rows, and the out-of-place rows waiting for their in-place half."""

    def __init__(self, key: tuple, job):
        self.key, self.job = key, job
        self.modes: tuple[bool, ...] | None = None  # None: not known yet (only out-of-place rows so far)
        self.pending: list[dict] = []
        self.rows: list[dict] = []
        self.in_place_seen = False
        self.skips: list[str] = []  # its points' skip notices, printed under its footer


class Renderer:
    """Callable on each event. quiet: only the summary; json_rows: rows as JSON on stdout and
    the human view on stderr. modes: the buffer modes the run measures of each collective
    ({collective: spec.modes_of(collective)}), where the caller knows them; else an out-of-place row waits for its in-place half (the plan measures a
    table's out-of-place sizes first) or for the table's end. suite_points: the points of a whole
    suite, for a second progress bar over the suite. stderr: the human view on stderr (a command whose
    stdout is its own output: check)."""

    def __init__(self, quiet: bool = False, json_rows: bool = False, modes=None, suite_points: int | None = None,
                 stderr: bool = False):
        self.quiet, self.json_rows = quiet, json_rows
        self.modes = {c: tuple(sorted({bool(m) for m in ms})) for c, ms in modes.items()} if modes else None
        self.console = Console(stderr=json_rows or stderr, highlight=False, soft_wrap=True)
        self.progress: Progress | None = None
        self.task = None
        self.world = None
        self.skip_reported: set = set()
        self.repeat = 1  # jobs per point (--repeat): per-job tables are one line each, then one median table
        self.table: _Table | None = None
        self.rows: list[dict] = []  # this run's rows (the median tables of --repeat)
        self.flagged = 0  # rows flagged unreliable, this run
        self.suite_points, self.suite_done, self.suite_task = suite_points, 0, None

    def _print(self, text: str) -> None:
        if not self.quiet:
            (self.progress.console if self.progress else self.console).print(text)

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "ready":
            self._ready(event)
        elif kind == "start":
            if self.table is not None and _key(event["point"]) != self.table.key:
                self._end_table()
            if self.progress:
                self.progress.update(self.task, description=_safe(group_title(event["point"])))
        elif kind == "skip":
            key = (tuple(sorted((k, v) for k, v in event["point"].items() if k not in ("size", "index"))),
                   re.sub(r"\d+", "#", str(event["reason"])))  # a kind of reason once per table, not per size
            if self.table is not None and _key(event["point"]) != self.table.key:
                self._end_table()  # the plan has moved on from the open table's points
            if key not in self.skip_reported:
                self.skip_reported.add(key)
                text = f"[yellow]skipped[/] {_safe(group_title(event['point']))}: {_safe(event['reason'])}"
                if self.table is not None:  # one of the open table's own sizes: said under its footer
                    self.table.skips.append(text)
                else:
                    self._print(text)
            self._advance()
        elif kind == "row":
            if self.json_rows:
                print(json.dumps(full_row(event["row"], event.get("ranks"))), flush=True)
            self._row(event["row"])
            self._advance()
        elif kind == "warning":
            (self.progress.console if self.progress else self.console).print(  # --quiet too
                f"[yellow]warning[/]: {_safe(event['text'])}")
        elif kind == "done":
            self._end_table()
            if self.repeat > 1:
                self._median_tables()
            self.close()
        elif kind == "error":
            self.close()

    def _ready(self, event: dict) -> None:
        self._end_table()
        self.world, self.repeat, self.rows, self.flagged = event["world_size"], event.get("repeat", 1), [], 0
        hosts = ", ".join(map(str, event["hosts"]))
        resumed = f", {event['already']} measured before" if event.get("already") else ""
        self._print(f"[bold]commbench[/]: {event['world_size']} ranks on {event['nodes']} node(s) "
                    f"({_safe(hosts)}), {event['total']} points{resumed}")
        if event.get("note"):
            self._print(f"[yellow]{_safe(event['note'])}[/]")
        if not self.quiet and self.console.is_terminal:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                     console=self.console, transient=True)
            self.progress.start()
            if self.suite_points:
                self.suite_task = self.progress.add_task("suite", total=self.suite_points, completed=self.suite_done)
            self.task = self.progress.add_task("sweep", total=event["total"], completed=event.get("already", 0))

    # --- tables ---------------------------------------------------------------------------

    def _row(self, row: dict) -> None:
        self.rows.append(row)
        self.flagged += bool(row.get("unreliable"))
        key, in_place = _key(row), bool(row["in_place"])
        t = self.table
        if t is not None and (key != t.key or row.get("job") != t.job or
                              (t.modes is not None and in_place not in t.modes)):
            self._end_table()
        if self.table is None:
            self.table = _Table(key, row.get("job"))
            modes = (self.modes or {}).get(row["collective"])
            if modes and in_place in modes:
                self._open(self.table, modes, row)
        t = self.table
        t.rows.append(row)
        if not in_place and (t.modes is None or (len(t.modes) == 2 and not t.in_place_seen)):
            t.pending.append(row)  # until its in-place half comes, or the table ends
            self._pending(row)
            return
        if t.modes is None:
            self._open(t, (False, True) if t.pending else (True,), row)
        t.in_place_seen |= in_place
        if len(t.modes) == 1:
            self._line([row])
        elif not in_place:  # out-of-place after in-place began: a line of its own
            self._line([row, None])
        else:
            match = next((i for i, r in enumerate(t.pending) if r["size_bytes"] == row["size_bytes"]), None)
            if match is None:  # its out-of-place half was not measured
                self._line([None, row])
                return
            for earlier in t.pending[:match]:  # their in-place halves were not measured
                self._line([earlier, None])
            self._line([t.pending[match], row])
            del t.pending[:match + 1]

    def _pending(self, row: dict) -> None:
        """An out-of-place row whose table line waits for its in-place half: not silent meanwhile. On a
        terminal the progress bar's description shows it; elsewhere (a CI log) it gets a line of its own."""
        if self.quiet or self.repeat > 1:
            return
        text = f"{row['size_bytes']} B out-of-place: {row['time_us']:.2f} µs"
        if self.progress:
            self.progress.update(self.task, description=f"{_safe(group_title(row))} · {text}")
        elif self.table is not None and self.table.modes is not None:  # under its table's header already
            self._print(f"  [dim]measured {text} (its line comes with the in-place half)[/]")
        else:
            self._print(f"  [dim]measured {text} ({_safe(group_title(row, mode=False))}; its table line comes "
                        "with the in-place half)[/]")

    def _open(self, t: _Table, modes: tuple[bool, ...], row: dict) -> None:
        t.modes = modes
        if self.repeat > 1:
            return
        title = group_title(row, self.world, mode=len(modes) == 1)
        self._print(f"\n[bold]# {_safe(title)}[/]")
        for text in tables.header(modes):
            self._print(text)

    def _line(self, halves: list[dict | None]) -> None:
        if self.repeat == 1:
            self._print(format_line(halves))
            groups = groups_line(halves)
            if groups:
                self._print(_safe(groups))

    def _end_table(self) -> None:
        t, self.table = self.table, None
        if t is None:
            return
        if t.modes is None:  # only out-of-place rows came
            self._open(t, (False,), t.rows[0])
        for row in t.pending:
            self._line([row] if len(t.modes) == 1 else [row, None])
        t.pending = []
        if self.repeat > 1:  # one line per job's table; the median table comes at the end
            mean = sum(float(r["busbw_gbps"]) for r in t.rows) / len(t.rows)
            flagged = sum(bool(r.get("unreliable")) for r in t.rows)
            self._print(f"job {t.job} of {self.repeat} · {_safe(group_title(t.rows[0], mode=len(t.modes) == 1))}: "
                        f"{len(t.rows)} points, avg busbw {mean:.3f} GB/s"
                        + (f", [yellow]{flagged} unreliable[/]" if flagged else ""))
        else:
            self._footer(t.rows)
        for text in t.skips:
            self._print(text)

    def _footer(self, rows: list[dict]) -> None:
        for i, text in enumerate(tables.footer(rows)):
            self._print(_safe(text) if i == 0 else f"[yellow]{_safe(text)}[/]")

    def _median_tables(self) -> None:
        """--repeat: one table per group, each point the median of its jobs, with their spread."""
        points = tables.aggregate(self.rows)
        groups: dict[tuple, list[dict]] = {}
        for r in points:
            groups.setdefault(_key(r), []).append(r)
        for rows in groups.values():
            lines = tables.pair(rows)
            modes = tuple(sorted({bool(r["in_place"]) for r in rows}))
            title = group_title(rows[0], self.world, mode=len(modes) == 1)
            jobs = max(r["jobs"] for r in rows)
            self._print(f"\n[bold]# {_safe(title)} · median of {jobs} jobs[/]")
            for text in tables.header(modes, "median"):
                self._print(text)
            for halves in lines:
                self._print(format_line(halves, "median"))
            self._footer(rows)

    def _advance(self) -> None:
        if self.progress:
            self.progress.advance(self.task)
            if self.suite_task is not None:
                self.progress.advance(self.suite_task)
        self.suite_done += 1

    def close(self) -> None:
        self._end_table()
        if self.progress:
            self.progress.stop()
            self.progress = None
            self.suite_task = None


def summary_text(result, quiet: bool = False) -> str:
    """The run's closing summary (after OK / FAILED): points measured, and of a resumed run how many
    it holds in all; how many flagged unreliable (the whole run's, where counted), pointing at the !
    lines only where every one of them was shown (not --quiet, none from an earlier session);
    skipped, and where the results are."""
    now = len(result.rows)
    shown = sum(bool(r.get("unreliable")) for r in result.rows)
    flagged = getattr(result, "unreliable", None)
    flagged = shown if flagged is None else flagged
    in_run = max(getattr(result, "in_run", 0) or 0, now)
    where = "the rows' `unreliable` column" if quiet or flagged > shown else "see the ! lines"
    measured = f"{now} points measured"
    if in_run > now:
        measured += f": the run was complete, {in_run} in it" if now == 0 else f", {in_run} in the run"
    unreliable = f" ({flagged} unreliable: {where})" if flagged else ""
    return (f"{measured}{unreliable}, {len(result.skipped)} skipped; "
            f"{background_text(result.rows)}results in {result.out_dir}")


def background_text(rows) -> str:
    """What other work ran beside the ranks, said for every run (the rows' background_cores: the
    busiest machine's cores of other processes' CPU time during each point), or "" where unknown."""
    cores = []
    for r in rows:
        try:
            cores.append(float(r.get("background_cores")))
        except (TypeError, ValueError):
            continue
    cores = [c for c in cores if c == c]
    if not cores:
        return ""
    return f"other work beside the ranks {statistics.median(cores):.2g} cores (median; at most {max(cores):.2g}); "


def comparison_table(groups: list[dict]):
    """The topology comparison's groups (commbench.analysis.topology_comparison.group_tables: per group,
    each variant's time in µs and its speedup over the flat ring, then the inter-node bytes per call where
    they were counted) as rich tables that fit 100 columns."""
    from rich import box
    from rich.console import Group

    parts = []
    for t in groups:
        parts.append(_table(f"{t['title']}\ntime per call in µs (speedup over the flat ring)", t["header"], t["body"],
                            box))
        if t["bytes_header"]:
            parts.append(_table("inter-node bytes per call, measured (expected)", t["bytes_header"], t["bytes_body"],
                                box))
    return Group(*parts)


def _table(title: str, header: list[str], body: list[list[str]], box):
    """The title on a line of its own (not wrapped to the table's width), then the table."""
    from rich.console import Group
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False)
    for name in header:
        table.add_column(_safe(name), justify="right", overflow="fold")
    for cells in body:
        table.add_row(*map(_safe, cells))
    return Group(f"\n[bold]{_safe(title)}[/]", table)


class AbRenderer:
    """`commbench ab`'s progress on stderr: the grain and why, one line per round (open points,
    time), warnings once. quiet: only warnings."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.warned: set[str] = set()

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "warning" and event["text"] not in self.warned:
            self.warned.add(event["text"])
            self.console.print(f"[yellow]warning[/]: {_safe(event['text'])}")
        elif self.quiet:
            return
        elif kind == "ab":
            self.console.print(f"[bold]commbench ab[/]: {event['points']} points, {_safe(event['launcher'])}; "
                               f"grain [bold]{_safe(event['grain'])}[/] ({_safe(event['why'])})")
        elif kind == "round":
            self.console.print(f"round {event['round']}: {event['open']} point(s) still open, "
                               f"{event['seconds']:.1f} s")
