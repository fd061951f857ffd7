"""The results schema: the files of a run folder, the documented results.csv columns, the format
version, and the one row builder (used by the ranks, `model predict` and the importers).

A run folder holds results.csv (one row per point), samples.csv then samples.parquet (every
timing sample: the maximum over ranks of a batch's seconds per call), ranks.csv (every rank's own
seconds per call and seconds outside the calls of each sample, bounded: commbench.rank.harness
RANK_CELLS) and run.json (how the run was made and how it ended). The parent writes it
(commbench.folder.write); readers load it through commbench.folder.load.

Format versions: 1, folders without `format_version` in run.json (written before it was
recorded); 2, `format_version` recorded. Both have the columns below; a folder keeps the header
it started with, so an older folder may lack the newer optional columns.
"""

from __future__ import annotations

from enum import StrEnum

from commbench.metrics import STAT_COLUMNS
from commbench.timers import LOOP_NAMES


class RunStatus(StrEnum):
    """run.json's "status": how far a run got. Written by the folder's writers only, read by resume and
    the readers (a StrEnum: the JSON text is the value)."""

    RUNNING = "running"  # started (or its writer died: a resume tells which, by the pid and host)
    COMPLETED = "completed"  # every point measured or skipped
    INTERRUPTED = "interrupted"  # stopped by a signal or a closed output; resumable
    FAILED = "failed"  # stopped by an error; resumable


FORMAT_VERSION = 2
RESULTS_CSV = "results.csv"
SAMPLES_CSV = "samples.csv"
SAMPLES_PARQUET = "samples.parquet"
RANKS_CSV = "ranks.csv"
RUN_JSON = "run.json"

_STATS = {
    "time_us": "median sample, µs per call",
    "time_us_mean": "mean sample (µs)",
    "time_us_min": "smallest sample (µs)",
    "time_us_p95": "95th percentile of the samples (µs)",
    "time_us_p99": "99th percentile of the samples (µs)",
    "time_us_max": "largest sample (µs)",
    "time_us_stdev": "standard deviation of the samples (µs)",
    "samples": "timing samples kept (one per batch of calls)",
}

