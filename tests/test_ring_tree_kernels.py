"""ring_kernel and tree_kernel (cuda/collectives.cu, host build; commbench/rank/kernels.py).

* In one process (tests/kernel_threads.py, a thread per rank): every kernel, dtype, op and buffer
  mode at 2, 3, 4 and 8 ranks, bit for bit against numpy; 10,000 back-to-back calls; a wait
  that times out; the host's half and bfloat16 conversions against numpy and torch.
* Real jobs (mpirun and the commbench CLI): sweeps at 2, 3, 4 and 8 ranks, gloo, 64 MB, the
  kernels against MPI's own Allreduce, a rank killed inside a kernel, stale /dev/shm segments,
  and no C++ compiler.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kernel_threads as kt
from commbench.rank import kernel_host, kernel_node
from commbench.rank import kernels as K
from conftest import ROOT, commbench, load_run, needs_mpirun
from kernel_threads import DTYPES, KINDS, OPS, Case, Node, run_cases
from sweep_checks import check_sweep

needs_compiler = pytest.mark.skipif(kernel_host.compiler() is None, reason="no C++ compiler (g++, c++, clang++ or $CXX)")


# --- 1. bit-exact results, in one process ---------------------------------------------------------------
SLOT = 256  # small slots: sizes beyond ranks x chunk x channels stay small


def _sizes(n: int, dtype: str, channels: int, slot: int = SLOT) -> list[int]:
    chunk = slot // kt.storage(dtype).itemsize
    return [1, 7, chunk + 3, 2 * n * chunk * channels + 5]  # the last divides by none of n, chunk, channels


@needs_compiler
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_bit_exact_against_numpy(world, kind):
    """Every dtype x op x in place / out of place x size x channels (1 and 3), each rank's output
    byte for byte the numpy reduction; ranks run every case back to back on one set of regions."""
    node = Node(world, channels=3, slot_bytes=SLOT)
    rng = np.random.default_rng([world, list(KINDS).index(kind)])
    ops = [None] if kind == "ring_all_gather" else OPS
    done = 0
    for dtype in DTYPES:
        cases = [Case(node, kind, dtype, op, count, channels, in_place, rng)
                 for op in ops for in_place in (False, True) for channels in (1, 3)
                 for count in _sizes(world, dtype, channels)]
        wrong = run_cases(node, cases)
        assert not wrong, "\n".join(wrong[:20])
        done += len(cases)
    assert done == len(DTYPES) * len(ops) * 2 * 2 * 4


@needs_compiler
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_bit_exact_with_the_products_slots(dtype):
    """The product's 64 KiB slots and a count past ranks x chunk x channels (3 x 16384 x 3 floats)."""
    node = Node(3, channels=3)
    rng = np.random.default_rng(7)
    cases = [Case(node, kind, dtype, None if kind == "ring_all_gather" else op, count, channels, in_place, rng)
             for kind in KINDS for op in ("sum", "max") for in_place in (False, True) for channels in (1, 3)
             for count in _sizes(3, dtype, channels, K.SLOT_BYTES["cpu"])[-1:]]
    wrong = run_cases(node, cases)
    assert not wrong, "\n".join(wrong[:20])


@needs_compiler
@pytest.mark.parametrize("nslots", [2, 3])
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_bit_exact_with_tight_fifos(world, nslots):
    """FIFOs of 2 or 3 slots instead of 8 (CbComm.nslots; the tree's broadcast then lags its
    reduction by one chunk): the waits for a free slot bind on every connection, so a sender one
    slot too far ahead overwrites a message not yet read. (One slot deadlocks by design: a
    transfer holds its input slot while it waits for an output slot.)"""
    node = Node(world, channels=3, slot_bytes=SLOT)
    for comm in node.comms:
        comm.nslots = nslots
    rng = np.random.default_rng([world, nslots])
    cases = [Case(node, kind, dtype, None if kind == "ring_all_gather" else op, count, channels, in_place, rng)
             for kind in KINDS for dtype in ("float32", "float16", "int8") for op in ("sum", "max")
             for in_place in (False, True) for channels in (1, 3) for count in (7, 1000, 5001)
             if op == "sum" or kind != "ring_all_gather"]
    wrong = run_cases(node, cases)
    assert not wrong, "\n".join(wrong[:20])


