"""The machine's floors (commbench/kernels/floor.py, floor.cc): the probe built and run here, cached per
machine, gathered per host, and every point's efficiency read against them; `commbench floor`."""

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_inprocess import run_cli
from commbench.errors import OK
from commbench.kernels import floor
from commbench.kernels.host import compiler
from commbench.presentation.tables import footer

needs_compiler = pytest.mark.skipif(compiler() is None, reason="no C++ compiler for the probe")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMMBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@needs_compiler
def test_the_probe_measures_cached_and_leaves_the_callers_cores_alone(cache):
    allowed = os.sched_getaffinity(0)
    found = floor.machine_floor()
    assert os.sched_getaffinity(0) == allowed  # its threads are pinned, never the caller's
    assert 0 < found["handoff_us"] < 100 and 0 < found["exchange_us"] < 100 and 0.05 < found["copy_GBps"] < 1000
    assert found["host"] == socket.gethostname() and found["cores"] == list(floor.cores())
    assert json.loads(floor.cache_path().read_text()) == found and floor.cache_path().is_relative_to(cache)
    assert floor.machine_floor() == found  # read back, not measured again
    again = floor.machine_floor(fresh=True)
    assert again["measured_at"] >= found["measured_at"]
    assert floor.cached() == {k: v for k, v in again.items() if k != "slower_now"}  # (said, not cached)
    assert again["handoff_us"] <= found["handoff_us"] and again["copy_GBps"] >= found["copy_GBps"]  # the best kept


@needs_compiler
def test_the_exchange_adds_the_peers_value_of_its_own_iteration():
    """Each add reads the peer's value of the same iteration (two lines a side, by parity); in one line a
    side overwrote its value before the peer read it, and 98 % of the adds read the next one here."""
    a, b = floor.cores()
    if a < 0:
        pytest.skip("the probe needs two cores")
    assert floor._library().cb_floor_exchange_error(a, b, 200_000) == 0


MEASURED = {"handoff_us": 1.0, "exchange_us": 2.0, "copy_GBps": 3.0, "cores": [0, 1], "cpu_model": "cpu",
            "host": "vm", "measured_at": "2026-11-28T00:00:00Z", "source": "probe"}


def test_a_damaged_cache_is_measured_again(cache, monkeypatch):
    """Anything but what measure() writes (a file damaged or edited by hand) is measured again: never
    an internal error, and never a floor no machine has (an infinite one made every row's efficiency
    inf, which every reader then refuses)."""
    path = floor.cache_path()
    path.parent.mkdir(parents=True)
    damaged = ["{", "[]", json.dumps(MEASURED | {"handoff_us": 0})]
    damaged += [json.dumps(MEASURED | change) for change in (
        {"exchange_us": float("inf")}, {"copy_GBps": float("nan")}, {"handoff_us": True}, {"exchange_us": 1e308},
        {"cores": "ab"}, {"cores": [1, 2, 3]}, {"cores": [0, True]}, {"cpu_model": 7})]
    damaged += [json.dumps({k: v for k, v in MEASURED.items() if k != gone}) for gone in ("cores", "host")]
    for text in damaged:
        path.write_text(text)
        assert floor.cached() is None, text
    path.write_text(json.dumps(MEASURED))
    assert floor.cached() == MEASURED
    path.unlink()
    monkeypatch.setattr(floor, "measure", lambda: dict(MEASURED))
    assert floor.machine_floor()["exchange_us"] == 2.0 and floor.cached()["exchange_us"] == 2.0
    path.unlink()
    path.mkdir()  # a folder where the file goes: measured, not cached, nothing left beside it
    assert floor.machine_floor() == MEASURED and sorted(p.name for p in path.parent.iterdir()) == [path.name]


class Ranks:
    """allgather_object over ranks of this process, run one after another (rank 0 first: it measures)."""

    def __init__(self, rank, size, gathered):
        self.rank, self.size, self.gathered = rank, size, gathered

    def allgather_object(self, obj):
        return [obj] * self.size if self.rank == 0 else self.gathered.pop(0)


