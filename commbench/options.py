"""The one table of a run's options. From it come `commbench run`'s flags (commbench.cli.run),
the defaults of `SweepSpec.from_options` and the fields of a suite file (commbench.run.suites).

An option's name is its suite field and python name; its CLI flag is --name-with-dashes unless
the table says otherwise. `spec` names the `SweepSpec.from_options` keyword it sets (None: the
run or the CLI uses it, the spec does not). The accepted values that the help texts list come
from their owners: the collective and algorithm registries, commbench.dtypes and the constants
below (which SweepSpec.validate checks against).
"""

from __future__ import annotations

import importlib.util
import shlex
from dataclasses import dataclass

from commbench.backends import BACKENDS as BACKEND_REGISTRY
from commbench.binaries import find_binary
from commbench.dtypes import DTYPE_ALIASES, DTYPES, OPS
from commbench.errors import InputError
from commbench.algorithms import ALGORITHMS as OWN_ALGORITHMS
from commbench.algorithms.base import SEGMENT_BYTES
from commbench.library_calls import LIBRARY_CALLS
from commbench.collectives import COLLECTIVES, default_collectives
from commbench.machine.topology import run_defaults
from commbench.timers import TIMER_CHOICES

BACKENDS = tuple(BACKEND_REGISTRY)  # their names (each one's facts: commbench.backends)
LAUNCHERS = ("auto", "local", "mpirun", "torchrun", "srun", "none")
DEVICES = ("cpu", "cuda")
RING_ORDERS = ("rank", "topology")
PLACEMENTS = ("block", "round-robin")
MODES = {"in-place": (True,), "out-of-place": (False,), "both": (False, True)}  # buffer mode -> in_place values
DEFAULT_NPROCS = 4
MAX_REPEAT = 100  # --repeat / a suite's repeat: jobs per point (commbench.run.jobs)
# limits decided before anything starts (SweepSpec.validate, commbench.run.launch), named in the help below
MAX_NPROCS = 1 << 20  # ranks of one run, on any launcher
LOCAL_RANKS_PER_CORE = 4  # ranks on this machine per core of it; more needs --oversubscribe (commbench.run.launch)
MAX_SIZES = 10_000  # sizes of one run (an explicit list, or -b/-e/-f)
MAX_SIZE_BYTES = 1 << 40  # 1T: the largest size (no device holds a rank's buffers of more)
MAX_POINTS = 100_000  # points of one run: sizes x collectives x backends x algorithms x dtypes x ops x buffer modes
MAX_ITERS = 1_000_000  # --warmup, --iters, --max-iters and --batch: calls per point
MAX_PREDICT_RANKS = 16_384  # `model predict`: nodes x ranks per node (commbench.analysis.model.predict)
MAX_PREDICT_RANK_SIZES = 16 * MAX_PREDICT_RANKS  # `model predict`: ranks x sizes, the work of one prediction
MAX_DELAY_FRACTION = 10.0  # --inject-delay: the most a rank's injected wait is, in calls' times
MAX_LABEL_CHARS = 256  # --label, stored in every row
COMPARE_FORMATS = ("text", "markdown", "json", "junit")  # `compare --format` (commbench.analysis.compare writes them)
MIN_JOBS = 3  # jobs a side before `compare` gives a verdict other than inconclusive (commbench.analysis.verdicts)
_SAME = "="  # spec keyword: the option's own name


def default_backend() -> str:
    """What backend `auto` means: mpi when mpi4py and mpirun are installed, else gloo."""
    return "gloo" if _mpi_missing() else "mpi"


def _mpi_missing() -> str | None:
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py"
    return None if find_binary("mpirun") else "mpirun"


def auto_backend_note(backend: str) -> str | None:
    """The line a run prints when --backend auto (the default) falls back to gloo, else None."""
    missing = _mpi_missing()
    if missing is None or "auto" not in [b.strip().lower() for b in str(backend).split(",")]:
        return None
    return (f"--backend auto is gloo here: {missing} is not installed (pip install 'commbench[mpi]' for MPI, or "
            "--backend gloo to choose it)")


@dataclass(frozen=True)
class Option:
    name: str  # python name and suite field
    type: type  # str, int, float or bool
    default: object  # None: optional (the help says what not giving it means)
    help: str
    short: str | None = None  # the CLI's short flag
    flag: str | None = None  # the CLI's long flag, when it is not --name-with-dashes
    spec: str | None = _SAME  # the SweepSpec.from_options keyword it sets; None: not the spec's
    cli: bool = True  # a flag of `commbench run`
    suite: bool = True  # a field of a suite's run
    is_list: bool = False  # comma text (a suite may give a YAML list)
    sets_mode: str | None = None  # a CLI switch choosing this buffer mode
    off_flag: str | None = None  # a bool that defaults to on: the CLI switch turning it off

    def __post_init__(self):
        if self.spec == _SAME:
            object.__setattr__(self, "spec", self.name)

    @property
    def long_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def flags(self) -> tuple[str, ...]:
        """The CLI's flags, short first (as its help lists them)."""
        return (self.short, self.long_flag) if self.short else (self.long_flag,)

    @property
    def declarations(self) -> tuple[str, ...]:
        """The flags as typer declares them (a switch pair as --on/--off)."""
        return self.flags if not self.off_flag else (*self.flags[:-1], f"{self.long_flag}/{self.off_flag}")


