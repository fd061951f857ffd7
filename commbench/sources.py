"""Where the files the product reads at run time live, found through the package
(importlib.resources), so that a wheel or an sdist install runs everything a clone does: the kernel
sources (the project's top-level cuda/, which the package holds as commbench/cuda, a link in a clone
and a folder in a wheel) and the bundled suites and workloads (top-level suites/, likewise). The C
loops, the floor probe and the report's script are the package's own files (commbench/kernels,
commbench/analysis/report)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def package_dir(name: str) -> Path:
    """A folder the package ships (pyproject.toml's package-data lists them), as a file-system path:
    the compilers and the YAML reader open files by name."""
    return Path(str(files("commbench").joinpath(name)))


CUDA_DIR = package_dir("cuda")  # kernel sources: collectives.cu, reduce.cu, peer_flags.cu and their headers
SUITES_DIR = package_dir("suites")  # bundled suites (*.yaml)
WORKLOADS_DIR = SUITES_DIR / "workloads"  # bundled workloads (*.yaml)
