"""Setup steps for the readers' acceptance classes of issue 43 (tests/acceptance/test_readers_*.py):
bombs (a Parquet file of millions of identical rows, sparse files, a header of 10^5 columns), deep
folder trees, link loops and FIFOs, each a function of the case's scratch folder (hostile_fixtures'
Step). Files several cases share are built once per session and copied."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from pathlib import Path

from hostile_contract import Step
from hostile_fixtures import root
from commbench.folder.schema import COLUMNS, SAMPLE_COLUMNS

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # the contract's snapshot (os.walk) of a 1500-deep tree
_BUILT: dict[tuple, Path] = {}


def _parquet_bomb(rows: int) -> Path:
    """A samples.parquet of `rows` identical samples (point 0, job 1, 1 µs), written in pieces: about
    23 bytes on disk per 10^6 rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = ("parquet", rows)
    if key not in _BUILT:
        path = root() / f"bomb-{rows}.parquet"
        piece = min(rows, 1_000_000)
        table = pa.table({"run_id": pa.array(["20260101T000000Z-000001"] * piece).dictionary_encode(),
                          "point": np.zeros(piece, np.int64), "iteration": np.zeros(piece, np.int64),
                          "time_us": np.ones(piece), "job": np.ones(piece, np.int64)})
        with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
            for _ in range(rows // piece):
                writer.write_table(table)
        _BUILT[key] = path
    return _BUILT[key]


def parquet_bomb(rel: str, rows: int) -> Step:
    def step(s: Path):
        shutil.copyfile(_parquet_bomb(rows), s / rel)
    return step


def samples_as_parquet(folder: str) -> Step:
    """folder's samples.csv written again as samples.parquet (both kept): what a conversion cut short leaves."""
    def step(s: Path):
        import pandas as pd
        pd.read_csv(s / folder / "samples.csv", dtype={"run_id": str}).to_parquet(s / folder / "samples.parquet")
    return step


def sparse(rel: str, size: int, head: str = ",".join(COLUMNS) + "\n") -> Step:
    """A file of `size` bytes that takes no disk: its header, then a hole (NUL bytes when read)."""
    def step(s: Path):
        with open(s / rel, "wb") as f:
            f.write(head.encode())
            f.truncate(size)
    return step


def sparse_samples(rel: str, size: int) -> Step:
    return sparse(rel, size, ",".join(SAMPLE_COLUMNS) + "\n")


def wide_header(rel: str, columns: int) -> Step:
    """results.csv's header with `columns` more made-up columns (10^5: about 1 MB), and one row."""
    def step(s: Path):
        p = s / rel
        lines = p.read_text().splitlines()
        extra = "".join(f",x{i}" for i in range(columns))
        p.write_text(lines[0] + extra + "\n" + lines[1] + "," * columns + "\n")
    return step


def many_lines(rel: str, lines: int, line: str) -> Step:
    """rel with `lines` copies of line appended (rows past a limit, in few bytes each)."""
    def step(s: Path):
        with open(s / rel, "a") as f:
            f.write(line * lines)
    return step


def deep_tree(top: str, depth: int, leaf: str | None = None) -> Step:
    """top/d/d/.../d, depth folders below top, made without recursion; leaf: a fixture folder copied at the bottom."""
    def step(s: Path):
        from hostile_fixtures import fixture

        (s / top).mkdir(parents=True, exist_ok=True)
        fd = os.open(s / top, os.O_RDONLY)
        try:
            for _ in range(depth):
                os.mkdir("d", dir_fd=fd)
                child = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = child
            if leaf:
                for name in ("results.csv", "run.json", "samples.csv"):
                    src = fixture(leaf) / name
                    out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                    os.write(out, src.read_bytes())
                    os.close(out)
        finally:
            os.close(fd)
        atexit.register(_remove_deep, s / top, depth)
    return step


def _remove_deep(top: Path, depth: int) -> None:
    """Remove what deep_tree made, bottom up through directory descriptors (no recursion): pytest's
    own clean-up of old temporary folders would recurse past Python's limit in a later session."""
    fds = [os.open(top, os.O_RDONLY)]
    try:
        for _ in range(depth):
            fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        for name in os.listdir(fds[-1]):
            os.unlink(name, dir_fd=fds[-1])
        for parent in reversed(fds[:-1]):
            os.close(fds.pop())
            os.rmdir("d", dir_fd=parent)
    except OSError:
        pass
    finally:
        for fd in fds:
            os.close(fd)


def fifo(rel: str) -> Step:
    return lambda s: os.mkfifo(s / rel)


def copies(name: str, folder: str, n: int) -> Step:
    """folder/copy1 .. copyN: n copies of a fixture (the same run, n times on one side)."""
    def step(s: Path):
        from hostile_fixtures import fixture

        for i in range(1, n + 1):
            shutil.copytree(fixture(name), s / folder / f"copy{i}")
    step.uses = (name,)
    return step


def many_runs(folder: str, n: int) -> Step:
    """folder/r0001 .. rN: n run folders whose results.csv is the header alone (found, never read)."""
    def step(s: Path):
        head = ",".join(COLUMNS) + "\n"
        for i in range(1, n + 1):
            d = s / folder / f"r{i:04d}"
            d.mkdir(parents=True)
            (d / "results.csv").write_text(head)
    return step


def parquet_footer(rel: str, length: int) -> Step:
    """A file that ends like Parquet ("PAR1") but claims a footer of `length` bytes."""
    def step(s: Path):
        (s / rel).write_bytes(b"PAR1" + b"\0" * 64 + length.to_bytes(4, "little") + b"PAR1")
    return step
