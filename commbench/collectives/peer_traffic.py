"""Who sends how many bytes to whom in one uneven all-to-all (all_to_allv), as nccl-tests'
alltoallv_perf defines it (src/alltoallv.cu, 2.19):

- generated from a size T (the bytes each rank sends in all) and a spread s in [0, 1]: rank i sends
  rank j = i + d (mod n) the bytes (1 - s) * T / n + s * d * T / (n (n - 1) / 2), rounded down to a
  multiple of 16. s = 0 is an even all-to-all; s = 1 sends nothing to itself and the most to the rank
  farthest ahead. Every rank sends and receives the same total (each has every distance once).
  T itself is rounded as nccl-tests does: T / n in whole elements, down to a multiple of 16 bytes.
- or read from a matrix file: whitespace-separated numbers, a square of at least n rows, cell [i][j]
  the bytes rank i sends rank j, each multiplied by a scale and rounded down to a multiple of 16; the
  first n rows and columns are used. The size a sweep asks for then does not change the traffic.

The matrix a run used is recorded in its spec (run.json), so a run is reproducible without the file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from commbench.errors import InputError

ALIGN = 16  # bytes: every per-peer amount is a multiple (nccl-tests aligns so)
DEFAULT_SPREAD = 1.0  # nccl-tests' default: fully distance-weighted
MAX_MATRIX_FILE_BYTES = 64 << 20  # a 4096 x 4096 matrix of 3-digit numbers is 64 MB
MAX_MATRIX_RANKS = 4096  # rows and columns of a matrix file
# nccl-tests' environment variables, read where the options are not given (commbench.spec)
SPREAD_ENV = "NCCL_TESTS_ALLTOALLV_SPREAD"
MATRIX_ENV = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE"
SCALE_ENV = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE"


@dataclass(frozen=True)
class PeerTraffic:
    """One run's uneven all-to-all: a spread, or a matrix of bytes (row: the sender), already scaled
    and aligned, at least n x n."""

    spread: float = DEFAULT_SPREAD
    matrix: tuple[tuple[int, ...], ...] | None = None

    def peer_bytes(self, size_bytes: int, itemsize: int, world: int) -> np.ndarray:
        """world x world bytes, [i][j] from rank i to rank j, each a multiple of ALIGN."""
        if self.matrix is not None:
            return np.array(self.matrix, dtype=np.int64)[:world, :world]
        per_peer = (size_bytes // itemsize // world) & ~(max(1, ALIGN // itemsize) - 1)  # nccl-tests' paramcount
        total = per_peer * world * itemsize
        if world == 1:
            return np.array([[total & ~(ALIGN - 1)]], dtype=np.int64)
        distance = (np.arange(world)[None, :] - np.arange(world)[:, None]) % world
        weighted = distance * total / (world * (world - 1) / 2)
        exact = (1.0 - self.spread) * (total / world) + self.spread * weighted
        return np.floor(exact).astype(np.int64) & ~(ALIGN - 1)


def check_spread(spread: float) -> float:
    if not (isinstance(spread, (int, float)) and math.isfinite(spread) and 0.0 <= spread <= 1.0):
        raise InputError(f"invalid --spread {spread}: it must be from 0 (even) to 1 (distance-weighted)")
    return float(spread)


def check_scale(scale: float) -> float:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 0):
        raise InputError(f"invalid --matrix-scale {scale}: it must be a number 0 or more")
    return float(scale)


def env_number(name: str) -> float | None:
    """nccl-tests' variable `name` as a number, None where it is not set; an InputError where it is not one."""
    text = os.environ.get(name)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{name}={text!r} is not a number") from None


def read_matrix(path: str, scale: float, world: int) -> list[list[int]]:
    """The first `world` rows and columns of a matrix file in bytes, scaled and aligned down to ALIGN;
    an InputError naming the file and what is wrong with it."""
    where = f"the traffic matrix {path!r}"
    try:
        with open(Path(path), "rb") as f:
            data = f.read(MAX_MATRIX_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {where} ({exc.strerror or exc})") from None
    if len(data) > MAX_MATRIX_FILE_BYTES:
        raise InputError(f"{where} is larger than {MAX_MATRIX_FILE_BYTES >> 20} MB, more than a matrix of "
                         f"{MAX_MATRIX_RANKS} ranks needs")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise InputError(f"{where} is not text (whitespace-separated numbers of bytes)") from None
    rows = [line.split() for line in text.splitlines() if line.strip()]
    if not rows:
        raise InputError(f"{where} is empty: it needs a square of numbers, one row per sending rank")
    n = len(rows)
    for i, row in enumerate(rows):
        if len(row) != n:
            raise InputError(f"{where} is not square: row {i + 1} has {len(row)} numbers, and there are {n} rows")
    if n > MAX_MATRIX_RANKS:
        raise InputError(f"{where} has {n} rows: at most {MAX_MATRIX_RANKS}")
    if n < world:
        raise InputError(f"{where} is {n} x {n}: the run has {world} ranks (it needs at least as many rows)")
    out = []
    for i, row in enumerate(rows[:world]):
        values = []
        for j, cell in enumerate(row[:world]):
            try:
                v = float(cell)
            except ValueError:
                v = math.nan
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"{where}: row {i + 1}, column {j + 1} is {cell!r}, not a number of bytes 0 or more")
            scaled = v * scale
            if scaled > 2**62:
                raise InputError(f"{where}: row {i + 1}, column {j + 1} is {scaled:g} bytes after the scale")
            values.append(int(scaled) & ~(ALIGN - 1))
        out.append(values)
    return out


def resolve(spread: float | None, matrix: str | None, scale: float | None, peer_bytes: list | None,
            world: int) -> tuple[float | None, str | None, float | None, list | None]:
    """A run's (spread, matrix, scale, peer bytes), checked, where it measures the uneven all-to-all:
    nccl-tests' variables stand for the options not given; a matrix is read once (a run's recorded
    peer bytes are kept: resuming needs no file). Spread or matrix, not both."""
    if peer_bytes is None:
        if matrix is None and spread is None:
            matrix = os.environ.get(MATRIX_ENV) or None
        if spread is None and matrix is None:
            spread = env_number(SPREAD_ENV)
        if scale is None and matrix is not None:
            scale = env_number(SCALE_ENV)
    if matrix is not None and spread is not None:
        raise InputError("--spread generates the traffic that --matrix reads: give one")
    if scale is not None and matrix is None and peer_bytes is None:
        raise InputError("--matrix-scale scales a --matrix file: give one")
    if matrix is None and peer_bytes is None:
        return check_spread(DEFAULT_SPREAD if spread is None else spread), None, None, None
    scale = check_scale(1.0 if scale is None else scale)
    if peer_bytes is None:
        peer_bytes = read_matrix(matrix, scale, world)
    elif len(peer_bytes) != world or any(len(row) != world or min(row, default=0) < 0 for row in peer_bytes):
        raise InputError(f"the recorded traffic matrix is not {world} x {world} bytes 0 or more")
    return None, matrix, scale, peer_bytes


def matrix_size(peer_bytes: list[list[int]]) -> int:
    """The size of a matrix's point: the most bytes a rank sends or receives (nccl-tests' max_bytes)."""
    elems = np.asarray(peer_bytes, dtype=np.int64)
    return int(max(elems.sum(axis=1).max(), elems.sum(axis=0).max()))
