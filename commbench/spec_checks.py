"""SweepSpec's checks: every field of a run's spec validated and resolved to its canonical form
(names, sizes, the groups of --split, the uneven all-to-all's traffic, the emulated cluster, check's
settings), each problem one InputError line naming it and what is accepted. SweepSpec.validate runs
them; the spec itself (commbench.spec) holds the data and what follows from it."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from commbench import plugins, split
from commbench.algorithms import ALGORITHMS as OWN_ALGORITHMS
from commbench.backends import emulated_launcher
from commbench.backends import registration as nccl_registration
from commbench.collectives import COLLECTIVES, peer_traffic
from commbench.dtypes import DTYPE_ALIASES, DTYPES, OPS
from commbench.errors import InputError
from commbench.kernels.abi import MAX_CHANNELS, check_tuning
from commbench.library_calls import HAN, LIBRARY_CALLS
from commbench.options import (BACKEND_REGISTRY, DEVICES, LAUNCHERS, MAX_ITERS, MAX_LABEL_CHARS, MAX_NPROCS, MAX_POINTS,
                               MAX_SIZE_BYTES, PLACEMENTS, RING_ORDERS, SPEC_DEFAULTS, default_backend)
from commbench.spec_text import (_check_size_count, _parse_sizes, collective_aliases, format_size, parse_size,
                                 resolve_names, split_list)
from commbench.timers import TIMER_CHOICES

if TYPE_CHECKING:
    from commbench.spec import SweepSpec

_D = SPEC_DEFAULTS  # the option table's defaults (commbench.options)
_RATE_RE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", re.IGNORECASE)
MAX_EMULATED_RANKS = 64
CLUSTER = ("emulate", "link_rate", "placement", "node_link_rate")  # the fields that say what emulated cluster a run needs


def check_label(label: str) -> None:
    """--label (run's, import's): at most MAX_LABEL_CHARS characters of UTF-8 text."""
    if len(label) > MAX_LABEL_CHARS:
        raise InputError(f"--label is {len(label)} characters long; at most {MAX_LABEL_CHARS}")
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode (C locale): no reader could read them back
        raise InputError("--label holds bytes that are not UTF-8 text (the terminal's locale could not decode "
                         "them): give it in UTF-8") from None



def validate(spec: SweepSpec) -> None:
    plugins.check()  # a plugin that failed to import would show as an unknown name below
    spec.collectives = resolve_names("collective", spec.collectives, COLLECTIVES, collective_aliases())
    spec.backends = resolve_names("backend", [default_backend() if b.strip().lower() == "auto" else b
                                        for b in split_list(spec.backends)], BACKEND_REGISTRY)
    spec.algorithms = resolve_names("algorithm", spec.algorithms, (*LIBRARY_CALLS, *OWN_ALGORITHMS))
    spec.dtypes = resolve_names("dtype", spec.dtypes, DTYPES, DTYPE_ALIASES)
    spec.ops = resolve_names("op", spec.ops, OPS)
    if spec.launcher not in LAUNCHERS:
        raise InputError(f"unknown launcher {spec.launcher!r} (accepted: {', '.join(LAUNCHERS)})")
    if spec.device not in DEVICES:
        raise InputError(f"unknown device {spec.device!r} (accepted: {', '.join(DEVICES)})")
    for b in spec.backends:
        devices = BACKEND_REGISTRY[b].devices
        if spec.device not in devices:
            raise InputError(f"backend {b!r} cannot run on device {spec.device!r} (it runs on: {', '.join(devices)})")
    if HAN in spec.algorithms and "mpi" not in spec.backends:
        raise InputError(f"-a {HAN} is Open MPI's coll/han: it needs --backend mpi")
    for b in spec.backends:
        if (BACKEND_REGISTRY[b].cuda_peer_only and spec.device == "cuda"
                and all(a in LIBRARY_CALLS or OWN_ALGORITHMS[a].sends_messages for a in spec.algorithms)):
            raise InputError(f"{b} with --device cuda runs the peer algorithms only: add -a peer_oneshot,peer_twoshot")
    check_tuning()  # the kernels' COMMBENCH_KERNEL_* variables, read in the ranks
    _sizes(spec)
    if spec.nprocs < 1:
        raise InputError(f"invalid number of processes {spec.nprocs}: it must be at least 1")
    if spec.nprocs > MAX_NPROCS:
        raise InputError(f"-n {spec.nprocs} is more ranks than commbench starts (at most {MAX_NPROCS})")
    _split(spec)
    spec.registration = nccl_registration.resolve(spec.registration)
    nccl_registration.check(spec.registration, spec.backends, spec.algorithms, LIBRARY_CALLS)
    if spec.warmup < 0:
        raise InputError(f"invalid warm-up count {spec.warmup}: it must be 0 or more")
    if spec.iters is not None and spec.iters < 1:
        raise InputError(f"invalid iteration count {spec.iters}: it must be at least 1")
    if not (spec.min_time > 0 and math.isfinite(spec.min_time)):
        raise InputError(f"invalid --min-time {spec.min_time}: it must be a positive number of seconds")
    if not 1 <= spec.min_iters <= spec.max_iters:
        raise InputError(f"invalid iteration bounds {spec.min_iters}..{spec.max_iters}")
    if spec.batch is not None and spec.batch < 1:
        raise InputError(f"invalid --batch {spec.batch}: it must be at least 1")
    if spec.batch is not None and spec.iters is not None and spec.batch > spec.iters:
        raise InputError(f"--batch {spec.batch} asks for more calls per sample than --iters {spec.iters} times in all: "
                         "give --batch at most --iters")
    for flag, value in (("--warmup", spec.warmup), ("--iters", spec.iters), ("--max-iters", spec.max_iters),
                        ("--batch", spec.batch)):
        if value is not None and value > MAX_ITERS:
            raise InputError(f"{flag} {value} is more than {MAX_ITERS}, the most calls per point")
    check_label(spec.label)
    if spec.timeout is not None and not (spec.timeout > 0 and math.isfinite(spec.timeout)):
        raise InputError(f"invalid timeout {spec.timeout}: it must be a positive number of seconds")
    if spec.timer not in TIMER_CHOICES:
        raise InputError(f"unknown timer {spec.timer!r} (accepted: {', '.join(TIMER_CHOICES)})")
    if spec.ranks_per_node is not None and not 1 <= spec.ranks_per_node <= max(spec.nprocs, 1):
        raise InputError(f"invalid --ranks-per-node {spec.ranks_per_node}: it must be from 1 to the run's "
                         f"{spec.nprocs} ranks")
    ranks = max(spec.group_size(), 1)
    if spec.root < 0 or spec.root >= ranks:
        where = f"of each group, 0 to {ranks - 1} (--split {spec.split})" if spec.split else f"of the run, 0 to {ranks - 1}"
        raise InputError(f"invalid --root {spec.root}: a rank {where} ({ranks} ranks)")
    if spec.channels is not None and not 1 <= spec.channels <= MAX_CHANNELS:
        raise InputError(f"invalid --channels {spec.channels}: it must be 1 to {MAX_CHANNELS}")
    if spec.segment_bytes < 1:
        raise InputError(f"invalid --segment-bytes {spec.segment_bytes}: it must be at least 1")
    if spec.ring_order not in RING_ORDERS:
        raise InputError(f"unknown ring order {spec.ring_order!r} (accepted: {', '.join(RING_ORDERS)})")
    if not spec.in_place:
        raise InputError("no buffer mode chosen (in-place and/or out-of-place)")
    for c in spec.collectives:
        if not spec.modes_of(c):
            raise InputError(f"{c} has no in-place form (nccl-tests has none either): measure it out of place")
    if spec.ring_order == "topology" and "ring" in spec.algorithms:
        spec.algorithms = list(dict.fromkeys(a if a != "ring" else "ring_topology" for a in spec.algorithms))
    if spec.nccl_tuning and "nccl" not in spec.backends:
        raise InputError("--nccl-tuning reads NCCL's log: it needs --backend nccl")
    _traffic(spec)
    _emulation(spec)
    spec.delays()
    if spec.check:
        _check(spec)
    points = spec.point_count()
    if points > MAX_POINTS:
        raise InputError(f"{points} points (sizes x collectives x backends x algorithms x dtypes x ops x "
                         f"buffer modes) is more than a run takes (at most {MAX_POINTS}): split it into several runs")
    return spec


def _check(spec: SweepSpec) -> None:
    layout = spec.emulated_layout()
    if layout is not None and layout[0] < 2:
        raise InputError(f"check measures the links between nodes: --emulate {spec.emulate} has one node "
                         "(give 2 or more)")
    if spec.nprocs < 2:
        raise InputError(f"check measures the links between nodes: -n {spec.nprocs} is one rank")
    if len(spec.sizes) != 1:
        raise InputError("check measures one message size (--size)")
    if spec.check_peers is not None and spec.check_peers < 1:
        raise InputError(f"invalid --peers {spec.check_peers}: at least 1")
    if not (spec.check_budget > 0 and math.isfinite(spec.check_budget)):
        raise InputError(f"invalid --budget {spec.check_budget}: a positive number of seconds")
    if spec.inject_delay:
        raise InputError("--inject-delay rehearses a straggler of `commbench run`; check judges links and nodes")


def _split(spec: SweepSpec) -> None:
    if spec.split is None:
        return
    spec.split = split.parse(spec.split, spec.nprocs).text
    for a in spec.algorithms:
        if a == HAN or (a in OWN_ALGORITHMS and not OWN_ALGORITHMS[a].sends_messages):
            raise InputError(f"--split runs the libraries' calls and the message-passing algorithms on each group: "
                             f"not {a} (its node's shared memory or its own communicator are the world's)")
    if spec.check:
        raise InputError("check measures every link and node of the world: it takes no --split")


def _traffic(spec: SweepSpec) -> None:
    uneven = [c for c in spec.collectives if COLLECTIVES[c].takes_traffic]
    if not uneven:
        given = [f for f, v in (("--spread", spec.spread), ("--matrix", spec.matrix),
                                ("--matrix-scale", spec.matrix_scale)) if v is not None]
        if given:
            names = ", ".join(c for c, x in COLLECTIVES.items() if x.takes_traffic)
            raise InputError(f"{given[0]} shapes the uneven all-to-all's traffic: add -c {names}")
        return
    spec.spread, spec.matrix, spec.matrix_scale, spec.peer_bytes = peer_traffic.resolve(
        spec.spread, spec.matrix, spec.matrix_scale, spec.peer_bytes, spec.group_size())
    if spec.peer_bytes is not None:
        size = peer_traffic.matrix_size(spec.peer_bytes)
        if not 1 <= size <= MAX_SIZE_BYTES:
            raise InputError(f"the traffic matrix makes a rank send or receive {size} B: it must be 1 B to "
                             f"{format_size(MAX_SIZE_BYTES)}")
        others = [c for c in spec.collectives if not COLLECTIVES[c].takes_traffic]
        if others:
            raise InputError(f"a traffic matrix sets the size of every point of the run: measure {', '.join(uneven)} "
                             f"in a run of its own, not beside {', '.join(others)}")
        spec.sizes = [size]  # the matrix sets every block (options.OVERRIDDEN refuses -b/-e/--sizes with it)


def _sizes(spec: SweepSpec) -> None:
    """Sizes as the CLI takes them: ints, or text such as '1K' (a list, or comma text)."""
    if isinstance(spec.sizes, (str, int)):
        spec.sizes = [spec.sizes]
    if any(isinstance(s, str) for s in spec.sizes):
        spec.sizes = sorted(set(_parse_sizes([p for s in spec.sizes for p in split_list(str(s))])))
    if isinstance(spec.segment_bytes, str):
        spec.segment_bytes = parse_size(spec.segment_bytes)
    if not spec.sizes:
        raise InputError("no sizes given")
    _check_size_count(len(spec.sizes))
    if not all(isinstance(s, int) and 1 <= s <= MAX_SIZE_BYTES for s in spec.sizes):
        raise InputError(f"invalid sizes: each must be 1 B to {format_size(MAX_SIZE_BYTES)}")


def _emulation(spec: SweepSpec) -> None:
    if spec.placement not in PLACEMENTS:
        raise InputError(f"unknown placement {spec.placement!r} (accepted: {', '.join(PLACEMENTS)})")
    layout = spec.emulated_layout()
    if layout is None:
        for name in CLUSTER[1:]:
            if getattr(spec, name) != _D[name]:
                raise InputError(f"--{name.replace('_', '-')} applies to emulated clusters only "
                                 "(add --emulate NODESxRANKS)")
        return
    nodes, per_node = layout
    if nodes * per_node > MAX_EMULATED_RANKS:
        raise InputError(f"--emulate {spec.emulate} is {nodes * per_node} ranks; at most {MAX_EMULATED_RANKS}")
    if spec.nprocs != nodes * per_node:
        raise InputError(f"-n {spec.nprocs} does not match --emulate {spec.emulate} ({nodes * per_node} ranks)")
    emulated = [b for b, d in BACKEND_REGISTRY.items() if d.emulated]
    if not set(spec.backends) <= set(emulated):
        raise InputError(f"--emulate runs the {' and '.join(emulated)} backends only; got --backend "
                         f"{','.join(spec.backends)}")
    worlds = {BACKEND_REGISTRY[b].world for b in spec.backends}
    if len(worlds) > 1:
        raise InputError(f"--emulate starts one launcher across the nodes, and --backend {','.join(spec.backends)} "
                         "needs two (mpirun for MPI, torchrun agents for torch.distributed): one run each")
    launcher = emulated_launcher(spec.backends)
    if spec.launcher not in ("auto", launcher):
        raise InputError(f"--emulate with --backend {','.join(spec.backends)} launches with {launcher}, "
                         f"not {spec.launcher!r}")
    if spec.ranks_per_node is not None:
        raise InputError("--ranks-per-node and --emulate both set the node layout; give one")
    if not _RATE_RE.match(spec.link_rate):
        raise InputError(f"invalid --link-rate {spec.link_rate!r} (a tc rate such as 1gbit, 800mbit or 100mbps)")
    spec.node_rates()
