"""Every kernel in cuda/ compiles with nvcc for sm_80 and sm_90 as NVRTC compiles it at run time,
holds every entry point the Python side launches, flushes no subnormal to zero and spills no
register (what a machine without a GPU can check)."""

import re
import subprocess

import pytest

from commbench.rank import kernels
from commbench.rank.reducers import CUDA_DIR, CUPY_NVRTC_OPTIONS, NVRTC_OPTIONS, entry_points as reducer_entry_points
from commbench.errors import OK



def entry_points() -> dict[str, list[str]]:
    """Every kernel the Python side launches, by the file in cuda/ that must define it."""
    return {**reducer_entry_points(), **kernels.entry_points()}


SOURCES = sorted(CUDA_DIR.glob("*.cu"))
ARCHS = ["sm_80", "sm_90"]


@pytest.fixture(scope="module")
def ptx(tmp_path_factory, nvcc):
    """ptx(source, arch): the source's PTX, compiled once with the options NVRTC gets from
    commbench and CuPy (nvcc spells them alike), without a warning."""
    out_dir = tmp_path_factory.mktemp("ptx")

    def compiled(source, arch):
        out = out_dir / f"{source.stem}-{arch}.ptx"
        if not out.exists():
            proc = subprocess.run([nvcc, f"-arch={arch}", *NVRTC_OPTIONS, *CUPY_NVRTC_OPTIONS, "-ptx", str(source),
                                   "-o", str(out)], capture_output=True, text=True, timeout=300)
            assert proc.returncode == OK, proc.stderr
            assert "warning" not in proc.stderr.lower(), proc.stderr
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


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_no_register_spills(ptx, source, arch, tmp_path, nvcc):
    proc = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", str(ptx(source, arch)),
                           "-o", str(tmp_path / "out.cubin")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == OK, proc.stderr
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", proc.stderr)
    assert spills, proc.stderr  # ptxas -v reports every kernel
    assert all(s == ("0", "0") for s in spills), proc.stderr


def test_every_launched_kernel_has_a_source():
    assert set(entry_points()) <= {s.name for s in SOURCES}