COLUMN_DOCS: tuple[tuple[str, str], ...] = (
    ("run_id", "the run's id"),
    ("label", "free-text label of the run"),
    ("point", "index of the point in the sweep plan"),
    ("job", "which of the run's jobs measured the row: 1..N under --repeat N (a folder without the column: 1)"),
    ("collective", "all_reduce, all_gather, reduce_scatter, ..."),
    ("backend", "the library (mpi, gloo, nccl; imports: the tool's; predictions: model)"),
    ("algorithm", "native (the library's own call), native_han (Open MPI's coll/han) or commbench's algorithm"),
    ("device", "cpu or cuda"),
    ("dtype", "element type"),
    ("op", "reduction (none for the collectives that only move data)"),
    ("root", "the rank a rooted collective starts or ends at (broadcast, reduce, gather, scatter: --root); empty for the others"),
    ("in_place", "1 = in-place buffers"),
    ("world_size", "ranks"),
    ("nodes", "nodes"),
    ("ranks_per_node", "ranks per node (empty when uneven)"),
    ("size_bytes", "bytes as nccl-tests counts them"),
    ("count", "elements (count x itemsize = size_bytes)"),
    *((name, _STATS[name]) for name in STAT_COLUMNS),
    ("iterations", "timed calls (samples x batch)"),
    ("batch", "calls per sample"),
    ("warmup", "warm-up calls"),
    ("timer", f"the loop that timed it: {', '.join(LOOP_NAMES)} (commbench.timers)"),
    ("registration", "--registration: how NCCL's buffers were registered, as nccl-tests' -R: local (ncclCommRegister) "
                     "or window (a symmetric window); empty where they were not"),
    ("algbw_gbps", "size_bytes / time, GB/s"),
    ("busbw_gbps", "algbw x bus_factor, GB/s"),
    ("bus_factor", "the collective's bus factor for world_size"),
    ("wrong", "wrong output elements summed over ranks (0 = correct, empty = not checked)"),
    ("background_cores", "cores' worth of CPU time other processes took on the busiest of the ranks' machines while "
                         "the point was measured (empty: /proc/stat unreadable) (commbench.machine.load)"),
    ("latency_efficiency", "the machine's floor / this time: its exchange-and-add of 8 B between two cores over the "
                           "point's time (1 = at the floor; one node, 2+ ranks, CPU; run.json `floors`, "
                           "commbench.kernels.floor)"),
    ("bandwidth_efficiency", "busbw / the machine's copy rate: one core's (CPU) or the GPU's device-to-device (one "
                             "node, 2+ ranks)"),
    ("unreliable", "why the point's time is not to be trusted (a busy machine, a wide spread); empty when nothing says so"),
    ("library_choice", "what the call ran: NCCL's algorithm/protocol pairs, most frequent first (--nccl-tuning); "
                       "ring_kernel's and tree_kernel's schedule (ring, tree, oneshot); hierarchical_kernel's all-reduce "
                       "of several chunks (pipelined, in order); native_han's coll/han"),
    ("power_w_avg", "--power: GPU power (W) averaged over the window, summed over GPUs"),
    ("power_w_max", "--power: the sum of each GPU's peak (W)"),
    ("energy_j", "--power: joules per call"),
    ("energy_j_per_byte", "--power: joules per byte of size_bytes"),
    ("cpu_power_w_avg", "--power: the CPU packages' and DRAM's power (W) over the window, summed over nodes (RAPL)"),
    ("cpu_energy_j", "--power: the CPUs' joules per call"),
    ("cpu_energy_j_per_byte", "--power: the CPUs' joules per byte of size_bytes"),
    ("cpu_power_domains", "--power: each RAPL domain's power, summed over nodes (\"package-0 41.2 W, dram-0 6.1 W\")"),
    ("placement", "emulated runs: block or round-robin"),
    ("check_scope", "`commbench check`: what the row measured: node (its all-reduce), path (two of a node's ranks' "
                    "exchange), link (two nodes' exchange) or cluster (an all-reduce across every node)"),
    ("check_nodes", "`commbench check`: the node (0-based; a path's), the two nodes of a link (A-B), or all"),
    ("check_ranks", "`commbench check`: a path's two ranks (A-B)"),
    ("split", "--split: the groups that ran the point at once, as mod:2 (commbench.split); empty without"),
    ("groups", "--split: how many groups ran it (world_size is each group's ranks; the row's time is the slowest "
               "group's per sample)"),
    ("group_time_us", "--split: each group's median time (its ranks' maximum per sample), ';' between groups"),
    ("group_busbw_gbps", "--split: each group's busbw at its own median time, ';' between groups"),
    ("busbw_total_gbps", "--split: the groups' busbw summed: what they move at once (nccl-tests: per group x groups)"),
    ("internode_bytes_measured", "bytes per call across node links, from the link counters"),
    ("internode_bytes_expected", "bytes per call across node links, from the algorithm's message pattern"),
    ("predicted", "1 on rows written by `commbench model predict`"),
    ("timestamp", "when the point finished (UTC)"),
)
COLUMNS = tuple(name for name, _ in COLUMN_DOCS)
# `commbench ab` folders (commbench.run.ab) add these to every row and sample: which side measured it, in
# which round of the comparison, and (samples) which A/B pair of the round it belongs to
AB_COLUMN_DOCS: tuple[tuple[str, str], ...] = (
    ("side", "commbench ab: the side that measured the row, A (baseline) or B (candidate)"),
    ("round", "commbench ab: the round of the comparison that measured it (1, 2, ...)"),
)
AB_COLUMNS = COLUMNS + tuple(name for name, _ in AB_COLUMN_DOCS)
SAMPLE_COLUMNS = ("run_id", "point", "iteration", "time_us", "job")
AB_SAMPLE_COLUMNS = SAMPLE_COLUMNS + ("side", "round", "pair")
# ranks.csv: per sample (iteration, as in the samples file) and rank, the rank's own µs per call (from the
# batch's start on it to its last call's return) and its µs per call outside the calls (before entering
# them: an injected delay; empty where the source does not say, an nccl-tests import)
RANK_COLUMN_DOCS: tuple[tuple[str, str], ...] = (
    ("run_id", "the run"), ("point", "the point (results.csv's)"), ("job", "the job (--repeat)"),
    ("iteration", "the sample (samples file's iteration)"), ("rank", "the rank"),
    ("time_us", "the rank's own µs per call of the sample"),
    ("late_us", "the rank's µs per call outside the calls, before entering them (empty: not recorded)"),
)
RANK_COLUMNS = tuple(name for name, _ in RANK_COLUMN_DOCS)
# `run --json` adds these to each row: per rank, the median of the rank's samples (ranks.csv)
RANK_SUMMARY = ("rank_time_us", "rank_late_us")
# what every reader relies on: a folder without one of these is refused
REQUIRED = ("run_id", "point", "collective", "backend", "algorithm", "dtype", "op", "in_place", "world_size",
            "size_bytes", "time_us", "busbw_gbps", "wrong")
