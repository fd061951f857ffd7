"""Backends behind one Communicator interface; each is imported only when asked for, so a
machine without torch can run MPI sweeps and the other way round."""

from __future__ import annotations

from commbench.backends.base import Buffer, Communicator, Request


def open_backend(name: str, rank: int, world: int, local_rank: int, timeout_s: float,
                 device: str = "cpu") -> Communicator:
    if name == "mpi":
        from commbench.backends.mpi import MPICommunicator

        return MPICommunicator()
    if name in ("gloo", "nccl"):
        from commbench.backends.torch_dist import TorchCommunicator

        return TorchCommunicator(name, rank, world, local_rank, timeout_s, device=device)
    raise ValueError(f"unknown backend {name!r}")


__all__ = ["Buffer", "Communicator", "Request", "open_backend"]
