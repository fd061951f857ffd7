"""What a collective is, in the nccl-tests sense: buffer sizes, bus-bandwidth factor, the exact
expected output, the in-place layout, the libraries' own calls for it, its traffic unit and the
names other tools give it. One harness (`commbench.rank.harness`) runs every collective through
this; the backends, commbench's own algorithms, the NCCL log reader and the importers ask the
collective rather than naming it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from commbench.collectives.patterns import Pattern


@dataclass(frozen=True)
class Counts:
    """Elements per rank for one point, and the size it reports (nccl-tests semantics); root: the
    rank a rooted collective starts or ends at (--root), 0 for the others."""

    in_count: int
    out_count: int
    size_bytes: int
    root: int = 0
    # elements rank i sends rank j, [i][j] (the uneven all-to-all's; None where every rank's blocks are even)
    peers: tuple[tuple[int, ...], ...] | None = None

    @property
    def count(self) -> int:
        """The `count` column: elements of the larger per-rank buffer, as nccl-tests prints."""
        return max(self.in_count, self.out_count)


@dataclass(frozen=True)
class NativeCall:
    """A library's own function for a collective. function: its name in the library (a tuple:
    the first name this version of the library has); convention: how it is called, a key of the
    backend's table of calling conventions; in_place: whether it accepts the in-place layout
    (harness.Buffers) and gives the right result with it."""

    function: str | tuple[str, ...]
    convention: str
    in_place: bool = True
    no_in_place: str = "gives wrong results in place"  # why not, where in_place is False (the skip's reason)

    def resolve(self, library: Any) -> Callable | None:
        """The function itself, looked up on `library` (a module or object); None if absent."""
        names = (self.function,) if isinstance(self.function, str) else self.function
        return next((getattr(library, n) for n in names if hasattr(library, n)), None)

    @property
    def name(self) -> str:
        """Its (first) name, for messages."""
        return self.function if isinstance(self.function, str) else self.function[0]


class Collective:
    name: str = ""
    reduces: bool = True  # takes a reduction op
    takes_traffic: bool = False  # its blocks are sized by a run's uneven traffic (counts_for, peer_traffic)
    in_place_form: bool = True  # has an in-place layout (else only out-of-place points are measured)
    rooted: bool = False  # one rank (--root) is where the data starts (broadcast, scatter) or ends (reduce, gather)
    # its place in the sweep -c means when not given (1, 2, 3: the three collectives training lives on);
    # 0: measured when asked for
    default_sweep: int = 0
    # the library's own call, by library ("mpi": mpi4py's Comm, "torch": torch.distributed)
    native: Mapping[str, NativeCall] = {}
    nccl_function: str | None = None  # the name NCCL logs its calls under (commbench.rank.nccl_log)
    nccl_tests_name: str | None = None  # nccl-tests' binary is <this>_perf
    osu_title: str | None = None  # OSU's "# OSU MPI <this> Latency Test"
    osu_binary: str | None = None  # OSU's program (default osu_<title lower-cased>)
    description: str = ""  # what it does and how size and busbw are counted, for the docs' generated table and help

    def bus_factor(self, world: int) -> float:
        """busbw = algbw x this factor (nccl-tests doc/PERFORMANCE.md)."""
        raise NotImplementedError

    def counts(self, size_bytes: int, itemsize: int, world: int) -> Counts:
        """Per-rank element counts for a requested size, rounded down as nccl-tests does."""
        raise NotImplementedError

    def counts_for(self, size_bytes: int, itemsize: int, world: int, traffic) -> Counts:
        """counts() of a run's point: `traffic`, the run's uneven all-to-all (peer_traffic.PeerTraffic, or
        None), shapes the collectives whose blocks it sizes; the others ignore it."""
        return self.counts(size_bytes, itemsize, world)

    # OSU's Size is one block of the n that make this collective's size: its message to or from each rank
    # (all-gather, gather, all-to-all, scatter); else the size itself
    osu_size_is_block = False

    def size_of_osu(self, osu_bytes: int, world: int) -> int:
        """The size (as counts() takes it) of an OSU result of Size osu_bytes over `world` ranks."""
        return osu_bytes * world if self.osu_size_is_block else osu_bytes

    def expected(self, pattern: Pattern, rank: int, counts: Counts, start: int, length: int) -> np.ndarray:
        """Rank `rank`'s correct output, elements start .. start+length-1, as float64; NaN where the
        collective leaves it undefined (a reduce's or gather's output on a rank not the root: not checked)."""
        raise NotImplementedError

    def footprint(self, size_bytes: float, n: int, in_place: bool) -> float:
        """Bytes of the harness' buffers one rank touches per call (the cost model's working set):
        its input and its output, one buffer in place."""
        scale = n * 4096  # counts of a size every block divides, scaled back: no rounding to whole elements
        counts = self.counts(scale, 1, n)
        per_byte = (max(counts.in_count, counts.out_count) if in_place else counts.in_count + counts.out_count) / scale
        return size_bytes * per_byte

    def osu_name(self) -> str | None:
        """OSU's program for it (osu_bcast, osu_alltoall, ...), None where OSU has none."""
        return self.osu_binary or (self.osu_title and f"osu_{self.osu_title.lower()}")

    def in_place_offset(self, rank: int, counts: Counts) -> int:
        """In-place: where the rank's input lies inside its output buffer (all-gather), or its
        output inside its input buffer (reduce-scatter), in elements, as nccl-tests lays it out."""
        return 0

    def message_elems(self, counts: Counts) -> int:
        """The `elems` of Algorithm.messages (commbench.machine.traffic): one rank's block."""
        return counts.in_count

    def bind_algorithm(self, algorithm, ctx, send, recv, op: str | None, in_place: bool,
                       in_count: int, out_count: int) -> tuple[Callable[[], None], Any]:
        """Algorithm.bind for this collective: a zero-argument callable running the algorithm's
        in-place method (named as the collective) on the harness' buffers, and the buffer
        holding this rank's output. Out-of-place copies are part of what is timed."""
        raise ValueError(f"commbench's own algorithms do not run {self.name}")


class WholeBuffer:
    """The shape of a collective whose size is one rank's buffer, in and out, and whose busbw is
    its algbw (broadcast, reduce, send-recv: nccl-tests' factor 1); a mixin before Collective."""

    def bus_factor(self, world: int) -> float:
        return 1.0

    def counts(self, size_bytes: int, itemsize: int, world: int) -> Counts:
        n = size_bytes // itemsize
        return Counts(n, n, n * itemsize)


class SplitInput:
    """The shape of a collective whose size is an input of n blocks of which each rank gets one
    (reduce-scatter, scatter), busbw = algbw x (n-1)/n; a mixin before Collective."""

    def bus_factor(self, world: int) -> float:
        return (world - 1) / world

    def counts(self, size_bytes: int, itemsize: int, world: int) -> Counts:
        per_rank = size_bytes // itemsize // world
        return Counts(per_rank * world, per_rank, per_rank * world * itemsize)