def test_node_floors_one_measurement_per_host(cache, monkeypatch):
    calls = []
    monkeypatch.setattr(floor, "measure", lambda: calls.append(1) or MEASURED | {"handoff_us": 0.06,
                                                                                "exchange_us": 0.07})
    found = floor.node_floors(Ranks(0, 1, []))
    assert found == {socket.gethostname(): floor.cached()} and calls == [1]
    assert floor.node_floors(Ranks(0, 1, [])) == found and calls == [1]  # cached: not measured again


def test_efficiency_against_the_floors():
    floors = {"exchange_us": 0.07, "copy_GBps": 20.0, "device_copy_GBps": 2000.0}
    assert floor.efficiency(floors, 0.14, 5.0, 2, 1, "cpu") == {"latency_efficiency": 0.5, "bandwidth_efficiency": 0.25}
    assert floor.efficiency(floors, 10.0, 500.0, 2, 1, "cuda") == {"latency_efficiency": None,
                                                                   "bandwidth_efficiency": 0.25}
    empty = {"latency_efficiency": None, "bandwidth_efficiency": None}
    assert floor.efficiency(floors, 0.14, 5.0, 4, 2, "cpu") == empty  # across nodes: a node's floors say nothing
    assert floor.efficiency(None, 0.14, 5.0, 2, 1, "cpu") == empty
    # one rank (the GPU's NCCL at world 1 printed "best busbw 0.00x the copy rate"): nothing crossed
    assert floor.efficiency(floors, 2.4, 0.0, 1, 1, "cuda") == empty


def test_the_table_footer_says_how_near_the_floor_the_best_points_come():
    rows = [{"in_place": 0, "busbw_gbps": 0.1, "size_bytes": 8, "latency_efficiency": 0.625,
             "bandwidth_efficiency": 0.005},
            {"in_place": 0, "busbw_gbps": 5.0, "size_bytes": 1 << 20, "latency_efficiency": 0.0003,
             "bandwidth_efficiency": 0.25}]
    assert footer(rows)[1] == ("# Against the floor    : fastest point 1.60x the 8 B exchange floor (at size 8), best busbw "
                               "0.25x the copy rate (at size 1M) (commbench floor)")
    assert len(footer([{**r, "latency_efficiency": None, "bandwidth_efficiency": ""} for r in rows])) == 1
    # a point faster than its floor: the floor was measured in the cores' slow state (3.6: a run here)
    assert footer([rows[0] | {"latency_efficiency": 3.604}])[1] == (
        "# Against the floor    : fastest point 0.28x the 8 B exchange floor (at size 8; below it: the floor was "
        "likely measured while the cores were slower (`commbench floor --fresh` for later runs)), best busbw 0.01x "
        "the copy rate (at size 8) (commbench floor)")
    assert "below it" not in footer([rows[0] | {"latency_efficiency": 1.003}])[1]  # (1.00x: at the floor)


def test_a_fresh_probe_keeps_each_figure_the_cache_holds_better(cache, monkeypatch):
    """A floor is the machine at its best: a probe while this VM's cores were apart (hand-off 0.26 us,
    against 0.058 sharing a cache) replaced it, and every efficiency read against it came out 3.6."""
    best = MEASURED | {"handoff_us": 0.058, "exchange_us": 0.054, "copy_GBps": 23.0}
    slow = MEASURED | {"handoff_us": 0.26, "exchange_us": 0.25, "copy_GBps": 24.0,
                       "measured_at": "2026-11-29T00:00:00Z"}
    assert floor.kept_best(None, slow) == slow
    kept = slow | {"handoff_us": 0.058, "exchange_us": 0.054, "best_since": best["measured_at"]}  # (copy: the new)
    assert floor.kept_best(best, slow) == kept | {"slower_now": {"handoff_us": 0.26, "exchange_us": 0.25}}
    assert floor.kept_best(kept, slow)["best_since"] == best["measured_at"]  # (the first of those kept together)
    monkeypatch.setattr(floor, "measure", lambda: dict(best))
    floor.machine_floor()
    monkeypatch.setattr(floor, "measure", lambda: dict(slow))
    out = run_cli("floor", "--fresh")
    assert out.code == OK and "0.054 us" in out.stdout and "24.00 GB/s" in out.stdout
    assert "measured 2026-11-29T00:00:00Z (the best of the probes since 2026-11-28T00:00:00Z)" in out.stdout
    assert out.stdout.splitlines()[-1] == (f"  this probe read hand-off 0.260 us, exchange 0.250 us: worse than the "
                                           f"best above, which stays cached (delete {floor.cache_path()} to forget it)")
    assert floor.cached() == kept
    floor.cache_path().write_text(json.dumps(kept | {"best_since": 7}))
    assert floor.cached() is None  # (a damaged file: measured again)


