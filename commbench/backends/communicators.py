"""Backends behind one Communicator interface, opened as their descriptors say (commbench.backends:
open_mpi, open_torch); each library is imported only when asked for, so a machine without torch
can run MPI sweeps and the other way round."""

from __future__ import annotations

from commbench.backends.base import Buffer, Communicator, Request


def missing(name: str, device: str) -> str | None:
    """What this Python lacks to run backend `name` on `device`, or None (Backend.missing; a GPU
    it cannot tell: the ranks may run on other hosts)."""
    from commbench.backends import BACKENDS

    return BACKENDS[name].missing(device)


def torch_cannot_run(name: str, device: str) -> str | None:
    """The torch backends' probe: a CUDA (or ROCm) build for --device cuda, NCCL for nccl."""
    if device == "cuda" or name == "nccl":
        import torch
        import torch.distributed as dist

        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            return f"--device cuda needs a CUDA build of torch; this one ({torch.__version__}) is built without CUDA"
        if name == "nccl" and not dist.is_nccl_available():
            return f"backend 'nccl' needs a torch built with NCCL; this one ({torch.__version__}) is built without it"
    return None


def open_mpi(name: str, rank: int, world: int, local_rank: int, timeout_s: float, device: str = "cpu",
             threads: bool = False) -> Communicator:
    """threads: the library will be called from several threads at once. MPI is then initialised
    with MPI_THREAD_MULTIPLE (mpi4py's default), else MPI_THREAD_FUNNELED, what OSU and
    nccl-tests run at: Open MPI's locks of the multiple level cost ~0.1 µs per small call."""
    import mpi4py

    mpi4py.rc.thread_level = "multiple" if threads else "funneled"  # before MPI is initialised (by the import below)
    from commbench.backends.mpi import MPICommunicator

    return MPICommunicator()


def open_torch(name: str, rank: int, world: int, local_rank: int, timeout_s: float, device: str = "cpu",
               threads: bool = False) -> Communicator:
    from commbench.backends.torch_dist import TorchCommunicator

    return TorchCommunicator(name, rank, world, local_rank, timeout_s, device=device)


def open_backend(name: str, rank: int, world: int, local_rank: int, timeout_s: float,
                 device: str = "cpu", threads: bool = False) -> Communicator:
    """This rank's communicator of backend `name` (Backend.open)."""
    from commbench.backends import BACKENDS

    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}")
    return BACKENDS[name].open(rank, world, local_rank, timeout_s, device, threads)


__all__ = ["Buffer", "Communicator", "Request", "missing", "open_backend"]