def _names(values, last="or") -> str:
    values = list(values)
    return f"{', '.join(values[:-1])} {last} {values[-1]}" if len(values) > 1 else "".join(values)


OPTIONS: tuple[Option, ...] = (
    Option("collective", str, ",".join(default_collectives()), f"Comma list: {', '.join(COLLECTIVES)} (default: "
           f"{', '.join(default_collectives())}; nccl-tests', NCCL's and OSU's names too: allreduce, all-reduce, AllReduce, "
           "osu_allreduce, alltoall, bcast, ...).", "-c", is_list=True),
    Option("root", int, 0, "The rank the rooted collectives start or end at (broadcast, reduce, gather, scatter), as "
           "nccl-tests' -r: 0 to ranks - 1."),
    Option("spread", float, None, "all_to_allv's traffic, as nccl-tests' NCCL_TESTS_ALLTOALLV_SPREAD (read when not "
           "given): 0 sends every peer the same, 1 (the default) sends the farther ranks more (rank i to i+d: "
           "in proportion to d); each rank sends and receives the size in all."),
    Option("matrix", str, None, "all_to_allv's traffic from a file, as nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_FILE "
           "(read when not given): a square of whitespace-separated numbers, row i column j the bytes rank i sends "
           "rank j (at least the run's ranks; the first rows and columns used; each rounded down to 16 B). It sets "
           "the size: no -b/-e/--sizes."),
    Option("matrix_scale", float, None, "Multiply every --matrix entry by this (default 1; "
           "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE when not given)."),
    Option("backend", str, "auto", f"Comma list: {', '.join(BACKENDS)} (auto: mpi if installed, else gloo).",
           is_list=True),
    Option("min_bytes", str, "8", "Smallest size (K/M/G/T binary suffixes).", "-b"),
    Option("max_bytes", str, "16M", "Largest size (at most 1T; on the CPU the ranks on this machine need twice it "
           "each in memory).", "-e"),
    Option("step_factor", float, 2.0, "Multiply the size by this each step (> 1).", "-f"),
    Option("sizes", str, None, f"Explicit comma list of sizes, e.g. 8,1K,4M (instead of -b/-e/-f; at most {MAX_SIZES} "
           f"sizes, and {MAX_POINTS} points: sizes x collectives x backends x algorithms x dtypes x ops x modes).",
           is_list=True),
    Option("algorithm", str, "native",
           "Comma list: " + ", ".join(f"{name} ({what})" for name, what in LIBRARY_CALLS.items())
           + f", {', '.join(OWN_ALGORITHMS)}.",
           "-a", is_list=True),
    Option("ring_order", str, "rank", "topology: run ring as ring_topology (each node's ranks adjacent)."),
    Option("segment_bytes", str, f"{SEGMENT_BYTES >> 20}M", "Pipelining unit of the own algorithms (messages are at most this long)."),
    Option("channels", int, None, "Channels of ring_kernel / tree_kernel per call (threads on the CPU, blocks on a "
           "GPU; default: one per MB, at most cores / ranks on the CPU; a small call that goes one-shot takes one)."),
    Option("dtype", str, "float32", f"Comma list: {', '.join(DTYPES)} (nccl-tests' names too: "
           f"{', '.join(f'{a}={c}' for a, c in DTYPE_ALIASES.items() if a.isalpha())}).", "-d", is_list=True),
    Option("op", str, "sum", f"Comma list: {', '.join(OPS)} (all-gather ignores it).", "-o", is_list=True),
    Option("mode", str, "both", f"Buffers: {_names(MODES)}.", cli=False),
    Option("in_place", bool, False, "Only in-place buffers.", spec=None, suite=False, sets_mode="in-place"),
    Option("out_of_place", bool, False, "Only out-of-place buffers.", spec=None, suite=False, sets_mode="out-of-place"),
    Option("both", bool, False, "In-place and out-of-place (the default).", spec=None, suite=False, sets_mode="both"),
    Option("nprocs", int, None, "Number of ranks to launch (default: the Slurm allocation's tasks inside "
           f"salloc/sbatch, else {DEFAULT_NPROCS}, or NODES x RANKS of --emulate; at most {MAX_NPROCS}, and "
           f"{LOCAL_RANKS_PER_CORE} per core of this machine without --oversubscribe).", "-n"),
    Option("split", str, None, "Run every point on groups of ranks at once, each group its own communicator: MODE:V as "
           "nccl-tests' NCCL_TESTS_SPLIT (a rank's group is its rank and, or, mod or div V: mod:2 makes every other rank "
           "a group), or tp=G (G consecutive ranks a group) / dp=G (G ranks strided by ranks / G). Every group runs the "
           "same collective at the same moment; a row gives the slowest group's time, each group's time and busbw, and "
           "their total busbw (groups of equal size; the libraries' calls and the message-passing algorithms)."),
    Option("oversubscribe", bool, False, f"Start more than {LOCAL_RANKS_PER_CORE} ranks per core of this machine "
           "(ranks started here: local, torchrun, --emulate, mpirun without hosts in --launcher-args)."),
    Option("launcher", str, "auto",
           f"{', '.join(n for n in LAUNCHERS if n != 'none')}, or none (ranks already started)."),
    Option("launcher_args", str, "", "Extra arguments for the launcher, e.g. '--hostfile hosts'.", spec=None),
    Option("device", str, "cpu", f"{_names(DEVICES)}."),
    Option("warmup", int, 5, f"Warm-up iterations per point (not timed; at most {MAX_ITERS}).", "-w"),
    Option("iters", int, None, f"Timed iterations per point (default: adapt to --min-time; at most {MAX_ITERS})."),
    Option("min_time", float, 0.1, "Seconds of timed iterations per point when --iters is not given."),
    Option("max_iters", int, 1000, f"Upper bound on adaptive iterations (at most {MAX_ITERS})."),
    Option("batch", int, None,
           f"Calls per timing sample (default: automatic, so a sample lasts >= 100 us; 1 = every call; at most "
           f"{MAX_ITERS})."),
    Option("timer", str, "auto", f"Timed loop: {_names(TIMER_CHOICES)} (auto: in C for MPI and the kernels, a CUDA "
                                 "graph for NCCL; python: the Python loop, for comparison)."),
    Option("graph", bool, True, "--device cuda: time NCCL's calls as a replayed CUDA graph where torch can capture them.",
           off_flag="--no-graph"),
    Option("registration", str, "none", "--backend nccl: register the buffers with NCCL, as nccl-tests' -R: none (0), "
           "local (1: ncclCommRegister, through torch's register_mem_pool) or window (2: a symmetric window, through "
           "torch's symmetric memory); recorded per point."),
    Option("timeout", float, None, "Seconds a point may take before the job is killed (default 120 + 1 s per 10 MB); "
           "the start-up, before the first point, may take 300 s or this, the longer (bootstraps are slow)."),
    Option("ranks_per_node", int, None, "Override the node layout: consecutive blocks of G ranks (default inside a "
           "Slurm allocation without -n: its tasks per node)."),
    Option("emulate", str, None, "Emulate NODESxRANKS nodes on this machine (network namespaces; root; mpi or gloo)."),
    Option("link_rate", str, "1gbit", "Each emulated node's link rate (tc units: 1gbit, 800mbit, ...)."),
    Option("node_link_rate", str, None, "Rehearse a slow node: NODE=RATE[,NODE=RATE...] gives those emulated nodes "
           "(0-based) their own link rate, e.g. 3=600mbit (recorded in run.json)."),
    Option("placement", str, "block", "Emulated ranks: block (node by node) or round-robin over the nodes."),
    Option("inject_delay", str, None, "Rehearse a straggler: RANK=FRACTION[,RANK=FRACTION...] makes each such rank "
           f"busy-wait FRACTION (0-{MAX_DELAY_FRACTION:g}) of the call's warm-up time before every timed call (recorded in "
           "run.json; `commbench stragglers` should name it)."),
    Option("power", bool, False, "Power and energy per point: GPUs (NVML) and CPU packages and DRAM (RAPL: "
                                 "powercap or perf); windows of >= 1 s."),
    Option("nccl_tuning", bool, False, "Record NCCL's algorithm/protocol per point from its TUNING log "
                                       "(rank 0 logs every call, which its timings include)."),
    Option("out", str, None, "Results folder (default results/<UTC time>-<id>/).", spec="out_dir", suite=False),
    Option("label", str, "", f"Free text stored with every row (at most {MAX_LABEL_CHARS} characters)."),
    Option("quiet", bool, False, "Print only the summary.", spec=None, suite=False),
    Option("json_rows", bool, False, "Print each row as one JSON object on stdout.", flag="--json", spec=None,
           suite=False),
    Option("allow_skips", bool, False, "Exit 0 when an asked-for algorithm or backend could not run (it failed to "
                                       "build, load or run here): its points are skips, listed, for exploratory "
                                       "sweeps. Without it such a run fails (exit 1).", spec=None, suite=False),
    Option("resume", str, None, "Finish an interrupted or failed run in this folder: measure only its missing points, "
                                "with its recorded options (other measurement options are refused; launcher arguments "
                                "only as given again with --launcher-args).", spec=None, suite=False),
    Option("repeat", int, 1, f"Measure every point in this many separate jobs (1-{MAX_REPEAT}), one after "
                             "another (each measuring every block), into one folder (rows tagged `job`); `compare` needs "
                             f"{MIN_JOBS} or more a side.",
           spec=None),
)
BY_NAME = {o.name: o for o in OPTIONS}
CLI_OPTIONS = tuple(o for o in OPTIONS if o.cli)
SUITE_FIELDS = {o.name: o for o in OPTIONS if o.suite}
MODE_SWITCHES = tuple(o for o in OPTIONS if o.sets_mode)
# the defaults SweepSpec.from_options starts from (keyword -> default)
SPEC_DEFAULTS = {o.spec: o.default for o in OPTIONS if o.spec}
# `commbench sweep SUITE`'s options that replace a field of every run of the suite (`sweep ci -n 4`);
# not the label, which names each run's folder
SWEEP_OPTIONS = tuple(o for o in CLI_OPTIONS if (o.suite or o.sets_mode) and o.name != "label")
_SIZE_RANGE = ("min_bytes", "max_bytes", "step_factor")


