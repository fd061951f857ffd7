"""commbench.rank.arena: the /dev/shm file both of `commbench ab`'s jobs map. A point's region
size (harness.Buffers' layout), the file's creation (allocated at once, named after this process,
stale ones removed) and that every Arena over the file sees the same memory, rank r's region at
r x stride."""

import mmap
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.rank import arena
from commbench.kernels import host as kernel_host
from commbench.backends.base import NumpyBuffers

PAGE = mmap.PAGESIZE
F32, F64 = DTYPES["float32"], DTYPES["float64"]


class Comm(NumpyBuffers):
    """What Arena.alloc asks of a communicator: adopt (numpy over the given memory)."""


@pytest.fixture
def shm(tmp_path, monkeypatch):
    """/dev/shm stood in for by a temporary folder (both modules' view of it)."""
    monkeypatch.setattr(arena, "SHM_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_host, "SHM_DIR", str(tmp_path))
    return tmp_path


def test_region_bytes_in_place_is_the_larger_buffer():
    assert arena.region_bytes(3, 5, 8, True) == 40
    assert arena.region_bytes(10, 2, 4, True) == 40
    assert arena.region_bytes(0, 0, 4, True) == 0


def test_region_bytes_out_of_place_puts_recv_on_the_next_page():
    assert arena.region_bytes(1, 1, 4, False) == PAGE + 4
    assert arena.region_bytes(PAGE // 4, 7, 4, False) == PAGE + 28  # send fills its page exactly
    assert arena.region_bytes(PAGE // 4 + 1, 1, 4, False) == 2 * PAGE + 4
    assert arena.region_bytes(0, 3, 2, False) == 6  # no send: recv at the start


def test_stride_holds_a_region_in_whole_pages_plus_a_skew():
    for region, world in ((1, 2), (PAGE, 2), (PAGE + 1, 4), (10 * PAGE, 64)):
        s = arena.stride(region, world)
        skew = s % PAGE
        assert s - skew >= region > s - skew - PAGE  # the fewest whole pages that hold the region
        assert 64 <= skew < PAGE and skew % 64 == 0  # whole lines off the page: neighbours do not alias
    assert arena.stride(PAGE, 2) % PAGE > arena.stride(PAGE, 64) % PAGE  # n skews share one page


def test_create_allocates_a_file_named_after_this_process(shm):
    path = arena.create("2024-01-01T00:00:00Z/run id with spaces and more than forty characters", 3 * PAGE)
    name = os.path.basename(path)
    assert os.path.dirname(path) == str(shm)
    assert name.startswith(f"{arena.PREFIX}{os.getpid()}-")
    suffix = name.split("-", 3)[-1]
    assert suffix.isalnum() and len(suffix) == 40 and suffix.startswith("20240101T000000Zrunid")
    info = os.stat(path)
    assert info.st_size == 3 * PAGE and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_blocks * 512 >= 3 * PAGE  # allocated now, not on first touch


def test_the_same_run_id_twice_is_refused_not_shared(shm):
    arena.create("r1", PAGE)
    with pytest.raises(FileExistsError):
        arena.create("r1", PAGE)


def test_no_shm_folder_or_no_room_is_none(shm, monkeypatch):
    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    assert arena.create("r1", PAGE) is None
    assert os.listdir(shm) == []  # the file is not left behind
    monkeypatch.setattr(arena, "SHM_DIR", str(shm / "missing"))
    assert arena.create("r2", PAGE) is None


def test_create_removes_stale_arenas_only(shm):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    stale = shm / f"{arena.PREFIX}{proc.pid}-old"
    mine = shm / f"{arena.PREFIX}{os.getpid()}-other"
    foreign = shm / f"{kernel_host.SEGMENT_PREFIX}{proc.pid}-x"  # the kernels' segments: not the arena's to remove
    for f in (stale, mine, foreign):
        f.write_bytes(b"x")
    arena.create("new", PAGE)
    assert not stale.exists() and mine.exists() and foreign.exists()


def test_two_arenas_over_one_file_share_memory(shm):
    stride = arena.stride(arena.region_bytes(256, 256, 4, True), 2)
    path = arena.create("shared", 2 * stride)
    a, b = arena.Arena(path, stride, 1), arena.Arena(path, stride, 1)  # rank 1 in both of ab's jobs
    x, y = a.alloc(Comm())(256, F32), b.alloc(Comm())(256, F32)
    assert not x.any() and x.dtype == np.float32 and len(x) == 256
    x[:] = np.arange(256)
    assert np.array_equal(y, np.arange(256))  # the other job's view of the same pages
    y[7] = -1.0
    assert x[7] == -1.0
    # rank 0's region comes first, untouched; rank 1's starts one stride in
    zero = arena.Arena(path, stride, 0)
    assert not zero.alloc(Comm())(stride // 8, F64).any()
    assert np.frombuffer(zero.map, np.float32, 256, offset=stride)[7] == -1.0


def test_a_buffer_larger_than_a_region_is_refused(shm):
    path = arena.create("small", 2 * PAGE)
    a = arena.Arena(path, PAGE + 64, 0)
    assert len(a.alloc(Comm())((PAGE + 64) // 4, F32)) == (PAGE + 64) // 4  # exactly a region: fits
    with pytest.raises(ValueError, match=f"{PAGE + 68} bytes do not fit the arena's {PAGE + 64}-byte regions"):
        a.alloc(Comm())((PAGE + 68) // 4, F32)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_stale_arena_is_theirs_to_remove(shm):
    """As root, removing every stale file would delete other users' (issue 67): only this user's go."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    mine, theirs = shm / f"{arena.PREFIX}{proc.pid}-mine", shm / f"{arena.PREFIX}{proc.pid}-theirs"
    for f in (mine, theirs):
        f.write_bytes(b"x")
    os.chown(theirs, 65534, 65534)
    arena.create("new", PAGE)
    assert not mine.exists() and theirs.exists()
