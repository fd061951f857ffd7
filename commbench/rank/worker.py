"""The per-rank entry point: open the backends, run every point of the plan, and (rank 0)
write rows and stream one event per point to the parent.

Started by a launcher as `python -m commbench.rank.worker --spec <base64 JSON>`, or called in
process by `commbench run --launcher none` when the user started the ranks.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys
import tempfile
import time
import traceback
import warnings
from typing import Callable

from commbench.rank import harness, machine, nccl_log, power, topology, traffic

from commbench import runinfo
from commbench.rank.algorithms import ALGORITHMS, Context
from commbench.rank.backends import Communicator, open_backend
from commbench.rank.collectives import COLLECTIVES
from commbench.dtypes import DTYPES
from commbench.events import emit_stdout
from commbench.rank.plan import Point, build_plan
from commbench.results import ResultsWriter, update_run_json
from commbench.spec import SweepSpec
from commbench.metrics import bandwidth, summarize

Emit = Callable[..., None]
STARTUP_TIMEOUT_S = 300.0


def encode_spec(spec: SweepSpec) -> str:
    return base64.urlsafe_b64encode(spec.to_json().encode()).decode()


def decode_spec(text: str) -> SweepSpec:
    return SweepSpec.from_json(base64.urlsafe_b64decode(text.encode()).decode())


def _torch_rendezvous(info: topology.RankInfo, mpi: Communicator | None) -> None:
    """Make sure MASTER_ADDR/MASTER_PORT are set for torch.distributed. Launchers that do not
    set them (mpirun, srun) get them from rank 0 over MPI."""
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        return
    if mpi is None:
        raise RuntimeError("torch backends need MASTER_ADDR and MASTER_PORT (or an MPI launch to share them)")
    hosts = mpi.allgather_object(info.hostname)
    addr = "127.0.0.1" if len(set(hosts)) == 1 else socket.gethostbyname(hosts[0])
    port = mpi.allgather_object(topology.free_port() if mpi.rank == 0 else None)[0]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)


def open_communicators(spec: SweepSpec, info: topology.RankInfo) -> dict[str, Communicator]:
    comms: dict[str, Communicator] = {}
    launched_by_mpi = info.source in ("openmpi", "pmi") or "PMIX_RANK" in os.environ
    if "mpi" in spec.backends or (launched_by_mpi and "MASTER_ADDR" not in os.environ):
        comms["mpi"] = open_backend("mpi", info.rank, info.world, info.local_rank, STARTUP_TIMEOUT_S)
    for name in spec.backends:
        if name not in comms:
            _torch_rendezvous(info, comms.get("mpi"))
            comms[name] = open_backend(name, info.rank, info.world, info.local_rank, STARTUP_TIMEOUT_S, spec.device)
    return comms


def run(spec: SweepSpec, emit: Emit = emit_stdout, progress: Emit = emit_stdout) -> int:
    """Run the sweep on this rank; returns the wrong-element total (same on every rank).
    emit: rank 0's events; progress: every rank's "enter" (so the parent can name stragglers)."""
    info = topology.detect()
    tuning = _nccl_tuning_log(spec, info)
    comms = open_communicators(spec, info)
    control = comms[spec.backends[0]]
    rank, world = control.rank, control.size
    facts = control.allgather_object(runinfo.rank_facts(spec.device, info.local_rank)
                                     | {"rank": rank, "launcher_node": info.node, "local_rank": info.local_rank})
    machines = [m for m in control.allgather_object(machine.describe() if info.local_rank == 0 else None) if m]
    nodes_of = topology.node_layout([f["hostname"] for f in facts], spec.ranks_per_node,
                                    [f["launcher_node"] for f in facts])
    nodes = len(set(nodes_of))
    per_node = world // nodes if world % nodes == 0 else None
    plan = build_plan(spec)
    contexts = {name: Context(c, nodes_of) for name, c in comms.items()}
    counter = _link_counter(info)
    meter, power_note = (None, None)
    if spec.power:
        meter, power_note = power.open_meter(control, spec.device, info.hostname)
    writer = ResultsWriter(spec.out_dir) if rank == 0 else None
    if rank == 0:
        libraries = {}
        for c in comms.values():
            libraries.update(c.library_info())
        update_run_json(spec.out_dir, {
            "ranks": facts, "world_size": world, "nodes": nodes, "ranks_per_node": per_node,
            "node_of_rank": nodes_of, "versions": runinfo.software_versions(libraries),
            "rank0_environment": runinfo.collective_env(), "topology_source": info.source,
            "planned_points": len(plan), "machines": machines,
            "power": None if not spec.power else {"measured": meter is not None, "reason": power_note,
                                                  "window_s": power.WINDOW_S, "sample_s": power.SAMPLE_S,
                                                  "peak_source": meter.job_peak_source if meter else None},
        })
        emit("ready", world_size=world, nodes=nodes, ranks_per_node=per_node, total=len(plan), already=len(spec.done_points),
             hosts=sorted({f["hostname"] for f in facts}),
             note=f"power not measured: {power_note}" if power_note else None)

    total_wrong, skipped, done, warned = 0, [], set(spec.done_points), []
    for point in plan:
        if point.index in done:
            continue
        comm = comms[point.backend]
        coll, dtype = COLLECTIVES[point.collective], DTYPES[point.dtype]
        counts = coll.counts(point.size, dtype.itemsize, world)
        native = point.algorithm == "native"
        algo = None if native else ALGORITHMS[point.algorithm]
        reason = (comm.unsupported(point.collective, dtype, point.op, point.in_place, native)
                  or (None if native else algo.unsupported(contexts[point.backend], point.collective)))
        if reason is None and counts.size_bytes == 0:
            reason = f"{point.size} B of {dtype.name} over {world} ranks is less than one element per rank"
        if reason:
            if rank == 0:
                skipped.append(point.as_dict() | {"reason": reason})
                emit("skip", point=point.as_dict(), reason=reason)
            continue
        progress("enter", rank=rank, point=point.as_dict())
        if rank == 0:
            emit("start", point=point.as_dict())
        if tuning is not None:
            tuning.read()  # what NCCL logged before this point
        m = harness.measure(comm, coll, counts, dtype, point.op, point.in_place, spec.warmup, spec.iters,
                            spec.min_time, spec.min_iters, spec.max_iters, spec.batch,
                            None if native else _algorithm_binder(algo, contexts[point.backend], point, counts, dtype,
                                                                 spec.segment_bytes), counter, meter)
        total_wrong += m.wrong
        fallback = getattr(comm.reducer, "fallback", None)
        if rank == 0 and fallback and fallback not in warned:
            warned.append(fallback)
            update_run_json(spec.out_dir, {"warnings": warned})
            emit("warning", text=fallback)
        if rank == 0:
            row = make_row(spec, point, counts, m, world, nodes, per_node, comm.device)
            if m.power is not None:
                row.update(m.power, energy_j_per_byte=m.power["energy_j"] / counts.size_bytes)
            if tuning is not None and native and point.backend == "nccl":
                row["library_choice"] = nccl_log.choice(tuning.read(), point.collective, counts.size_bytes)
            if counter is not None:
                row["internode_bytes_measured"] = round(m.link_bytes)
                if algo is not None:
                    row["internode_bytes_expected"] = traffic.expected_internode_bytes(
                        algo, point.collective, counts, dtype.itemsize, nodes_of, spec.segment_bytes)
            writer.add(row, m.samples_s * 1e6)
            emit("row", row=row)
    if rank == 0:
        samples_file = writer.finalize()
        update_run_json(spec.out_dir, {"skipped": skipped, "samples_file": samples_file, "wrong_total": total_wrong})
        emit("done", wrong=total_wrong)
    for c in comms.values():
        c.close()
    if tuning is not None:
        tuning.close()
    return total_wrong


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


def _algorithm_binder(algo, ctx: Context, point: Point, counts, dtype, segment_bytes: int):
    ctx.segment_elems = max(1, segment_bytes // dtype.itemsize)
    return lambda send, recv: algo.bind(ctx, point.collective, send, recv, point.op, point.in_place,
                                        counts.in_count, counts.out_count)


def make_row(spec, point: Point, counts, m: harness.Measurement, world, nodes, per_node, device) -> dict:
    stats = summarize(m.samples_s)
    factor = COLLECTIVES[point.collective].bus_factor(world)
    algbw, busbw = bandwidth(counts.size_bytes, stats["time_us"], factor)
    return {
        "run_id": spec.run_id, "label": spec.label, "point": point.index, "collective": point.collective,
        "backend": point.backend, "algorithm": point.algorithm, "device": device, "dtype": point.dtype,
        "op": point.op or "none", "in_place": int(point.in_place), "world_size": world, "nodes": nodes,
        "ranks_per_node": per_node, "size_bytes": counts.size_bytes, "count": counts.count,
        **stats, "iterations": m.iterations, "batch": m.batch, "warmup": m.warmup, "algbw_gbps": algbw, "busbw_gbps": busbw, "bus_factor": factor,
        "wrong": m.wrong, "placement": spec.placement if spec.emulate else "", "timestamp": runinfo.utc_now(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="commbench.rank.worker")
    parser.add_argument("--spec", required=True, help="base64 JSON SweepSpec")
    args = parser.parse_args(argv)
    spec = decode_spec(args.spec)
    # timed loops repeat in-place reductions, so values grow without bound: numpy's overflow
    # warnings there say nothing (the correctness check starts again from a fresh fill)
    warnings.filterwarnings("ignore", r"(overflow|invalid value) encountered", RuntimeWarning, r"commbench\.kernels")
    try:
        run(spec)
    except BaseException as exc:  # noqa: BLE001 - every failure must end the whole job
        fail(exc)
    sys.exit(0)


def fail(exc: BaseException) -> None:
    """Report the error once (rank 0 as an event, every rank on stderr) and end the whole job:
    an MPI job is aborted so no rank is left waiting in a collective."""
    rank = topology.detect().rank
    msg = f"{type(exc).__name__}: {exc}".strip()
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