# Options that another, given with them, leaves without effect: given together on a command line they are
# refused (a user who typed both expects both to count). --iters fixes the calls per point, which --min-time
# and --max-iters would adapt; --sizes lists the sizes that -b/-e/-f would make a range of; --matrix sets the size.
OVERRIDDEN = {"iters": ("fixes the timed calls per point", ("min_time", "max_iters")),
              "sizes": ("lists the sizes", _SIZE_RANGE),
              "matrix": ("sets every block's bytes, and so the size", ("sizes", *_SIZE_RANGE))}


def check_overridden(chosen) -> None:
    """Refuse options given on a command line (`chosen`, by name) that another one given makes ignored."""
    for name, (what, others) in OVERRIDDEN.items():
        lost = [BY_NAME[n] for n in others if n in chosen]
        if name in chosen and lost:
            raise InputError(f"{BY_NAME[name].long_flag} {what}: {'/'.join(lost[0].flags)} would be ignored; "
                             "give one of them")


def suite_overrides(values: dict, chosen: list[str]) -> dict:
    """The suite fields that `sweep`'s options given on the command line (`chosen`, by name) set in
    every run: a buffer switch sets `mode`; an option that another overrides (OVERRIDDEN) drops the
    suite's value of that other (None): -b/-e/-f without --sizes set a run's sizes by range, and
    --min-time or --max-iters without --iters adapt a run's calls per point."""
    given_values = {name: values[name] for name in chosen}
    fields = {k: v for k, v in given_values.items() if not BY_NAME[k].sets_mode}
    if len(fields) < len(given_values):
        fields["mode"] = cli_fields(given_values)["mode"]
    return fields | dropped(fields)


