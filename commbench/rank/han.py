"""native_han's communicator: a duplicate of the MPI world on which Open MPI runs coll/han, its
hierarchical collectives (each call in two levels: inside every node, and between the nodes'
leaders), made by mpi_loop.han_dup.

Open MPI 5.0 already gives coll/han to communicators that span nodes (priority 35 over coll/tuned's
30) unless OMPI_MCA_coll_han_priority says otherwise, so

    OMPI_MCA_coll_han_priority=0 commbench run --backend mpi -a native,native_han ...

puts the library's flat call (native: coll/tuned) and its hierarchical one side by side in one run
(run.json records every OMPI_* variable). On a communicator within one node coll/han steps aside and
coll/tuned runs, and likewise where nodes hold unequal numbers of ranks, so native_han needs ranks on
two nodes or more, as many on each. Setting coll_han_priority at run time needs Open MPI 5.0.7 or later
(before, the point is skipped with the reason)."""

from __future__ import annotations

from commbench.backends.communicators import Communicator  # (mpi4py only where native_han is asked for)


def open_han(comm: Communicator) -> Communicator | str:
    """native_han's communicator over `comm`'s ranks (the MPI world), or why there is none, the same on
    every rank. Collective over `comm`. The nodes are MPI's own (its shared-memory split, as coll/han
    sees them), not --ranks-per-node's."""
    from mpi4py import MPI

    from commbench.kernels import mpi_loop
    from commbench.backends.mpi import MPICommunicator

    local = comm.comm.Split_type(MPI.COMM_TYPE_SHARED)
    per_node = comm.allgather_object(local.Get_size())
    local.Free()
    if per_node[0] == len(per_node):
        return ("native_han is Open MPI's coll/han, which works across nodes: these ranks are on one node, "
                "where it leaves the calls to coll/tuned (native)")
    if len(set(per_node)) > 1:
        return ("native_han is Open MPI's coll/han, which leaves nodes of unequal rank counts to coll/tuned "
                f"(native): these nodes hold {min(per_node)} to {max(per_node)} ranks")
    def agreed(why: str | None) -> str | None:  # one reason for all ranks: the first rank's that has one
        return next((w for w in comm.allgather_object(why) if w), None)

    why = None
    try:
        mpi_loop.library()
    except mpi_loop.LoopUnavailable as exc:
        why = f"native_han's communicator is made by the C timing loop's library: {exc}"
    why = agreed(why)
    if why:  # (before the duplicate, on every rank)
        return why
    try:
        dup = MPICommunicator(mpi_loop.han_dup(comm.comm))
    except mpi_loop.LoopUnavailable as exc:  # no rank made the duplicate (mpi_loop.c agrees first)
        dup, why = None, f"native_han: {exc}"
    return agreed(why) or dup


CHOICE = "coll/han"  # native_han's rows' library_choice: what every call on its communicator runs

# The collectives coll/han has in Open MPI 5.0 (`ompi_info --param coll han --level 9`, its *_dynamic
# functions; later versions add more); any other call on its communicator would run coll/tuned's, as native.
HAN_COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce", "gather", "scatter")


def han_target(han: Communicator | str | None, backend: str, collective: str) -> Communicator | str:
    """The communicator a native_han point runs on, or why it cannot run."""
    if backend != "mpi":
        return f"native_han is Open MPI's coll/han: the mpi backend only, not {backend}"
    if collective not in HAN_COLLECTIVES:
        return f"Open MPI's coll/han has no {collective} (it would run coll/tuned's, as native)"
    return han if han is not None else "native_han's communicator was not opened"


def close_han(han: Communicator | str | None) -> None:
    if han is not None and not isinstance(han, str):
        han.comm.Free()


def library_choice(point, schedule: str | None) -> str | None:
    """A row's library_choice (run's and ab's): what ran, where the call says (the kernels' schedule,
    hierarchical_kernel's pipelined or in order) or the algorithm fixes it (native_han: coll/han);
    NCCL's own choice is read from its log (commbench.rank.worker)."""
    from commbench.library_calls import HAN

    return schedule or (CHOICE if point.algorithm == HAN else None)
