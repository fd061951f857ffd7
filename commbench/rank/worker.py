"""The per-rank entry point: open the backends, run every point of the plan, and (rank 0)
stream the run's facts and one event per point, row and samples included, to the parent, which
writes the run folder (ranks write no files).

Started by a launcher as `python -m commbench.rank.worker --spec <run folder>/.spec.json` (the
spec travels as that file: commbench.folder.spec_file), or called in process by `commbench run
--launcher none` when the user started the ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from commbench import runinfo, timers
from commbench.algorithms import ALGORITHMS, Context
from commbench.backends.communicators import Communicator
from commbench.collectives import COLLECTIVES
from commbench.dtypes import DTYPES
from commbench.errors import Unavailable
from commbench.events import emit_stdout
from commbench.folder.spec_file import decode_spec
from commbench.kernels import floor, reducers
from commbench.machine import inventory as machine
from commbench.machine import load, power, topology, traffic
from commbench.library_calls import HAN, LIBRARY_CALLS
from commbench.plan import Point, build_plan, rounding_twins
from commbench.rank import fabric, harness, nccl_log, world
from commbench.rank.world import open_communicators
from commbench.rank.han import close_han, han_target, library_choice, open_han
from commbench.rank.point_events import group_columns, make_row, send_point
from commbench.spec import SweepSpec

KERNEL_TIMEOUT_SHARE = 0.8  # of the point's timeout: a kernel that waits longer reports before the watchdog kills

Emit = Callable[..., None]


@dataclass
class Session:
    """What a rank holds for the whole sweep: its communicators and the job's layout."""
    spec: SweepSpec
    comms: dict[str, Communicator]
    rank: int
    world: int
    nodes_of: list[int]
    plan: list[Point]
    contexts: dict[str, Context]
    tuning: nccl_log.TuningLog | None
    counter: Callable[[], int] | None
    meter: object | None = None
    power_note: str | None = None
    load: load.LoadMeter | None = None
    warned: list[str] = field(default_factory=list)
    floor: dict | None = None  # this host's floors (commbench.kernels.floor), for the rows' efficiency
    han: Communicator | str | None = None  # native_han's communicator, or why it has none (rank/han.py)
    twins: dict[int, int] = field(default_factory=dict)  # plan.rounding_twins of the plan
    # --split: this rank's group (its world ranks), and by backend its group's communicator and the world's share
    members: list[int] | None = None
    group_comms: dict[str, Communicator] = field(default_factory=dict)
    groups: dict[str, harness.Groups] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        return len(set(self.nodes_of))

    @property
    def per_node(self) -> int | None:
        return self.world // self.nodes if self.world % self.nodes == 0 else None

    def comm_of(self, backend: str) -> Communicator:
        """The communicator a point runs on: this rank's group's (--split), else the world's."""
        return self.group_comms.get(backend) or self.comms[backend]

    def shape(self) -> tuple[int, int, int | None]:
        """(ranks, nodes, ranks per node or None where uneven) of what a point runs on: a group, else the world."""
        ranks = self.members if self.members is not None else range(self.world)
        nodes = len({self.nodes_of[r] for r in ranks})
        return len(ranks), nodes, (len(ranks) // nodes if len(ranks) % nodes == 0 else None)


def run(spec: SweepSpec, emit: Emit = emit_stdout, progress: Emit = emit_stdout) -> int:
    """Run the sweep on this rank; returns the wrong-element total (same on every rank).
    emit: rank 0's events (facts, ready, skip, start, warning, row, done), from which the parent
    writes the run folder; progress: every rank's "enter" (so the parent can name stragglers)."""
    session = open_session(spec, emit)
    total_wrong, rows, done = 0, 0, set(spec.done_points)
    if spec.check:  # commbench check: the fabric's rows, not the plan's points
        total_wrong, rows = fabric.run_check(session, emit)
    else:
        for point in session.plan:
            if point.index not in done:
                wrong = run_point(session, point, emit, progress)
                if wrong is not None:
                    total_wrong, rows = total_wrong + wrong, rows + 1
    if session.rank == 0:
        emit("done", wrong=total_wrong, rows=rows)
    close_han(session.han)
    for c in session.comms.values():
        c.close()
    if session.tuning is not None:
        session.tuning.close()
    return total_wrong


def open_session(spec: SweepSpec, emit: Emit) -> Session:
    """Open the backends, learn the job's layout; rank 0 sends the facts for run.json and "ready"."""
    info = topology.detect()
    tuning = _nccl_tuning_log(spec, info)
    comms = open_communicators(spec, info)
    control = comms[spec.backends[0]]
    facts = control.allgather_object(runinfo.rank_facts(spec.device, info.local_rank)
                                     | {"rank": control.rank, "launcher_node": info.node, "local_rank": info.local_rank})
    machines = [m for m in control.allgather_object(machine.describe() if info.local_rank == 0 else None) if m]
    checked = world.check(spec, info, comms, [f["hostname"] for f in facts], [f["launcher_node"] for f in facts])
    nodes_of = topology.node_layout([f["hostname"] for f in facts], spec.ranks_per_node,
                                    [f["launcher_node"] for f in facts])
    s = Session(spec, comms, control.rank, control.size, nodes_of, build_plan(spec),
                {name: Context(c, nodes_of) for name, c in comms.items()}, tuning, _link_counter(info))
    s.load = load.open_meter(control)
    if spec.split:
        open_groups(s)
    s.twins = rounding_twins(s.plan, s.shape()[0], spec.peer_traffic())
    if HAN in spec.algorithms and "mpi" in comms:
        s.han = open_han(comms["mpi"])
    floors = floor.node_floors(control, spec.device)
    s.floor = next((f for h, f in floors.items() if h == facts[control.rank]["hostname"] and isinstance(f, dict)), None)
    power_facts = None
    if spec.power:
        s.meter, power_facts = power.open_meters(control, spec.device, info.hostname)
        s.power_note = power.note(spec.device, power_facts)
    if s.rank == 0:
        libraries = {}
        for c in comms.values():
            libraries.update(c.library_info())
        emit("facts", run={
            "ranks": facts, "world_size": s.world, "nodes": s.nodes, "ranks_per_node": s.per_node,
            "node_of_rank": nodes_of, "versions": runinfo.software_versions(libraries),
            "rank0_environment": runinfo.collective_env(), "topology_source": info.source, "world": checked,
            "planned_points": len(s.plan), "machines": machines, "harness_floor_us": harness_floor(spec, comms),
            "power": None if not spec.power else {"measured": s.meter is not None, "reason": s.power_note,
                                                  "window_s": power.WINDOW_S, "sample_s": power.SAMPLE_S,
                                                  "peak_source": power_facts["gpu"]["peak_source"], **power_facts},
            "load": load_facts(s.load), "floors": floors})
        if s.load.ranks > s.load.cores:
            emit("warning", text=s.load.oversubscribed())
        total = fabric.planned(nodes_of, spec.check_peers) if spec.check else len(s.plan)
        emit("ready", world_size=s.world, nodes=s.nodes, ranks_per_node=s.per_node, total=total,
             already=len(spec.done_points), hosts=sorted({f["hostname"] for f in facts}),
             note=s.power_note)
    control.barrier()  # rank 0's long "facts" line is out before any rank prints its own lines
    return s


def open_groups(s: Session) -> None:
    """--split: each backend's communicator split into the spec's groups (collective); this rank's group's
    communicator, and the contexts of the own algorithms on it."""
    groups = s.spec.groups()
    index = next(i for i, g in enumerate(groups) if s.rank in g)
    s.members = groups[index]
    for name, c in s.comms.items():
        sub = c.split(index, c.rank)
        s.group_comms[name] = sub
        s.groups[name] = harness.Groups(c, index, len(groups))
        s.contexts[name] = Context(sub, [s.nodes_of[r] for r in s.members])


def load_facts(meter: load.LoadMeter) -> dict:
    """run.json's "load": how crowded the machines are and what flags a point (commbench.machine.load)."""
    return {"ranks_per_machine": meter.ranks, "cores_per_machine": meter.cores,
            "oversubscribed": meter.ranks > meter.cores, "busy_cores_flag": load.BUSY_CORES,
            "spread_flag": load.SPREAD, "min_window_s": load.MIN_WINDOW_S}


def harness_floor(spec: SweepSpec, comms: dict[str, Communicator]) -> dict[str, float]:
    """What each loop this run may time with costs per call by itself (an empty call), in µs, on
    rank 0: the Python loop of the device and, with MPI, its C loop (where it builds; the kernels'
    C loop has the same shape). On a GPU the Python loop's figure is GPU time between events."""
    floor = {timers.device_loop(spec.device).name: round(timers.floor_us(timers.device_loop(spec.device)), 4)}
    if "mpi" in spec.backends and spec.timer != "python":
        from commbench.kernels import mpi_loop  # needs mpi4py

        try:
            floor["native"] = round(mpi_loop.floor_us(), 4)
        except mpi_loop.LoopUnavailable:
            pass  # the first native point says why
    return floor


@dataclass
class Bound:
    """What measuring a point on this rank takes: its backend and communicator, collective, element
    counts and dtype, and the binder of an own algorithm (None: the library's call)."""
    backend: str
    comm: Communicator
    coll: object
    counts: object
    dtype: object
    algo: object | None
    binder: Callable | None

    def prepare(self, spec: SweepSpec, point: Point, bufs=None, alloc=None) -> harness.Prepared:
        """The point set up for timing (harness.Prepared), on `bufs` where given, else in buffers from
        its algorithm's allocator, else from `alloc` (else the communicator's)."""
        if bufs is None and alloc is not None and getattr(self.binder, "alloc", None) is None:
            bufs = harness.Buffers(self.comm, self.coll, self.counts, self.dtype, point.in_place, alloc)
        return harness.Prepared(self.comm, self.coll, self.counts, self.dtype, point.op, point.in_place, self.binder,
                                spec.timer, spec.graph, bufs)


def bind_point(s: Session, spec: SweepSpec, point: Point, twins: dict[int, int]) -> Bound | str:
    """The point ready to measure on this rank, or why it cannot run here (the same on every rank);
    twins: plan.rounding_twins of the plan of spec it is of."""
    comm = s.comm_of(point.backend)
    coll, dtype = COLLECTIVES[point.collective], DTYPES[point.dtype]
    counts = coll.counts_for(point.size, dtype.itemsize, comm.size, spec.peer_traffic())
    if coll.rooted:
        counts = dataclasses.replace(counts, root=spec.root)
    if point.algorithm == HAN:
        comm = han_target(s.han, point.backend, point.collective)
        if isinstance(comm, str):
            return comm
    algo = None if point.algorithm in LIBRARY_CALLS else ALGORITHMS[point.algorithm]
    reason = (comm.unsupported(point.collective, dtype, point.op, point.in_place, algo is None)
              or (None if algo is None else algo.unsupported(s.contexts[point.backend], point.collective)))
    if reason is None and coll.rooted and spec.root >= comm.size:
        reason = f"--root {spec.root} is no rank of these {comm.size}"
    if reason is None and counts.size_bytes == 0:
        reason = f"{point.size} B of {dtype.name} over {comm.size} ranks is less than one element per rank"
    twin = None if reason else twins.get(point.index)
    if twin is not None:
        reason = f"{point.size} B rounds to {counts.size_bytes} B over {comm.size} ranks, measured as size {twin}"
    if reason:
        return reason
    binder = None if algo is None else _algorithm_binder(algo, s.contexts[point.backend], point, counts, dtype, spec)
    return Bound(point.backend, comm, coll, counts, dtype, algo, binder)


def notes_of(s: Session, bound: Bound, extra=()) -> list[str]:
    """The one-line notes of a measured point not shown yet (marked shown): a reducer's fallback, the
    communicator's, the algorithm context's and the measurement's."""
    found = [getattr(bound.comm.reducer, "fallback", None), *bound.comm.notes,
             *s.contexts[bound.backend].notes, *extra]
    new = [n for n in dict.fromkeys(found) if n and n not in s.warned]
    s.warned += new
    return new


def run_point(s: Session, point: Point, emit: Emit, progress: Emit) -> int | None:
    """Measure one point (rank 0 sends its row and samples); its wrong elements, or None when
    the point cannot run here (rank 0 sends the reason)."""
    spec = s.spec
    bound = bind_point(s, spec, point, s.twins)
    if isinstance(bound, str):
        if s.rank == 0:
            failed = {"failed": True} if isinstance(bound, Unavailable) else {}  # not a combination that cannot exist
            emit("skip", point=point.as_dict(), reason=bound, **failed)
        return None
    comm, counts, dtype = bound.comm, bound.counts, bound.dtype
    progress("enter", rank=s.rank, point=point.as_dict())
    if s.rank == 0:
        emit("start", point=point.as_dict())
    if s.tuning is not None:
        s.tuning.read()  # what NCCL logged before this point
    s.load.start()
    m = harness.measure(comm, bound.coll, counts, dtype, point.op, point.in_place, spec.warmup, spec.iters,
                        spec.min_time, spec.min_iters, spec.max_iters, spec.batch, bound.binder, s.counter, s.meter,
                        spec.timer, spec.graph, spec.delays().get(s.rank, 0.0), s.groups.get(point.backend))
    busy, _ = load.background(s.comms[point.backend], s.load.stop())
    for note in notes_of(s, bound, m.notes):
        if s.rank == 0:
            emit("warning", text=note)
    if s.rank == 0:
        why = load.reasons(s.load, busy, m.samples_s * 1e6)
        ranks, nodes, per_node = s.shape()
        row = make_row(spec, point, counts, m, ranks, nodes, per_node, comm.device, background_cores=busy,
                       unreliable=why, **_extra_columns(s, point, counts, m, bound.algo, dtype))
        row.update(floor.efficiency(s.floor, row["time_us"], row["busbw_gbps"], ranks, nodes, comm.device))
        send_point(emit, point.index, row, m.samples_s, m.rank_s, m.late_s)
    return m.wrong


def _extra_columns(s: Session, point: Point, counts, m: harness.Measurement, algo, dtype) -> dict:
    """The optional columns: power, the library's choice, inter-node bytes."""
    extra = {}
    if m.power is not None:
        extra.update(m.power)
        for prefix in ("", "cpu_"):
            if f"{prefix}energy_j" in m.power:
                extra[f"{prefix}energy_j_per_byte"] = m.power[f"{prefix}energy_j"] / counts.size_bytes
    if s.tuning is not None and algo is None and point.backend == "nccl":
        extra["library_choice"] = nccl_log.choice(s.tuning.read(), point.collective, counts.size_bytes)
    elif (choice := library_choice(point, m.schedule)) is not None:
        extra["library_choice"] = choice
    if m.group_s is not None:
        extra.update(group_columns(s.spec.split, point.collective, counts, m.group_s, comm_size=len(s.members)))
    if s.counter is not None:
        extra["internode_bytes_measured"] = round(m.link_bytes)  # (--split: every group's, summed)
        if algo is not None and not s.groups:  # (the message pattern is one group's)
            extra["internode_bytes_expected"] = traffic.expected_internode_bytes(
                algo, point.collective, counts, dtype.itemsize, s.nodes_of, s.spec.segment_bytes)
    return extra


def _nccl_tuning_log(spec: SweepSpec, info: topology.RankInfo) -> nccl_log.TuningLog | None:
    """--nccl-tuning: rank 0 has NCCL log its choices to a file of its own, set up before NCCL
    starts (it reads its debug settings once); None on the other ranks and without the flag."""
    if not spec.nccl_tuning or info.rank != 0:
        return None
    fd, path = tempfile.mkstemp(prefix="commbench-nccl-", suffix=".log")
    os.close(fd)
    os.environ.update(nccl_log.rank0_env(os.environ, path))
    return nccl_log.TuningLog(path)


def _link_counter(info: topology.RankInfo):
    """Reads the uplink's byte counter on one rank per node (0 elsewhere), when a link
    interface is named (COMMBENCH_LINK_IFACE); None otherwise."""
    iface = traffic.link_iface()
    if iface is None:
        return None
    if info.local_rank != 0:
        return lambda: 0
    traffic.tx_bytes(iface)  # fails here, before any point, if the interface does not exist
    return lambda: traffic.tx_bytes(iface)


def _algorithm_binder(algo, ctx: Context, point: Point, counts, dtype, spec: SweepSpec):
    ctx.segment_elems = max(1, spec.segment_bytes // dtype.itemsize)
    ctx.timeout_s = KERNEL_TIMEOUT_SHARE * spec.point_timeout(counts.size_bytes)  # the kernel's line comes first
    ctx.channels = spec.channels
    ctx.root = spec.root
    ctx.peers = counts.peers

    def bind(send, recv):
        return algo.bind(ctx, point.collective, send, recv, point.op, point.in_place, counts.in_count,
                         counts.out_count)
    bind.alloc = algo.allocator(ctx)  # where the harness puts the point's buffers (None: the communicator's)
    return bind


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="commbench.rank.worker")
    parser.add_argument("--spec", required=True, help="the JSON SweepSpec's file (the run folder's .spec.json)")
    args = parser.parse_args(argv)
    reducers.quiet_overflow()
    try:
        run(decode_spec(args.spec))
    except BaseException as exc:  # noqa: BLE001 - every failure must end the whole job
        fail(exc)
    sys.exit(0)


def fail(exc: BaseException) -> None:
    """Report the error once (rank 0 as an event, every rank on stderr) and end the whole job:
    an MPI job is aborted so no rank is left waiting in a collective."""
    rank = topology.detect().rank
    msg = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, world.WorldError):
        world.stop(rank, msg)  # every rank found it: rank 0 alone says so, no rank waits to be aborted
    sys.stderr.write(f"commbench rank {rank}: {msg}\n")
    if os.environ.get("COMMBENCH_DEBUG"):
        traceback.print_exc()
    emit_stdout("error", rank=rank, message=msg)
    sys.stderr.flush()
    if "mpi4py.MPI" in sys.modules:
        from mpi4py import MPI

        time.sleep(0.2)  # let the launcher forward the lines above
        MPI.COMM_WORLD.Abort(1)
    os._exit(1)


if __name__ == "__main__":
    main()
