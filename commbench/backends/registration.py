"""NCCL buffer registration, as nccl-tests' -R: none (0), local (1: the buffers registered with the
communicator, ncclCommRegister: torch's ProcessGroupNCCL.register_mem_pool over a torch.cuda.MemPool
the buffers are allocated in) or window (2: a symmetric window, ncclCommWindowRegister: torch's
symmetric memory on its NCCL backend, every rank's buffer allocated and rendezvoused together). It
is a run's setting, recorded per point (the rows' `registration`); only the NCCL library's own calls
take it (commbench.backends.torch_dist does the registering)."""

from __future__ import annotations

from commbench.errors import InputError

NONE = "none"
REGISTRATIONS = (NONE, "local", "window")
ALIASES = {"0": NONE, "1": "local", "2": "window"}  # nccl-tests' -R values


def resolve(name: str) -> str:
    """--registration's value as commbench names it (nccl-tests' 0, 1, 2 taken too); InputError otherwise."""
    text = str(name).strip().lower()
    value = ALIASES.get(text, text)
    if value not in REGISTRATIONS:
        raise InputError(f"unknown --registration {str(name)[:40]!r} (accepted: {', '.join(REGISTRATIONS)}, or "
                         "nccl-tests' -R values 0, 1, 2)")
    return value


def check(registration: str, backends: list[str], algorithms: list[str], library_calls) -> None:
    """InputError where a run asks for registration that nothing of it would do."""
    if registration == NONE:
        return
    others = [b for b in backends if b != "nccl"]
    if others:
        raise InputError(f"--registration {registration} registers NCCL's buffers: it needs --backend nccl "
                         f"(on --device cuda), not {', '.join(others)}")
    own = [a for a in algorithms if a not in library_calls]
    if own:
        raise InputError(f"--registration {registration} is for NCCL's own calls (-a native): not {', '.join(own)}")