def test_commbench_floor_prints_the_floors(cache, monkeypatch):
    monkeypatch.setattr(floor, "measure", lambda: {"handoff_us": 0.061, "exchange_us": 0.072, "copy_GBps": 19.5,
                                                   "cores": [0, 1], "cpu_model": "CPU", "host": "h",
                                                   "measured_at": "2026-11-27T00:00:00Z", "source": "probe"})
    out = run_cli("floor")
    assert out.code == OK and "0.072 us" in out.stdout and "19.50 GB/s" in out.stdout and "cached" not in out.stdout
    again = run_cli("floor")
    assert "(cached: --fresh measures again)" in again.stdout
    assert json.loads(run_cli("floor", "--json").stdout)["copy_GBps"] == 19.5


@needs_compiler
def test_two_threads_on_one_core_measure_nothing_quickly(cache, monkeypatch):
    """Both threads pinned to one core take turns in time slices: the probe sees it in its short
    batches (ten, about a second) and says so, instead of spinning for minutes (a rank mpirun bound
    to one core would)."""
    monkeypatch.setattr(floor, "cores", lambda: (0, 0))
    with pytest.raises(floor.FloorUnavailable, match="its two threads took turns on one core"):
        floor.measure()


@needs_compiler
def test_a_moments_other_work_on_both_cores_does_not_stop_the_probe(cache):
    """Beside a spinner on each of its cores the probe's threads take turns as on one core; a moment
    of it (a neighbour, a process ending: what failed a CI run) is waited out, not reported."""
    a, b = floor.cores()
    if a < 0:
        pytest.skip("one core")
    spin = ("import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
            "end = time.monotonic() + 0.4\nwhile time.monotonic() < end: pass")
    # two a core: beside them the old probe (one short batch) measured nothing 9 times in 10
    spinners = [subprocess.Popen([sys.executable, "-c", spin, str(c)]) for c in (a, b, a, b)]
    try:
        time.sleep(0.1)
        assert all(p.poll() is None for p in spinners)  # both still spinning as the probe starts
        found = floor.measure()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert 0 < found["handoff_us"] < 100 and 0 < found["exchange_us"] < 100


class ThreadRanks:
    """Ranks as threads of one host: allgather_object through a barrier."""

    def __init__(self, size):
        import threading

        self.size, self.barrier, self.slots, self.lock = size, threading.Barrier(size), {}, threading.Lock()

    def comm(self, rank):
        world = self

        class Comm:
            def __init__(self):
                self.rank, self.size, self.calls = rank, world.size, 0

            def allgather_object(self, obj):
                self.calls += 1
                with world.lock:
                    world.slots.setdefault(self.calls, [None] * world.size)[self.rank] = obj
                world.barrier.wait()
                got = list(world.slots[self.calls])
                world.barrier.wait()
                return got
        return Comm()


