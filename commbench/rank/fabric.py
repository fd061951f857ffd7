"""`commbench check` inside the ranks: every node's all-reduce, every node pair's link, one all-reduce
across the nodes, repeated until the verdicts are decided (commbench.fabric_rule owns the schedule and
the rule). Rank 0 sends one row per node, link and the whole cluster, as a sweep's rows.

A link is measured between two nodes' first ranks (their leaders): `LINK_ITERS` samples of the message
sent one way and then the other (each answered by one element), every pair of a round at once, each
way timed by its sender (the slower way's time is the sample; bandwidth is the message's bytes per
second). Inside a node of two or more ranks (GPUs), each pair of its ranks (a path) is measured
the same way, in the node's own tournament, and the node's all-reduce runs on its ranks through the
harness (timed, checked); on an emulated cluster the nodes take turns at both (they share one machine's
cores), elsewhere they run at once. The last all-reduce spans every rank. Ranks left out of a step wait
in a barrier that sleeps (Communicator.idle_barrier), not one that spins on the cores measured.
"""

from __future__ import annotations

import time

import numpy as np

from commbench import fabric_rule
from commbench.collectives import COLLECTIVES
from commbench.dtypes import DTYPES
from commbench.metrics import summarize
from commbench.rank import harness, world
from commbench.rank.point_events import send_point
from commbench.folder.schema import build_row

LINK_ITERS = 3  # samples of a link per repetition
LINK_SAMPLE_S = 0.005  # a sample's batch of messages lasts this long at least (MAX_BATCH at most)
MAX_BATCH = 1000
NODE_ITERS = 20  # all-reduce calls a node per repetition (and the cluster's once)
DTYPE = "float32"


class CheckRefused(world.WorldError):
    """The job cannot be checked (one node). Every rank finds it, so they stop as after any WorldError
    (rank 0 says so, none aborts the others); a parent that launched them says it as bad input."""


