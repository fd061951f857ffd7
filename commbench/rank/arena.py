"""The arena: one file in /dev/shm that every rank of both of `commbench ab`'s jobs maps, so that
the two sides time their calls on the same memory.

Where the buffers of a point lie (which physical pages, how they fall in the caches' sets against
each other and the library's own buffers) moves a collective's time by up to ~18 % on this
project's VM at 256 KB - 2 MB: two sets of buffers for identical code, timed turn by turn in one
process, were called a "regression" of 1.17 with a tight interval. Pairing cancels the machine's
drift, not that. So every point of a comparison, on either side, in either job, lays its buffers
at the same place of the arena: rank r's region at r x stride (the kernels' layout, so that a
kernel's direct calls reach their neighbour's buffers there too), send at its start and recv
from the next page boundary (harness.Buffers). Created by the parent (commbench.run.ab), which
sizes it for the largest point of either side and removes it at the end; CPU buffers only.
"""

from __future__ import annotations

import mmap
import os
import re

from commbench.kernels.host import SHM_DIR, buffer_stride, remove_stale_segments

PREFIX = "commbench-ab-"


def region_bytes(in_count: int, out_count: int, itemsize: int, in_place: bool) -> int:
    """Bytes one rank's buffers of a point take in the arena (harness.Buffers' layout)."""
    if in_place:
        return max(in_count, out_count) * itemsize
    page = mmap.PAGESIZE
    return -(-in_count * itemsize // page) * page + out_count * itemsize


def stride(region: int, world: int) -> int:
    return buffer_stride(region, world)


def create(run_id: str, nbytes: int) -> str | None:
    """The arena's file (its memory allocated now), or None where /dev/shm cannot hold it. Files
    of earlier comparisons whose process is gone are removed first."""
    remove_stale_segments(PREFIX)
    if not os.path.isdir(SHM_DIR):
        return None
    path = os.path.join(SHM_DIR, f"{PREFIX}{os.getpid()}-{re.sub(r'[^A-Za-z0-9]', '', run_id)[:40]}")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, nbytes)
        os.posix_fallocate(fd, 0, nbytes)
    except OSError:
        os.close(fd)
        os.unlink(path)
        return None
    os.close(fd)
    return path


class Arena:
    """The arena as one rank maps it."""

    def __init__(self, path: str, stride_bytes: int, rank: int):
        fd = os.open(path, os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        self.stride, self.rank = stride_bytes, rank

    def alloc(self, comm):
        """(count, DType) -> comm's buffer over this rank's region (harness.Buffers' alloc)."""
        def alloc(count, dtype):
            nbytes = count * dtype.itemsize
            if nbytes > self.stride:
                raise ValueError(f"{nbytes} bytes do not fit the arena's {self.stride}-byte regions")
            start = self.rank * self.stride
            return comm.adopt(memoryview(self.map)[start:start + nbytes], count, dtype)
        return alloc