@needs_compiler
def test_a_wrong_result_is_seen():
    """The check itself: a case whose output is spoiled after the calls is reported."""
    node = Node(2, channels=1, slot_bytes=SLOT)
    case = Case(node, "ring_all_reduce", "float16", "sum", 33, 1, False, np.random.default_rng(1))
    assert run_cases(node, [case]) == []
    case.outputs[1].view(np.uint8)[-1] ^= 1
    assert len(case.wrong()) == 1 and "rank 1 differs at 1 elements, first [32]" in case.wrong()[0]


# --- 3. many back-to-back calls ----------------------------------------------------------------------------
@needs_compiler
def test_ten_thousand_calls_back_to_back():
    """10,000 calls of varying kernel, op, size, channels and buffer mode (one seeded sequence on
    every rank), no barrier between them; every result checked by its rank right after its call."""
    n, calls, max_count = 4, 10_000, 3000
    node = Node(n, channels=3, slot_bytes=512)
    rng = np.random.default_rng(16)
    kinds = list(KINDS)
    plan = list(zip(rng.integers(0, len(kinds), calls), rng.integers(0, 2, calls),
                    np.exp(rng.uniform(0, np.log(max_count), calls)).astype(int).clip(1, max_count),
                    rng.integers(1, 4, calls), rng.integers(0, 2, calls)))
    sends = [rng.integers(-8, 9, n * max_count).astype(np.float32) for _ in range(n)]
    totals = {"sum": np.add.reduce(sends), "max": np.maximum.reduce(sends)}
    gathered = lambda c: np.concatenate([s[:c] for s in sends])  # noqa: E731
    lib = node.lib
    entries = {(k, op): node.entry_address(K.entry(*KINDS[k], "float32", op)) for k in kinds for op in ("sum", "max")}

    def rank(r):
        buf = np.empty(n * max_count, np.float32)
        call = K.CbCall(0, ctypes.pointer(node.comms[r]), 0, 0, 0, 1)
        wrong = []
        for i, (k, o, count, channels, in_place) in enumerate(plan):
            kind, op = kinds[k], ("sum", "max")[o]
            coll = KINDS[kind][1]
            buf[:] = np.nan
            if coll == "all_reduce":
                src, dst, want = sends[r][:count], buf[:count], totals[op][:count]
                if in_place:
                    buf[:count] = src
                    src = dst
                out = dst
            elif coll == "reduce_scatter":
                src, dst, want = sends[r][:n * count], buf[:count], totals[op][r * count:(r + 1) * count]
                out = dst
                if in_place:
                    buf[:n * count] = src
                    src, dst, out = buf, buf[r * count:], buf[r * count:(r + 1) * count]
            else:
                src, dst, want, out = sends[r][:count], buf, gathered(count), buf[:n * count]
                if in_place:
                    buf[r * count:(r + 1) * count] = src
                    src = buf[r * count:]
            call.entry = entries[kind, "sum" if coll == "all_gather" else op]
            call.send, call.recv, call.channels = src.ctypes.data, dst.ctypes.data, int(channels)
            call.count = int(count) * 4 if coll == "all_gather" else int(count)
            code = lib.cb_host_call(ctypes.byref(call))
            if code:
                return i, K.describe(node.error(r), kind), wrong
            if not np.array_equal(out.view(np.int32), want.view(np.int32)):
                wrong.append(i)
        return calls, None, wrong

    start = time.monotonic()
    results = node.threads(rank, join_s=300)
    elapsed = time.monotonic() - start
    for r, (done, fault, wrong) in enumerate(results):
        assert fault is None, f"rank {r}, call {done}: {fault}"
        assert done == calls and wrong == [], f"rank {r}: wrong results in calls {wrong[:10]} ({len(wrong)})"
    print(f"{calls} calls on {n} ranks in {elapsed:.1f} s")