def _leaders(nodes_of: list[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for rank, node in enumerate(nodes_of):
        out.setdefault(node, rank)
    return out


def planned(nodes_of: list[int], peers: int | None) -> int:
    """The rows a check sends: a node's all-reduce and its paths (nodes of several ranks), each scheduled
    link, the cluster."""
    nodes = len(set(nodes_of))
    sizes = [nodes_of.count(n) for n in set(nodes_of) if nodes_of.count(n) > 1]
    links = sum(len(r) for r in fabric_rule.schedule(nodes, peers)) if nodes > 1 else 0
    return len(sizes) + sum(g * (g - 1) // 2 for g in sizes) + links + 1


def run_check(s, emit) -> tuple[int, int]:
    """Measure the fabric of session s (commbench.rank.worker.Session); rank 0 emits the rows. (The wrong
    elements summed, the rows.)"""
    spec, comm = s.spec, s.comms[s.spec.backends[0]]
    nodes_of = list(s.nodes_of)
    nodes = len(set(nodes_of))
    if nodes < 2:
        raise CheckRefused(f"check measures the links between nodes: this job's {s.world} ranks are on one node "
                           "(give a hostfile, a Slurm allocation of 2 or more nodes, or --emulate NODESxRANKS)")
    node, leaders = nodes_of[s.rank], _leaders(nodes_of)
    rounds = fabric_rule.schedule(nodes, spec.check_peers)
    dtype = DTYPES[DTYPE]
    size = spec.sizes[0]
    count = max(1, size // dtype.itemsize)
    send, recv = comm.alloc(count, dtype), comm.alloc(count, dtype)
    comm.write(send, 0, np.full(count, float(node + 1)))
    local = comm.split(node, s.rank)
    several = {n for n in set(nodes_of) if nodes_of.count(n) > 1}
    links: dict[tuple[int, int], list] = {pair: [] for r in rounds for pair in r}
    intra: dict[int, list] = {n: [] for n in sorted(several)}
    members = {n: [r for r, m in enumerate(nodes_of) if m == n] for n in sorted(several)}  # local rank -> rank
    paths: dict[tuple[int, int], list] = {(ranks[a], ranks[b]): [] for ranks in members.values()
                                          for r in fabric_rule.tournament(len(ranks)) for a, b in r}
    node_of = dict(enumerate(nodes_of))
    wrong = {("link", pair): 0 for pair in links} | {("node", n): 0 for n in several} | {
        ("path", pair): 0 for pair in paths}
    timers: dict[int, tuple[str, int, int]] = {}  # node -> its all-reduce's loop, warm-up calls and batch
    batches: dict[tuple, int] = {}  # (link|path, a, b) -> messages a sample, agreed at its first repetition
    start, reps = time.monotonic(), 0
    while True:
        mine = {}
        for pairs in rounds:  # ranks out of a round wait asleep: their cores are the measured ranks' too
            partner = next((b if a == node else a for a, b in pairs if node in (a, b)), None)
            comm.idle_barrier()
            if partner is not None and leaders[node] == s.rank:
                key = ("link", min(node, partner), max(node, partner))
                mine[key] = _exchange(comm, send, recv, leaders[partner], partner, count, node < partner, batches, key)
        comm.idle_barrier()
        for n in sorted(several) if spec.emulate is not None else ([node] if node in several else []):
            if spec.emulate is not None:  # the nodes share one machine's cores: one at a time
                comm.idle_barrier()
            if node == n:
                for pairs in fabric_rule.tournament(local.size):
                    partner = next((b if a == local.rank else a for a, b in pairs if local.rank in (a, b)), None)
                    local.idle_barrier()
                    if partner is not None:
                        key = ("path", *sorted((s.rank, members[n][partner])))
                        mine[key] = _exchange(local, send, recv, partner, node, count, local.rank < partner, batches,
                                              key)
                local.idle_barrier()
                m = _all_reduce(local, spec, size)
                if local.rank == 0:
                    mine[("node", n)] = (m.samples_s, m.wrong)
                    timers[n] = (m.timer, m.warmup, m.batch)
        comm.idle_barrier()
        gathered = comm.allgather_object((mine, timers, batches))
        for part, their_timers, their_batches in gathered:
            timers.update(their_timers)
            batches.update(their_batches)
            for key, (samples, bad) in part.items():
                if key[0] in ("link", "path"):
                    pair = (key[1], key[2])
                    wrong[(key[0], pair)] += bad
                    _merge((links if key[0] == "link" else paths)[pair], reps, samples)
                else:
                    intra[key[1]].append(np.asarray(samples) * 1e6)
                    wrong[("node", key[1])] += bad
        reps += 1
        spent = time.monotonic() - start
        stop = reps >= fabric_rule.MAX_REPS or (reps >= fabric_rule.MIN_REPS and (
            _decided(spec, links, intra, paths, node_of, size) or spent > spec.check_budget))
        if comm.reduce_host(np.array([1.0 if stop else 0.0]), "max")[0]:
            break
    cluster = _all_reduce(comm, spec, size)
    if s.rank == 0:
        _emit_rows(s, emit, links, paths, intra, wrong, timers, batches, cluster, size, reps,
                   time.monotonic() - start)
    local.close()
    return int(sum(wrong.values()) + cluster.wrong), planned(nodes_of, spec.check_peers)


def _exchange(comm, send, recv, peer: int, partner: int, count: int, first: bool, batches: dict,
              key: tuple) -> tuple[list[float], int]:
    """LINK_ITERS timed samples of the message each way between this rank and rank `peer` (node
    `partner`'s leader, or a rank of this node), after one untimed round: per sample, this rank's
    seconds to send the message and have the peer's one-element answer (the other end times the other
    way; `first`: this rank sends first); and the elements received wrong (each is the partner's node + 1).
    One way at a time: both ways at once put each way's acknowledgements behind the other's data in a
    TCP link's queue, and time that queue. A sample is a batch of messages lasting about LINK_SAMPLE_S at
    least (short ones are scheduling noise otherwise): the two ends agree on it, the larger of theirs, at
    the pair's first repetition (batches[key]), and keep it."""
    ack, answer = comm.alloc(1, DTYPES["float64"]), comm.alloc(1, DTYPES["float64"])

    def way(sending: bool, batch: int) -> float:
        t = time.perf_counter()
        for _ in range(batch):
            if sending:
                comm.send(send, peer)
                comm.recv(answer, peer)
            else:
                comm.recv(recv, peer)
                comm.send(ack, peer)
        comm.synchronize()
        return (time.perf_counter() - t) / batch

    took = [way(first == turn, 1) for turn in (True, False)]  # untimed: connections, caches
    if key not in batches:
        mine = min(MAX_BATCH, max(1, int(np.ceil(LINK_SAMPLE_S / max(max(took), 1e-9)))))
        comm.write(ack, 0, np.array([float(mine)]))
        comm.sendrecv(ack, peer, answer, peer)
        batches[key] = int(max(mine, comm.read(answer, 0, 1)[0]))
    batch = batches[key]
    times = []
    for _ in range(LINK_ITERS):
        sent = [way(first == turn, batch) for turn in (True, False)]
        times.append(sent[0] if first else sent[1])  # this rank's sending way
    got = comm.read(recv, 0, count)
    return times, int(np.count_nonzero(got != partner + 1))


def _merge(reps: list, rep: int, samples: list[float]) -> None:
    """Both ends' times of a repetition (each its sending way): per sample, the slower way's (seconds)."""
    samples = np.asarray(samples, float)
    if len(reps) > rep:
        reps[rep] = np.maximum(reps[rep], samples)
    else:
        reps.append(samples)


def _bandwidths(links: dict, size: int) -> dict:
    """Each link's samples as GB/s each way, per repetition."""
    return {pair: [size / t / 1e9 for t in reps] for pair, reps in links.items()}


def _decided(spec, links, intra, paths, node_of, size: int) -> bool:
    """Every verdict decided (fabric_rule.decided); on an emulated cluster, the links' (what is inside its
    nodes is not judged: fabric_rule.inside_unjudged)."""
    inside = spec.emulate is None
    return fabric_rule.decided(_bandwidths(links, size), intra if inside else None,
                               _bandwidths(paths, size) if inside else None, node_of)


def _all_reduce(comm, spec, size: int) -> harness.Measurement:
    coll, dtype = COLLECTIVES["all_reduce"], DTYPES[DTYPE]
    counts = coll.counts(size, dtype.itemsize, comm.size)
    return harness.measure(comm, coll, counts, dtype, "sum", False, 2, NODE_ITERS, spec.min_time, 1, NODE_ITERS,
                           timer=spec.timer)


def _emit_rows(s, emit, links, paths, intra, wrong, timers, batches, cluster, size: int, reps: int,
               seconds: float) -> None:
    spec, point = s.spec, 0
    backend = spec.backends[0]
    common = dict(run_id=spec.run_id, label=spec.label, backend=backend, algorithm="native", device=spec.device,
                  dtype=DTYPE, in_place=False, size_bytes=size, placement=spec.row_placement)
    coll = COLLECTIVES["all_reduce"]
    for n, times in intra.items():
        us = np.concatenate(times)
        _row(emit, point, us, dict(common, collective="all_reduce", op="sum", world_size=s.nodes_of.count(n), nodes=1,
                                   count=coll.counts(size, DTYPES[DTYPE].itemsize, s.nodes_of.count(n)).count,
                                   warmup=timers[n][1], timer=timers[n][0], batch=timers[n][2],
                                   wrong=wrong[("node", n)], check_scope="node", check_nodes=str(n)))
        point += 1
    for pair, rep_times in paths.items():
        node = s.nodes_of[pair[0]]
        _row(emit, point, np.concatenate(rep_times) * 1e6, dict(
            common, collective="send_recv", op="none", world_size=2, nodes=1, count=size // DTYPES[DTYPE].itemsize,
            warmup=1, timer="python", batch=batches[("path", *pair)], wrong=wrong[("path", pair)], check_scope="path",
            check_nodes=str(node),
            check_ranks=f"{pair[0]}-{pair[1]}"))
        point += 1
    for pair, rep_times in links.items():
        us = np.concatenate(rep_times) * 1e6
        _row(emit, point, us, dict(common, collective="send_recv", op="none", world_size=2, nodes=2,
                                   count=size // DTYPES[DTYPE].itemsize, warmup=1, timer="python",
                                   batch=batches[("link", *pair)], wrong=wrong[("link", pair)], check_scope="link",
                                   check_nodes=f"{pair[0]}-{pair[1]}"))
        point += 1
    _row(emit, point, cluster.samples_s * 1e6, dict(
        common, collective="all_reduce", op="sum", world_size=s.world, nodes=len(set(s.nodes_of)),
        count=coll.counts(size, DTYPES[DTYPE].itemsize, s.world).count, warmup=cluster.warmup, timer=cluster.timer,
        batch=cluster.batch, wrong=cluster.wrong, check_scope="cluster", check_nodes="all"))
    emit("check", repetitions=reps, seconds=round(seconds, 2),
         decided=_decided(spec, links, intra, paths, dict(enumerate(s.nodes_of)), size))


def _row(emit, point: int, us: np.ndarray, fields: dict) -> None:
    """One row and its samples (µs per call, or per message each way); iterations: the calls timed."""
    seconds = np.asarray(us) * 1e-6
    send_point(emit, point, build_row(point=point, **summarize(seconds), iterations=len(seconds) * fields["batch"],
                                      **fields), seconds)
