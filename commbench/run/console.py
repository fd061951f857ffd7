"""Terminal output: a rich progress bar over the whole sweep and, per group of points, an
nccl-tests-like table streamed row by row. Fed with rank 0's events; never measures.

Every text from outside (hosts, labels, notes, reasons, warnings, names read from result files)
is shown through `_safe`: control characters escaped (commbench.terminal.printable) and rich
markup escaped, so it can neither drive the terminal nor style itself."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from commbench.terminal import printable

HEADER = (f"{'size':>12} {'count':>12} {'type':>9} {'redop':>6} {'time(us)':>11} {'algbw(GB/s)':>12} "
          f"{'busbw(GB/s)':>12} {'#wrong':>7} {'iters':>6}")  # iters: timed calls


def _safe(text) -> str:
    return escape(printable(text))


def group_title(p: dict, world: int | None = None) -> str:
    mode = "in-place" if p["in_place"] else "out-of-place"
    parts = [p["collective"], p["backend"], p["algorithm"], p["dtype"]]
    if p.get("op") not in (None, "none"):
        parts.append(p["op"])
    parts.append(mode)
    if world:
        parts.append(f"{world} ranks")
    return " · ".join(parts)


def format_row(row: dict) -> str:
    line = (f"{row['size_bytes']:>12} {row['count']:>12} {_safe(row['dtype']):>9} {_safe(row['op']):>6} "
            f"{row['time_us']:>11.2f} {row['algbw_gbps']:>12.3f} {row['busbw_gbps']:>12.3f} "
            f"{row['wrong']:>7} {row['iterations']:>6}")
    return f"[bold red]{line}[/]" if int(row["wrong"]) else line


class Renderer:
    """Callable on each event. quiet: only the summary; json_rows: rows as JSON on stdout and
    the human view on stderr."""

    def __init__(self, quiet: bool = False, json_rows: bool = False):
        self.quiet, self.json_rows = quiet, json_rows
        self.console = Console(stderr=json_rows, highlight=False, soft_wrap=True)
        self.progress: Progress | None = None
        self.task = None
        self.group = None
        self.world = None
        self.skip_reported: set = set()
        self.repeat = 1  # jobs per point (--repeat): rows are then grouped by job too

    def _print(self, text: str) -> None:
        if not self.quiet:
            (self.progress.console if self.progress else self.console).print(text)

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "ready":
            self.world = event["world_size"]
            self.repeat = event.get("repeat", 1)
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
                self.task = self.progress.add_task("sweep", total=event["total"], completed=event.get("already", 0))
        elif kind == "start":
            if self.progress:
                self.progress.update(self.task, description=_safe(group_title(event["point"])))
        elif kind == "skip":
            key = tuple(sorted((k, v) for k, v in event["point"].items() if k not in ("size", "index")))
            if key not in self.skip_reported:
                self.skip_reported.add(key)
                self._print(f"[yellow]skipped[/] {_safe(group_title(event['point']))}: {_safe(event['reason'])}")
            self._advance()
        elif kind == "row":
            row = event["row"]
            if self.json_rows:
                print(json.dumps(row), flush=True)
            group = (row["backend"], row["collective"], row["algorithm"], row["dtype"], row["op"], row["in_place"],
                     row.get("job"))
            if group != self.group:
                self.group = group
                job = f" · job {row.get('job')} of {self.repeat}" if self.repeat > 1 else ""
                self._print(f"\n[bold]# {_safe(group_title(row, self.world) + job)}[/]\n#{HEADER[1:]}")
            self._print(format_row(row))
            self._advance()
        elif kind == "warning":
            (self.progress.console if self.progress else self.console).print(  # --quiet too
                f"[yellow]warning[/]: {_safe(event['text'])}")
        elif kind in ("done", "error"):
            self.close()

    def _advance(self) -> None:
        if self.progress:
            self.progress.advance(self.task)

    def close(self) -> None:
        if self.progress:
            self.progress.stop()
            self.progress = None


def comparison_table(comparison):
    """The topology comparison (commbench.analysis.topology_comparison) as a rich table."""
    from rich.table import Table

    from commbench.analysis.topology_comparison import table_rows

    header, body = table_rows(comparison)
    table = Table(title="topology variants: time, speedup over the flat ring (rank order), inter-node MB per call "
                        "measured (expected)", title_justify="left")
    for i, name in enumerate(header):
        table.add_column(_safe(name), justify="left" if i < 3 else "right")
    for cells in body:
        table.add_row(*map(_safe, cells))
    return table


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
