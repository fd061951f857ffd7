"""`check_fabric(spec)`: launch a `commbench check` job (SweepSpec.check: the ranks run
commbench.rank.fabric) into a run folder, refusing before anything starts a job whose ranks all land on
one node; the verdicts are read back from the folder (commbench.analysis.fabric)."""

from __future__ import annotations

from typing import Callable

from commbench import slurm
from commbench.errors import InputError, JobError
from commbench.run import launch
from commbench.run.api import run_sweep
from commbench.run.session import RunResult
from commbench.spec import SweepSpec

REFUSED = "CheckRefused: "  # rank 0's error of a job on one node (commbench.rank.fabric.CheckRefused)


def check_fabric(spec: SweepSpec, launcher_args: list[str] | None = None,
                 on_event: Callable[[dict], None] | None = None, argv: list[str] | None = None) -> RunResult:
    """Run the check; InputError where the ranks cannot span two nodes (known here, or found by the ranks)."""
    if not spec.check:
        raise ValueError("check_fabric runs a check spec (SweepSpec.check)")
    launcher = launch.resolve_launcher(spec)
    alloc = slurm.allocation()
    if launcher in ("local", "torchrun") or launcher == "mpirun" and alloc is None and launch.ranks_here(
            launcher, launcher_args or []):
        raise InputError(f"check measures the links between nodes, and launcher {launcher} starts every rank on this "
                         "machine: give mpirun hosts (--launcher-args '--hostfile FILE'), run inside a Slurm "
                         "allocation of 2 or more nodes, or --emulate NODESxRANKS")
    if alloc is not None and launcher != "emulated" and len(alloc.nodes) < 2:
        raise InputError(f"check measures the links between nodes: Slurm job {alloc.job_id} has one node")
    try:
        return run_sweep(spec, launcher_args, on_event, argv=argv)
    except JobError as exc:
        text = str(exc)
        if REFUSED in text:
            raise InputError(text[text.index(REFUSED) + len(REFUSED):].splitlines()[0]) from None
        raise
