"""The backends commbench runs collectives on: one descriptor each, in one registry (BACKENDS).

A descriptor holds what the parent, the launchers and the ranks need to know of a backend: the
devices it drives, the package its ranks import (and the extra that installs it), how its ranks
form a world (an MPI launcher's, or torch.distributed's rendezvous, which the worker makes from
the launcher's environment or over MPI), whether it runs across `--emulate`'s namespaces, and the
communicator a rank opens (`commbench.backends.communicators`: the library's calls and conventions). The
parent reads it without importing any backend's package; a rank imports the communicator only for
the backends it runs. Adding a backend is its descriptor here and its communicator class.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

MPI_WORLD, TORCH_WORLD = "mpi", "torch"  # how a backend's ranks find each other

# a local launch's torch rendezvous: the path of a FileStore the parent makes (commbench.run.job_folders.local_store),
# so no TCP store of a one-machine run listens on every interface
LOCAL_STORE_ENV = "COMMBENCH_STORE_FILE"


@dataclass(frozen=True)
class Backend:
    name: str
    devices: tuple[str, ...]  # the devices it drives; another is refused up front
    package: str  # what its ranks import (found with importlib before anything starts)
    extra: str  # pip install 'commbench[EXTRA]' installs the package
    world: str  # MPI_WORLD: started by an MPI launcher (mpirun, mpiexec, srun --mpi); TORCH_WORLD: a rendezvous
    communicator: str  # "module:function" opening a rank's Communicator (rank, world, local_rank, timeout_s, device, threads)
    emulated: bool = False  # runs across --emulate's network namespaces (emulated_launcher)
    cuda_peer_only: bool = False  # with --device cuda, only algorithms that send no messages through it (peer_*)
    probe: str = ""  # "module:function" (name, device) -> why this installation cannot run it, or None

    def missing(self, device: str) -> str | None:
        """What this Python lacks to run the backend on `device`, or None. The launchers start the
        ranks with this same Python, so what it lacks, every rank lacks."""
        if importlib.util.find_spec(self.package) is None:
            return (f"backend {self.name!r} needs {self.package}, which is not installed "
                    f"(pip install 'commbench[{self.extra}]')")
        return _resolve(self.probe)(self.name, device) if self.probe else None

    def open(self, rank: int, world: int, local_rank: int, timeout_s: float, device: str = "cpu",
             threads: bool = False):
        """This rank's Communicator (commbench.backends.communicators)."""
        return _resolve(self.communicator)(self.name, rank, world, local_rank, timeout_s, device, threads)


def _resolve(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("mpi", ("cpu",), "mpi4py", "mpi", MPI_WORLD, "commbench.backends.communicators:open_mpi", emulated=True),
    Backend("gloo", ("cpu", "cuda"), "torch", "torch", TORCH_WORLD, "commbench.backends.communicators:open_torch",
            emulated=True, cuda_peer_only=True, probe="commbench.backends.communicators:torch_cannot_run"),
    Backend("nccl", ("cuda",), "torch", "torch", TORCH_WORLD, "commbench.backends.communicators:open_torch",
            probe="commbench.backends.communicators:torch_cannot_run"),
)}


def needs_mpi_launcher(names) -> bool:
    """Whether any of these backends forms its world through an MPI launcher."""
    return any(BACKENDS[n].world == MPI_WORLD for n in names)


def emulated_launcher(names) -> str:
    """What starts these backends' ranks across --emulate's namespaces (commbench.run.emulate): one
    mpirun for an MPI world, else one torchrun agent per node."""
    return "mpirun" if needs_mpi_launcher(names) else "torchrun"
