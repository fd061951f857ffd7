"""Every kernel in cuda/ compiles with nvcc for sm_80 and sm_90, and holds every entry point the
Python side launches (what a machine without a GPU can check)."""

import re
import shutil
import subprocess

import pytest

from commbench.kernels import CUDA_DIR, entry_points

NVCC = shutil.which("nvcc")
SOURCES = sorted(CUDA_DIR.glob("*.cu"))
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")


def test_there_are_kernels():
    assert SOURCES, f"no .cu files in {CUDA_DIR}"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_compiles(tmp_path, source, arch):
    ptx = tmp_path / "out.ptx"
    proc = subprocess.run([NVCC, f"-arch={arch}", "-std=c++17", "-ptx", str(source), "-o", str(ptx)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    entries = set(re.findall(r"\.entry\s+(\w+)", ptx.read_text()))
    wanted = set(entry_points().get(source.name, []))
    assert wanted <= entries, sorted(wanted - entries)


def test_every_launched_kernel_has_a_source():
    assert set(entry_points()) <= {s.name for s in SOURCES}