def test_a_probe_that_fails_does_not_hold_the_hosts_other_ranks(cache, monkeypatch):
    """The host's first rank cannot measure (no compiler, one core): the others, sleeping until the
    cache holds the floors, wake as soon as it says it ended, not after their 120 s wait."""
    import threading

    def fail():
        time.sleep(0.3)
        raise floor.FloorUnavailable("the floor probe needs two cores (this machine shows one)")
    monkeypatch.setattr(floor, "measure", fail)
    world, out = ThreadRanks(2), {}
    start = time.monotonic()
    threads = [threading.Thread(target=lambda r: out.update({r: floor.node_floors(world.comm(r), wait_s=60)}), args=(r,))
               for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert time.monotonic() - start < 10 and out[0] == out[1] == {socket.gethostname(): "the floor probe needs two "
                                                                                         "cores (this machine shows one)"}


def test_hosts_of_one_machine_share_one_measurement(cache, monkeypatch):
    """MPI's emulated nodes: two host names on one kernel (one boot id) are one machine: its first
    rank measures, once, and every host of it gets those floors."""
    import threading
    import types

    calls = []
    monkeypatch.setattr(floor, "measure", lambda: calls.append(1) or MEASURED | {"handoff_us": 0.06,
                                                                                "exchange_us": 0.07})
    monkeypatch.setattr(floor, "socket", types.SimpleNamespace(
        gethostname=lambda: f"vm-n{threading.current_thread().name[-1]}"))
    world, out = ThreadRanks(4), {}
    threads = [threading.Thread(target=lambda r: out.update({r: floor.node_floors(world.comm(r), wait_s=30)}),
                                args=(r,), name=f"rank-{r // 2}") for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert calls == [1] and out[0] == out[1] == out[2] == out[3]
    assert set(out[0]) == {"vm-n0", "vm-n1"} and out[0]["vm-n0"] is not None and out[0]["vm-n1"]["exchange_us"] == 0.07


@pytest.mark.parametrize("planted", ["link", "directory"])
def test_a_name_planted_at_the_hand_off_marker_is_neither_followed_nor_fatal(cache, monkeypatch, tmp_path, planted):
    """Issue 67, H4 and M1: another user's dangling link at $TMPDIR/commbench-floor-<pid> made root create its
    target; a directory there failed the run (IsADirectoryError). The marker is made new (O_EXCL, no link
    followed) and read only as this user's regular file: the waiting rank waits for the cache instead."""
    import tempfile
    import threading

    marker = Path(tempfile.gettempdir()) / f"commbench-floor-{os.getpid()}"  # thread ranks: one pid
    target = tmp_path / "created-by-root"
    marker.symlink_to(target) if planted == "link" else marker.mkdir()
    try:
        monkeypatch.setattr(floor, "measure", lambda: (_ for _ in ()).throw(floor.FloorUnavailable("no probe here")))
        world, out = ThreadRanks(2), {}
        threads = [threading.Thread(target=lambda r: out.update({r: floor.node_floors(world.comm(r), wait_s=1)}),
                                    args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert out[0] == out[1] == {socket.gethostname(): "no probe here"}
        assert not target.exists() and (marker.is_symlink() if planted == "link" else marker.is_dir())
    finally:
        marker.unlink() if planted == "link" else marker.rmdir()


def test_a_cache_someone_else_could_have_written_is_not_believed(cache, tmp_path):
    """The floors become every row's efficiencies: a file another user may have written (a link, a file or
    folder others can write to, another owner's) is measured again, never read as this machine's (issue 67,
    M6); a file written here is this user's alone (0600 in a 0700 folder) whatever the umask."""
    path = floor.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(MEASURED))
    assert floor.cached() == MEASURED
    path.chmod(0o666)
    assert floor.cached() is None
    path.chmod(0o600)
    path.parent.chmod(0o777)
    assert floor.cached() is None
    path.parent.chmod(0o700)
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(MEASURED))
    path.unlink()
    path.symlink_to(planted)
    assert floor.cached() is None
    path.unlink()
    path.write_text(json.dumps(MEASURED) + " " * floor.MAX_CACHE_BYTES)
    assert floor.cached() is None
    if os.getuid() == 0:  # another owner: only root can make one here
        path.write_text(json.dumps(MEASURED))
        os.chown(path, 12345, 12345)
        assert floor.cached() is None
        path.unlink()
    old = os.umask(0)
    try:
        path.unlink(missing_ok=True)
        path.parent.chmod(0o777)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(floor, "measure", lambda: dict(MEASURED))
            assert floor.machine_floor() == MEASURED
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert floor.cached() == MEASURED