def dropped(given) -> dict:
    """The values that options given (by name) take away where they replace others' (a suite's run, ab's
    common options for one side): each option OVERRIDDEN names whose overriders are given without it, as None."""
    return {name: None for name, (_, others) in OVERRIDDEN.items() if set(others) & set(given) and name not in given}


def cli_fields(values: dict) -> dict:
    """`commbench run`'s parsed options (python name -> value) as option fields: the buffer-mode
    switches become `mode`."""
    chosen = [o.sets_mode for o in MODE_SWITCHES if values.get(o.name)]
    if len(chosen) > 1:
        raise InputError(f"choose one of {_names((o.long_flag for o in MODE_SWITCHES), 'and')}")
    fields = {k: v for k, v in values.items() if not BY_NAME[k].sets_mode}
    fields["mode"] = chosen[0] if chosen else BY_NAME["mode"].default
    return fields


def spec_arguments(fields: dict) -> dict:
    """The `SweepSpec.from_options` keywords among option fields (option name -> value); without
    -n, a launched job's world or a Slurm allocation's tasks and layout (topology.run_defaults)."""
    args = {BY_NAME[k].spec: v for k, v in fields.items() if BY_NAME[k].spec}
    if args.get("nprocs") is None and args.get("emulate") is None:
        args.update({k: v for k, v in run_defaults(args.get("launcher", "auto")).items() if args.get(k) is None})
    return args


def launcher_argv(text: str) -> list[str]:
    """--launcher-args as an argument list, split the way a shell would."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise InputError(f"invalid launcher arguments {text!r} ({exc})") from None