MAY_BE_EMPTY = ("op", "wrong")  # required columns whose cells may be empty (op: none; wrong: not checked)

# What a value of a column must be, as the loader checks it (commbench.folder.load): an integer
# of at least 0 or at least 1, a time in µs (> 0, at most MAX_TIME_US), an amount (finite, >= 0); a column not
# named here is text. An empty cell is a value not recorded (allowed outside REQUIRED).
COUNT, POSITIVE, TIME, AMOUNT = "count", "positive", "time", "amount"
# The most a time in a results or samples file may be: past any measurement and any model prediction (1 TiB at
# the model's slowest rates, 1 KB/s with a memory factor of 100: ~4e17 us); 1e300 was read, and overflowed sums.
MAX_TIME_US = 1e20
EXACT_INTEGERS = 2**53  # an integer cell at or past this is not read exactly (the readers' numbers are floats)
KINDS = {
    "point": COUNT, "job": POSITIVE, "in_place": COUNT, "world_size": POSITIVE, "nodes": POSITIVE,
    "ranks_per_node": POSITIVE, "size_bytes": POSITIVE, "count": COUNT,
    **{name: TIME for name in STAT_COLUMNS if name.startswith("time_us") and name != "time_us_stdev"},
    "time_us_stdev": AMOUNT, "samples": COUNT, "iterations": COUNT, "batch": COUNT, "warmup": COUNT,
    "algbw_gbps": AMOUNT, "busbw_gbps": AMOUNT, "bus_factor": AMOUNT, "wrong": COUNT, "power_w_avg": AMOUNT,
    "power_w_max": AMOUNT, "energy_j": AMOUNT, "energy_j_per_byte": AMOUNT, "cpu_power_w_avg": AMOUNT,
    "cpu_energy_j": AMOUNT, "cpu_energy_j_per_byte": AMOUNT, "internode_bytes_measured": AMOUNT,
    "internode_bytes_expected": AMOUNT, "predicted": COUNT, "round": POSITIVE, "background_cores": AMOUNT,
    "latency_efficiency": AMOUNT, "bandwidth_efficiency": AMOUNT, "root": COUNT, "groups": POSITIVE,
    "busbw_total_gbps": AMOUNT,
}
SAMPLE_KINDS = {"point": COUNT, "iteration": COUNT, "time_us": TIME, "job": POSITIVE, "round": POSITIVE, "pair": COUNT}
SAMPLE_REQUIRED = ("run_id", "point", "time_us")
RANK_KINDS = {"point": COUNT, "job": POSITIVE, "iteration": COUNT, "rank": COUNT, "time_us": TIME, "late_us": AMOUNT}



def _plain(value):
    """numpy scalars as Python numbers (rows travel as JSON and land in CSV)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def full_row(row: dict, ranks: dict | None = None) -> dict:
    """Every column of the schema (and the ab columns a row has), in order, None where the row has no
    value (results.csv's empty cell), then RANK_SUMMARY from `ranks` (None without): what `run --json`
    prints, one schema for both."""
    return {c: row.get(c) for c in (AB_COLUMNS if "side" in row else COLUMNS)} | {
        c: (ranks or {}).get(c) for c in RANK_SUMMARY}


def build_row(**fields) -> dict:
    """One results.csv row, in column order. Fills bus_factor, algbw_gbps and busbw_gbps (from
    collective, world_size, size_bytes and time_us; given values are replaced), op "none" and the
    timestamp unless given. A column the schema does not have is a ValueError."""
    from commbench import runinfo
    from commbench.metrics import bandwidth
    from commbench.collectives import COLLECTIVES

    unknown = sorted(set(fields) - set(AB_COLUMNS))
    if unknown:
        raise ValueError(f"not results columns: {', '.join(unknown)}")
    missing = [c for c in ("run_id", "point", "collective", "world_size", "size_bytes", "time_us") if c not in fields]
    if missing:
        raise ValueError(f"a row needs {', '.join(missing)}")
    row = {"label": "", "op": "none", "timestamp": runinfo.utc_now(), **fields}
    row["op"] = row["op"] or "none"
    if "in_place" in row:
        row["in_place"] = int(row["in_place"])
    factor = COLLECTIVES[row["collective"]].bus_factor(row["world_size"])
    row["bus_factor"] = factor
    row["algbw_gbps"], row["busbw_gbps"] = bandwidth(row["size_bytes"], row["time_us"], factor)
    return {c: _plain(row[c]) for c in AB_COLUMNS if c in row}