# --- 4. a wait that fails ------------------------------------------------------------------------------------
@needs_compiler
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_rank_alone_times_out_and_says_who_it_waited_for(kind):
    """Rank 1 of 3 calls, the others never do: the call returns within the timeout and the error
    words name rank 1, the step and a peer it waits for (ring: its left neighbour)."""
    node = Node(3, channels=1, slot_bytes=SLOT, timeout_s=0.2)
    case = Case(node, kind, "float32", None if kind == "ring_all_gather" else "sum", 1000, 1, False,
                np.random.default_rng(3))
    start = time.monotonic()
    [code] = node.threads(lambda r: node.host_call(case.calls[r]), ranks=[1])
    elapsed = time.monotonic() - start
    assert code == 1
    assert 0.2 <= elapsed < 5
    err = node.error(1)
    code, rank, channel, step, peer, waited = err
    message = K.describe(err, kind)
    assert (rank, channel) == (1, 0) and waited in (0, 1)
    assert message.startswith(f"{kind}: rank 1 timed out at step {step} of channel 0 waiting for ")
    assert message.endswith("(code 1)") and f"rank {peer}" in message
    if kind.startswith("ring"):  # step 0 sends (a free slot is there); step 1 receives from the left
        assert (step, peer, waited) == (1, 0, 0)
        assert message == f"{kind}: rank 1 timed out at step 1 of channel 0 waiting for rank 0's data (code 1)"
    else:  # rank 1 is a leaf of the first tree: it sends chunks 0..lag up, then waits for the broadcast
        parent, children = K.trees(3)[0]
        assert children[1] == [] and (step, peer, waited) == (K.SLOTS // 2 + 1, parent[1], 0)
    assert node.error(0)[0] == node.error(2)[0] == 0  # nobody else called


@needs_compiler
def test_kernel_fault_names_rank_step_and_peer():
    """The product's path: NodeKernels on a /dev/shm segment; rank 0 of 2 alone raises KernelFault."""
    class Alone:  # rank 0 of 2; its peer never comes
        rank, size = 0, 2

        def allgather_object(self, obj):
            return [obj, obj]

        def barrier(self):
            pass

    node = kernel_node.NodeKernels(Alone(), "cpu", 0.2, 1)
    assert not _segments_of([os.getpid()])  # mapped and unlinked at once
    x = np.arange(100, dtype=np.float64)
    run = node.bind(K.entry("ring", "all_reduce", "float64", "sum"), "float64", x, x, 100, 1)
    with pytest.raises(K.KernelFault) as fault:
        run()
    assert str(fault.value) == "ring_all_reduce: rank 0 timed out at step 1 of channel 0 waiting for rank 1's data (code 1)"
    node.close()
    words = [1, 3, 2, 17, 5, 1]
    assert K.describe(words, "tree_all_reduce") == ("tree_all_reduce: rank 3 timed out at step 17 of channel 2 "
                                                    "waiting for a free slot at rank 5 (code 1)")


# --- 8. the host's half and bfloat16 conversions ---------------------------------------------------------
SHIM = r"""
#include "portable.h"
extern "C" {
void half_to_float(const uint16_t* in, float* out, long n) {
    for (long i = 0; i < n; ++i) { cb_half h; h.bits = in[i]; out[i] = float(h); }
}
void float_to_half(const float* in, uint16_t* out, long n) { for (long i = 0; i < n; ++i) out[i] = cb_half(in[i]).bits; }
void bfloat16_to_float(const uint16_t* in, float* out, long n) {
    for (long i = 0; i < n; ++i) { cb_bfloat16 h; h.bits = in[i]; out[i] = float(h); }
}
void float_to_bfloat16(const float* in, uint16_t* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = cb_bfloat16(in[i]).bits;
}
}
"""


@pytest.fixture(scope="module")
def conversions(tmp_path_factory):
    cxx = kernel_host.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (g++, c++, clang++ or $CXX)")
    folder = tmp_path_factory.mktemp("portable")
    (folder / "shim.cc").write_text(SHIM)
    proc = subprocess.run([cxx, *kernel_host.HOST_FLAGS, f"-I{K.SOURCE.parent}", str(folder / "shim.cc"), "-o",
                           str(folder / "shim.so")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lib = ctypes.CDLL(str(folder / "shim.so"))

    def wrap(name, in_type, out_type):
        fn = getattr(lib, name)

        def convert(x):
            x = np.ascontiguousarray(x, dtype=in_type)
            out = np.empty(x.shape, out_type)
            fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_long(x.size))
            return out
        return convert
    return {"h2f": wrap("half_to_float", np.uint16, np.float32), "f2h": wrap("float_to_half", np.float32, np.uint16),
            "b2f": wrap("bfloat16_to_float", np.uint16, np.float32),
            "f2b": wrap("float_to_bfloat16", np.float32, np.uint16)}


ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def _floats(seed: int, halfway_of=None) -> np.ndarray:
    """float32 inputs: random bit patterns (NaNs, infinities, subnormals), values across the 16-bit
    type's range, exact halfway points between neighbouring 16-bit values and their float
    neighbours, the overflow boundary."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    spread = (rng.choice([-1, 1], 1_000_000) * np.exp2(rng.uniform(-30, 17, 1_000_000))).astype(np.float32)
    parts = [bits, spread]
    if halfway_of is not None:
        finite = halfway_of[np.isfinite(halfway_of)].astype(np.float64)
        ordered = np.unique(finite)
        mid = ((ordered[1:] + ordered[:-1]) / 2).astype(np.float32)
        assert (mid.astype(np.float64) == (ordered[1:] + ordered[:-1]) / 2).all()  # exact in float32
        up, down = np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))
        parts += [mid, up, down]
    parts.append(np.array([65504, 65519.996, 65520, 65536, 3.4e38, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001,
                           2.0 ** -26, 1e-45, 0.0, -0.0], np.float32))
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


def _check_nans(x, got, exponent: int, quiet: int):
    """Where x is a NaN, got is a NaN of the same sign with its quiet bit set (signalling NaNs are
    quieted, as the F16C instruction and a GPU convert); the mask of x's NaNs."""
    nan = np.isnan(x)
    g = got[nan]
    assert ((g & exponent) == exponent).all() and (g & quiet).all()
    assert ((g >> 15) == (x[nan].view(np.uint32) >> 31)).all()
    return nan


def test_half_to_float_every_pattern(conversions):
    got = conversions["h2f"](ALL16)
    assert got.view(np.uint32).tobytes() == ALL16.view(np.float16).astype(np.float32).view(np.uint32).tobytes()


def test_float_to_half_rounds_as_numpy(conversions):
    # every half back from its float: exact, but a signalling NaN comes back quiet
    back = conversions["f2h"](ALL16.view(np.float16).astype(np.float32))
    signalling = ((ALL16 & 0x7E00) == 0x7C00) & ((ALL16 & 0x3FF) != 0)
    assert back[~signalling].tobytes() == ALL16[~signalling].tobytes()
    assert (back[signalling] == ALL16[signalling] | 0x200).all()
    x = _floats(1, halfway_of=ALL16.view(np.float16))
    got = conversions["f2h"](x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    nan = _check_nans(x, got, 0x7C00, 0x0200)
    quiet_in = nan & ((x.view(np.uint32) & 0x400000) != 0)
    assert (got[quiet_in] == want[quiet_in]).all()  # a quiet NaN: numpy's bits (numpy keeps signalling ones)
    bad = np.flatnonzero(got[~nan] != want[~nan])
    assert bad.size == 0, [(float(v), hex(g), hex(w)) for v, g, w in
                           zip(x[~nan][bad[:5]], got[~nan][bad[:5]], want[~nan][bad[:5]])]
    assert np.isnan(x).sum() > 1000 and (np.abs(x) < 2.0 ** -14).sum() > 1000  # the cases are there


def test_bfloat16_conversions_as_torch(conversions):
    torch = pytest.importorskip("torch")
    as_bits = lambda t: t.view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    every = torch.from_numpy(ALL16.view(np.int16).copy()).view(torch.bfloat16)
    assert conversions["b2f"](ALL16).view(np.uint32).tobytes() == every.float().numpy().view(np.uint32).tobytes()
    floats32 = every.float().numpy()
    assert conversions["f2b"](floats32)[~np.isnan(floats32)].tobytes() == ALL16[~np.isnan(floats32)].tobytes()
    x = _floats(2, halfway_of=floats32)
    got = conversions["f2b"](x)
    want = as_bits(torch.from_numpy(x).to(torch.bfloat16))
    nan = _check_nans(x, got, 0x7F80, 0x0040)
    bad = np.flatnonzero(got[~nan] != want[~nan])
    assert bad.size == 0, [(float(v), hex(g), hex(w)) for v, g, w in
                           zip(x[~nan][bad[:5]], got[~nan][bad[:5]], want[~nan][bad[:5]])]


# --- real jobs ---------------------------------------------------------------------------------------------------
def _segments_of(pids) -> list[str]:
    """/dev/shm segments of the kernels named after one of these processes."""
    names = os.listdir(kernel_host.SHM_DIR) if os.path.isdir(kernel_host.SHM_DIR) else []
    return [s for s in names for pid in pids if s.startswith(f"{kernel_host.SEGMENT_PREFIX}{pid}-")]


def _job_processes(out_dir) -> dict[int, int | None]:
    """Processes of the run writing to out_dir (workers, and a launcher whose command line carries
    a worker's): pid -> rank (OMPI_COMM_WORLD_RANK, None where not a rank)."""
    from commbench.rank.worker import decode_spec

    found = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode().split("\0")
            if "commbench.rank.worker" not in args or "--spec" not in args[:-1]:
                continue
            if not decode_spec(args[args.index("--spec") + 1]).out_dir.startswith(str(out_dir)):
                continue
            env = dict(v.split("=", 1) for v in (proc / "environ").read_bytes().decode().split("\0") if "=" in v)
        except (OSError, ValueError):
            continue
        rank = env.get("OMPI_COMM_WORLD_RANK")
        found[int(proc.name)] = int(rank) if rank is not None else None
    return found


def _skipped(meta, algorithm):
    return [s for s in meta["skipped"] if s["algorithm"] == algorithm]


def _kernel_rows_exact(rows):
    kernel = rows[rows.algorithm.isin(["ring_kernel", "tree_kernel"])]
    assert len(kernel) and (kernel.wrong == 0).all(), kernel[kernel.wrong != 0]
    return kernel


# --- 2. real launches ------------------------------------------------------------------------------------------
SWEEPS = {  # world: (dtypes, ops, sizes, channels); MPI has no bfloat16 (gloo below runs it)
    2: ("float32,float64,float16,int32,int64,int8,uint8", "sum,prod,min,max", "8,12,1028,65548", None),
    3: ("float32,float16,int64,uint8", "sum,prod,min,max", "12,1028,200012", 3),
    4: ("float64,float16,int8", "sum,max", "8,1028,65548", 2),
    8: ("float32,int8", "sum,min", "64,2056", None),
}


@needs_compiler
@needs_mpirun
@pytest.mark.parametrize("world", sorted(SWEEPS))
def test_real_sweep(tmp_path, world):
    """native, ring_kernel and tree_kernel through mpirun and the CLI: every collective, both buffer
    modes; the harness checks every result (wrong == 0); tree_kernel's reduce-scatter and
    all-gather are skipped with their reason."""
    from commbench.dtypes import DTYPES as SIZES_OF

    dtypes, ops, sizes, channels = SWEEPS[world]
    out = tmp_path / "r"
    commbench("run", "-n", world, "--backend", "mpi", "-a", "native,ring_kernel,tree_kernel", "--sizes", sizes,
              "-d", dtypes, "-o", ops, "--both", "--iters", 3, "-w", 1, "--out", out, "--quiet",
              *(["--channels", channels] if channels else []), check_rc=0, timeout=300)
    rows, samples, meta = load_run(out)
    per_algorithm = {"native": ("all_reduce", "reduce_scatter", "all_gather"),
                     "ring_kernel": ("all_reduce", "reduce_scatter", "all_gather"), "tree_kernel": ("all_reduce",)}
    nops = len(ops.split(","))
    expected = sum((nops if coll != "all_gather" else 1) * 2
                   for algo, colls in per_algorithm.items() for coll in colls for d in dtypes.split(",")
                   for s in sizes.split(",")
                   if int(s) // SIZES_OF[d].itemsize // (1 if coll == "all_reduce" else world) > 0)
    check_sweep(rows, samples, meta, world, expected)
    kernel = _kernel_rows_exact(rows)
    assert set(zip(kernel.algorithm, kernel.collective)) == {
        ("ring_kernel", c) for c in per_algorithm["ring_kernel"]} | {("tree_kernel", "all_reduce")}
    assert set(kernel.in_place) == {0, 1} and set(kernel.dtype) == set(dtypes.split(","))
    tree_skips = _skipped(meta, "tree_kernel")
    assert {s["collective"] for s in tree_skips} == {"reduce_scatter", "all_gather"}
    for s in tree_skips:
        name = s["collective"].replace("_", "-")
        assert s["reason"] == f"tree_kernel has no {name} (it runs all-reduce)"
    assert all(s["reason"].endswith("less than one element per rank") for s in meta["skipped"]
               if s["algorithm"] != "tree_kernel")


@needs_compiler
@needs_mpirun
def test_gloo_ring_kernel_with_bfloat16(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r"
    commbench("run", "-n", 2, "--backend", "gloo", "-a", "ring_kernel", "--sizes", "8,1028", "-d", "bfloat16,float32",
              "-o", "sum,max", "--both", "--iters", 3, "-w", 1, "--out", out, "--quiet", check_rc=0, timeout=300)
    rows, _, meta = load_run(out)
    kernel = _kernel_rows_exact(rows)
    assert len(kernel) == len(rows) == 2 * 2 * (2 + 2 + 1) * 2  # dtypes x sizes x (ops of AR, RS; AG) x modes
    assert set(kernel.dtype) == {"bfloat16", "float32"} and set(kernel.backend) == {"gloo"}
    assert meta["status"] == "completed" and not meta["skipped"]


@needs_compiler
@needs_mpirun
def test_64_megabyte_all_reduce(tmp_path):
    out = tmp_path / "r"
    commbench("run", "-n", 2, "--backend", "mpi", "-a", "ring_kernel,tree_kernel", "-c", "all_reduce",
              "--sizes", "64M", "--iters", 2, "-w", 1, "--out-of-place", "--out", out, "--quiet", check_rc=0,
              timeout=300)
    rows, _, _ = load_run(out)
    kernel = _kernel_rows_exact(rows)
    assert sorted(kernel.algorithm) == ["ring_kernel", "tree_kernel"] and (kernel.size_bytes == 64 << 20).all()
    assert (kernel.iterations == 2).all()


@needs_compiler
@needs_mpirun
def test_kernels_match_mpi_allreduce_bit_for_bit():
    """One job: the kernels' all-reduce and MPI_Allreduce on the same random integers, compared."""
    from commbench.run.launch import find_binary

    proc = subprocess.run([find_binary("mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", "4",
                           sys.executable, str(ROOT / "tests" / "scripts" / "kernels_vs_mpi.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "compared 1536 results, 0 differ" in proc.stdout  # 2 algorithms x 6 dtypes x 4 ops x 4 counts x 2 x 4 ranks


# --- 5. a rank killed inside a kernel -------------------------------------------------------------------------
@needs_compiler
@needs_mpirun
def test_rank_killed_inside_the_kernel(tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "-n", "2", "--backend", "mpi",
                             "-a", "ring_kernel", "-c", "all_reduce", "--in-place", "--sizes", "8,16M",
                             "--iters", "100000", "-w", "1", "--batch", "1", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, victim = time.monotonic() + 60, None
        while time.monotonic() < deadline:  # the 8-byte point done: the ranks are in the 16 MB one
            csv = out / "results.csv"
            if csv.exists() and len(csv.read_text().splitlines()) >= 2:
                victim = next((pid for pid, rank in _job_processes(out).items() if rank == 1), None)
                break
            time.sleep(0.05)
        assert victim is not None, "rank 1 never got to the 16 MB point"
        time.sleep(0.3)
        workers = _job_processes(out)
        assert sorted(r for r in workers.values() if r is not None) == [0, 1]
        assert not _segments_of(workers)  # unlinked as soon as both ranks mapped it
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr[-3000:]
    lines = [ln for ln in (stdout + stderr).splitlines() if "was killed by SIGKILL" in ln]
    assert len(lines) == 1 and "rank 1 was killed by SIGKILL in all_reduce ring_kernel on mpi, float32 sum, in-place, " \
        "16777216 B" in lines[0], stderr[-3000:]
    assert "Traceback" not in stdout + stderr
    assert time.monotonic() - killed < 30
    end = time.monotonic() + 10
    while _job_processes(out) and time.monotonic() < end:
        time.sleep(0.1)
    assert _job_processes(out) == {}
    assert not _segments_of(workers)
    rows, _, meta = load_run(out)
    assert list(rows.size_bytes) == [8] and (rows.wrong == 0).all()
    assert meta["status"] == "failed" and "SIGKILL" in meta["error"]


# --- 6. stale segments ---------------------------------------------------------------------------------------------
@needs_compiler
@needs_mpirun
def test_stale_segment_is_removed_and_a_live_ones_kept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(kernel_host.SHM_DIR) / f"{kernel_host.SEGMENT_PREFIX}{dead.pid}-deadbeef0000"
    live = Path(kernel_host.SHM_DIR) / f"{kernel_host.SEGMENT_PREFIX}{os.getpid()}-deadbeef0001"
    for p in (stale, live):
        p.write_bytes(b"\0" * 4096)
    try:
        commbench("run", "-n", 2, "--backend", "mpi", "-a", "ring_kernel", "-c", "all_reduce", "--in-place",
                  "--sizes", "8", "--iters", 1, "-w", 0, "--out", tmp_path / "r", "--quiet", check_rc=0, timeout=300)
        assert not stale.exists()
        assert live.exists()
    finally:
        for p in (stale, live):
            p.unlink(missing_ok=True)
    rows, _, _ = load_run(tmp_path / "r")
    _kernel_rows_exact(rows)


# --- 7. no compiler -------------------------------------------------------------------------------------------------
@needs_mpirun
@pytest.mark.parametrize("cxx,says", [
    ("/nonexistent/c++", "ring_kernel and tree_kernel need a C++ compiler for their host build "
                         "(CXX=/nonexistent/c++ is not a program)"),
    ("false", "the host build of cuda/collectives.cu failed (false exited 1, printing nothing)"),  # runs and fails
], ids=["missing", "failing"])
def test_without_a_compiler_the_points_are_skipped(tmp_path, cxx, says):
    cache = tmp_path / "cache"
    proc = commbench("run", "-n", 2, "--backend", "mpi", "-a", "native,ring_kernel,tree_kernel", "-c", "all_reduce",
                     "--in-place", "--sizes", "8", "--iters", 1, "-w", 0, "--out", tmp_path / "r", check_rc=0,
                     timeout=300, env={"CXX": cxx, "COMMBENCH_CACHE": str(cache)})
    assert "Traceback" not in proc.stdout + proc.stderr
    rows, _, meta = load_run(tmp_path / "r")
    assert list(rows.algorithm) == ["native"] and (rows.wrong == 0).all()
    skipped = _skipped(meta, "ring_kernel") + _skipped(meta, "tree_kernel")
    assert len(skipped) == 2
    for s in skipped:
        assert s["reason"].startswith(says) and "\n" not in s["reason"], s["reason"]
        assert f"skipped all_reduce · mpi · {s['algorithm']} · float32 · sum · in-place: {s['reason']}\n" in proc.stdout
    assert not list(cache.rglob("*.so"))
