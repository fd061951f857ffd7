"""run.json's record: every field a run folder's run.json holds, its JSON type and what it says.

The one definition of run.json's fields and their types (a resume checks the values it uses further:
commbench.run.api): the writer (commbench.folder.write.RunFolder) checks every
change against it (`change`: a name that is no field, or a value of another type, is commbench's own
bug, never written); the reader (commbench.folder.load.read_meta) checks a folder's run.json against
the fields marked `read` (those readers rely on; a folder of another type there is refused as the
user's data); docs/reference/results.md's run.json table is generated from FIELDS. `status` is
a RunStatus. null is "not recorded" for every field. The format's version is
commbench.folder.schema.FORMAT_VERSION, written by `create`.

Facts that ranks send (rank 0's `facts` event: commbench.rank.worker; `ab`'s side A) may come from another
commbench (`ab --python-a`): of those, the fields known here are checked and the others kept as sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from commbench.folder.schema import RunStatus

_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object",
          list: "a list"}


@dataclass(frozen=True)
class Field:
    name: str
    kinds: tuple[type, ...]  # the JSON types it holds (null: not recorded)
    doc: str
    read: bool = False  # the readers rely on its type: read_meta refuses a folder where it has another

    def fits(self, value) -> bool:
        if value is None:
            return True
        if isinstance(value, bool) and bool not in self.kinds:  # JSON's true is no number
            return False
        return isinstance(value, self.kinds) or (float in self.kinds and isinstance(value, int))

    @property
    def what(self) -> str:
        return " or ".join(_NAMES[k] for k in self.kinds)


def _f(name, kinds, doc, read=False) -> Field:
    return Field(name, kinds if isinstance(kinds, tuple) else (kinds,), doc, read)


FIELDS: dict[str, Field] = {f.name: f for f in (
    # what the run is
    _f("format_version", int, "the results format's version (commbench.folder.schema.FORMAT_VERSION); absent: 1"),
    _f("run_id", str, "the run's id (every row's `run_id`)", read=True),
    _f("label", str, "--label: free text", read=True),
    _f("kind", str, "`ab` for a `commbench ab` comparison; absent for a run, an import or a prediction"),
    _f("spec", dict, "the sweep's spec as commbench.spec.SweepSpec records it: everything needed to run it again",
       read=True),
    _f("repeat", int, "--repeat: the jobs the sweep was measured in"),
    _f("status", str, "how far it got: " + ", ".join(s.value for s in RunStatus), read=True),
    _f("error", str, "why it failed or stopped, in one line (null: it did not)"),
    _f("start_time", (str, int), "UTC, ISO 8601 (an import: as its report gives it)"),
    _f("end_time", (str, int), "UTC, ISO 8601 (an import: as its report gives it)"),
    # who started it, how
    _f("command_line", list, "the command as typed (an nccl-tests import: the tool's own, from its report)",
       read=True),
    _f("cwd", str, "the folder it was typed in"),
    _f("git_revision", str, "commbench's git revision where it runs from a checkout"),
    _f("launch_host", str, "the host of the process that wrote the folder"),
    _f("launch_pid", int, "its process id (a resume refuses a run still alive)"),
    _f("environment", dict, "the variables that change collectives (NCCL_*, OMPI_MCA_*, COMMBENCH_KERNEL_*, ...) where "
       "it was typed", read=True),
    _f("slurm", dict, "the Slurm job it ran in (id, nodes, partition); null outside Slurm"),
    _f("launcher", str, "what started the ranks: local, mpirun, torchrun, srun or none"),
    _f("launcher_args", list, "--launcher-args, one argument per entry", read=True),
    _f("launch_argv", list, "the launcher's command line as started"),
    _f("emulation", dict, "--emulate: the emulated cluster (nodes, links, rates)"),
    _f("jobs", list, "--repeat: per launch, the job, its points, hosts and how it ended", read=True),
    _f("resumes", list, "per --resume: when, from where and which points were left"),
    # what the ranks found (rank 0's facts)
    _f("ranks", list, "per rank: host, pid, GPU", read=True),
    _f("world_size", int, "ranks"),
    _f("nodes", int, "nodes"),
    _f("ranks_per_node", int, "ranks per node (null when uneven)"),
    _f("node_of_rank", list, "each rank's node index"),
    _f("versions", dict, "Python, commbench, numpy, torch, NCCL, mpi4py, the MPI library, CUDA, driver", read=True),
    _f("rank0_environment", dict, "the collective variables rank 0 saw", read=True),
    _f("topology_source", str, "where the node layout came from (launcher variables, host names, --emulate)"),
    _f("world", dict, "the world as every rank reported it, checked to agree"),
    _f("planned_points", int, "points in the sweep's plan"),
    _f("machines", list, "per host: CPU, cores, caches, memory, GPUs"),
    _f("harness_floor_us", dict, "what each timing loop costs per call around an empty call (µs)"),
    _f("power", dict, "--power: whether it was measured, why not, the window and the peak's source"),
    _f("load", dict, "ranks and cores per machine at the start, `oversubscribed`"),
    _f("floors", dict, "per host: `commbench floor`'s figures, or why they could not be measured"),
    # how it ended
    _f("warnings", list, "what the ranks warned of, in order"),
    _f("skipped", list, "every point not measured, with its reason"),
    _f("samples_file", str, "samples.parquet, or samples.csv where pyarrow is missing"),
    _f("points_measured", int, "rows in results.csv"),
    _f("wrong_total", int, "wrong output elements, summed over the rows"),
    _f("unreliable_points", int, "rows flagged unreliable"),
    _f("check", dict, "`commbench check`: how its repetitions ended"),
    # commbench ab
    _f("ab", dict, "the comparison: grain, sides, points compared, threshold, budget, memory"),
    _f("sides_facts", dict, "each side's facts (the fields above, per side A and B)"),
    _f("rounds", int, "rounds measured"),
    _f("seconds", float, "seconds the rounds took"),
    # imports (commbench import) and predictions (commbench model predict)
    _f("imported_from", str, "the tool whose output was imported (nccl-tests, osu)"),
    _f("source_file", str, "the imported file"),
    _f("skipped_lines", int, "--lenient: the file's result lines left out (they did not read)"),
    _f("hosts", list, "an import's hosts", read=True),
    _f("gpus", list, "an import's GPUs", read=True),
    _f("rank_hosts", list, "an import's host of each rank (or process)"),
    _f("rank_unit", str, "what an import's ranks are: rank, or process (several GPUs each)"),
    _f("nccl_version", (str, int), "the NCCL version nccl-tests reported"),
    _f("nccl_tests_version", str, "the nccl-tests version it reported"),
    _f("nccl_tests_config", str, "nccl-tests' configuration line"),
    _f("osu_datatype", str, "the OSU benchmark's data type"),
    _f("predicted", bool, "true for `commbench model predict`'s rows"),
    _f("model", dict, "the model a prediction came from, and what it was asked"),
)}


def _check(name: str, value) -> None:
    field = FIELDS.get(name)
    if field is None:
        raise TypeError(f"run.json has no field {name!r} (commbench.folder.record.FIELDS)")
    if not field.fits(value):
        raise TypeError(f"run.json field {name!r} must be {field.what}, not {json.dumps(value, default=str)[:40]}")


def change(patch: dict, sent: bool = False) -> dict:
    """A change to run.json, checked: every name a field, every value of its type, `status` a RunStatus
    (a TypeError or ValueError otherwise: the writer's bug, never written). sent: rank 0's facts,
    whose fields unknown here are kept as sent (the ranks of another commbench: `ab`'s sides)."""
    for name, value in patch.items():
        if not (sent and name not in FIELDS):
            _check(name, value)
    if patch.get("status") is not None:
        return {**patch, "status": RunStatus(patch["status"])}
    return dict(patch)


def read_fields() -> dict[str, Field]:
    """The fields read_meta checks."""
    return {name: f for name, f in FIELDS.items() if f.read}
