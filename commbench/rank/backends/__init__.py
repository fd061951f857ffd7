"""Backends behind one Communicator interface; each is imported only when asked for, so a
machine without torch can run MPI sweeps and the other way round."""

from __future__ import annotations

import importlib.util

from commbench.rank.backends.base import Buffer, Communicator, Request


def missing(name: str, device: str) -> str | None:
    """What this Python lacks to run backend `name` on `device`, or None. The launchers start
    the ranks with this same Python, so what it lacks, every rank lacks (a GPU it cannot tell:
    the ranks may run on other hosts)."""
    package, extra = ("mpi4py", "mpi") if name == "mpi" else ("torch", "torch")
    if importlib.util.find_spec(package) is None:
        return f"backend {name!r} needs {package}, which is not installed (pip install 'commbench[{extra}]')"
    if package == "torch" and (device == "cuda" or name == "nccl"):
        import torch
        import torch.distributed as dist

        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            return f"--device cuda needs a CUDA build of torch; this one ({torch.__version__}) is built without CUDA"
        if name == "nccl" and not dist.is_nccl_available():
            return f"backend 'nccl' needs a torch built with NCCL; this one ({torch.__version__}) is built without it"
    return None


def open_backend(name: str, rank: int, world: int, local_rank: int, timeout_s: float,
                 device: str = "cpu", threads: bool = False) -> Communicator:
    """threads: the library will be called from several threads at once. MPI is then initialised
    with MPI_THREAD_MULTIPLE (mpi4py's default), else MPI_THREAD_FUNNELED, what OSU and
    nccl-tests run at: Open MPI's locks of the multiple level cost ~0.1 µs per small call."""
    if name == "mpi":
        import mpi4py

        mpi4py.rc.thread_level = "multiple" if threads else "funneled"  # before MPI is initialised
        from commbench.rank.backends.mpi import MPICommunicator

        return MPICommunicator()
    if name in ("gloo", "nccl"):
        from commbench.rank.backends.torch_dist import TorchCommunicator

        return TorchCommunicator(name, rank, world, local_rank, timeout_s, device=device)
    raise ValueError(f"unknown backend {name!r}")


__all__ = ["Buffer", "Communicator", "Request", "missing", "open_backend"]
