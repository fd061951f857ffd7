"""Every kernel in cuda/ compiles with nvcc for sm_80 and sm_90 as NVRTC compiles it at run time,
holds every entry point the Python side launches, flushes no subnormal to zero and spills no
register (what a machine without a GPU can check)."""

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from commbench.kernels import abi as kernel_abi
from commbench.sources import CUDA_DIR
from commbench.kernels.reducers import CUPY_NVRTC_OPTIONS, NVRTC_OPTIONS, cuda_source, entry_points as reducer_entry_points
from commbench.errors import OK


def entry_points() -> dict[str, list[str]]:
    """Every kernel the Python side launches, by the file in cuda/ that must define it."""
    return {**reducer_entry_points(), **kernel_abi.entry_points()}


SOURCES = sorted(CUDA_DIR.glob("*.cu"))
ARCHS = ["sm_80", "sm_90"]


def _compile(nvcc, source, arch, out_dir) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess | None]:
    """nvcc -ptx with the options NVRTC gets from commbench and CuPy (nvcc spells them alike), then,
    if that worked, ptxas -v on the PTX: (the PTX step, the ptxas step or None)."""
    ptx_file = out_dir / f"{source.stem}-{arch}.ptx"
    to_ptx = subprocess.run([nvcc, f"-arch={arch}", *NVRTC_OPTIONS, *CUPY_NVRTC_OPTIONS, "-ptx", str(source),
                             "-o", str(ptx_file)], capture_output=True, text=True, timeout=900)
    if to_ptx.returncode != OK:
        return to_ptx, None
    return to_ptx, subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", str(ptx_file),
                                   "-o", str(out_dir / f"{source.stem}-{arch}.cubin")],
                                  capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def builds(tmp_path_factory, nvcc):
    """builds(source, arch): (its PTX file, the PTX step, the ptxas step). Every source and arch is
    compiled at the first call, as many at once as there are cores (collectives.cu takes minutes
    an arch, in nvcc's front end and in ptxas alike)."""
    out_dir = tmp_path_factory.mktemp("cuda")
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    futures = {(source, arch): pool.submit(_compile, nvcc, source, arch, out_dir)
               for source in sorted(SOURCES, key=lambda p: -p.stat().st_size) for arch in ARCHS}  # largest first

    def build(source, arch):
        return (out_dir / f"{source.stem}-{arch}.ptx", *futures[source, arch].result())

    yield build
    pool.shutdown(cancel_futures=True)


@pytest.fixture(scope="module")
def ptx(builds):
    """ptx(source, arch): the source's PTX, compiled without a warning."""
    def compiled(source, arch):
        out, to_ptx, _ = builds(source, arch)
        assert to_ptx.returncode == OK, to_ptx.stderr
        assert "warning" not in to_ptx.stderr.lower(), to_ptx.stderr
        return out

    return compiled


def test_there_are_kernels():
    assert SOURCES, f"no .cu files in {CUDA_DIR}"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_compiles(ptx, source, arch):
    entries = set(re.findall(r"\.entry\s+(\w+)", ptx(source, arch).read_text()))
    wanted = set(entry_points().get(source.name, []))
    assert wanted <= entries, sorted(wanted - entries)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_no_instruction_flushes_subnormals(ptx, source, arch):
    """CuPy's -ftz=true is in force, yet no instruction carries .ftz (add.ftz, setp.lt.ftz, ...):
    subnormal inputs and results are kept, as on the CPU."""
    flushing = sorted(set(re.findall(r"[\w.]*\.ftz[\w.]*", ptx(source, arch).read_text())))
    assert not flushing, flushing


@pytest.fixture(scope="module")
def ptxas(ptx, builds):
    """ptxas(source, arch): ptxas -v's report per entry function, {name: (registers, spill bytes)}."""
    reports = {}

    def report(source, arch):
        if (source, arch) not in reports:
            ptx(source, arch)  # the PTX step's own checks first
            proc = builds(source, arch)[2]
            assert proc.returncode == OK, proc.stderr
            found = {}
            for name, body in re.findall(r"Compiling entry function '(\w+)'(.*?)(?=Compiling entry function|\Z)",
                                         proc.stderr, re.S):
                regs = re.search(r"Used (\d+) registers", body)
                spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", body)
                assert regs and spills, body  # ptxas -v reports every kernel
                found[name] = (int(regs.group(1)), int(spills.group(1)) + int(spills.group(2)))
            assert found, proc.stderr
            reports[source, arch] = found
        return reports[source, arch]

    return report


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_no_register_spills(ptxas, source, arch):
    spilling = {name: spill for name, (_, spill) in ptxas(source, arch).items() if spill}
    assert not spilling, spilling


REGISTERS_PER_SM = 65536  # sm_80 and sm_90 alike


@pytest.mark.parametrize("arch", ARCHS)
def test_registers_allow_the_launch(ptxas, arch):
    """Every ring / tree kernel fits one block of its launch size (kernel_abi.GPU_THREADS) on an SM:
    registers x threads within the SM's register file, so a launch of channels x ranks blocks
    needs exactly that many SMs' worth of residency (kernel_gpu.residency checks it up front)."""
    kernels_of = ptxas(kernel_abi.SOURCE, arch)
    assert set(kernel_abi.entry_points()[kernel_abi.SOURCE.name]) <= set(kernels_of)
    too_many = {name: regs for name, (regs, _) in kernels_of.items() if regs * kernel_abi.GPU_THREADS > REGISTERS_PER_SM}
    assert not too_many, f"{len(too_many)} kernels cannot launch {kernel_abi.GPU_THREADS} threads a block: {too_many}"


def test_every_kernel_declares_its_launch_bounds():
    """__launch_bounds__(CB_THREADS, 1) on every entry point: ptxas keeps registers within what a
    launch of GPU_THREADS threads allows (and spills nothing to get there: the test above)."""
    source = cuda_source(kernel_abi.SOURCE.name)  # with its headers
    entries = re.findall(r'extern "C" __global__ void (CB_LAUNCH_BOUNDS\(CB_THREADS\) )?(\w+)', source)
    assert entries and all(bounds for bounds, _ in entries), [name for bounds, name in entries if not bounds]
    assert re.search(rf"#define CB_THREADS {kernel_abi.GPU_THREADS}\b", source)


def test_every_launched_kernel_has_a_source():
    assert set(entry_points()) <= {s.name for s in SOURCES}
