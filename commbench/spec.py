"""SweepSpec: everything one `commbench run` measures, validated before anything starts.

All user input is checked here and reported as one `InputError` line naming the problem and the
accepted values. The spec travels to the ranks as JSON, so it holds plain data only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field

from commbench import plugins, split
from commbench.dtypes import DTYPE_ALIASES, DTYPES, OPS
from commbench.errors import InputError
from commbench.algorithms import ALGORITHMS as OWN_ALGORITHMS
from commbench.library_calls import HAN, LIBRARY_CALLS
from commbench.collectives import COLLECTIVES, peer_traffic
from commbench.collectives.peer_traffic import PeerTraffic
from commbench.kernels.abi import MAX_CHANNELS
from commbench.timers import TIMER_CHOICES
from commbench.backends import emulated_launcher
from commbench.options import (BACKEND_REGISTRY, DEFAULT_NPROCS, DEVICES, LAUNCHERS, MAX_DELAY_FRACTION, MAX_ITERS,
                               MAX_LABEL_CHARS, MAX_NPROCS, MAX_POINTS, MAX_SIZE_BYTES, MODES, PLACEMENTS,
                               RING_ORDERS, SPEC_DEFAULTS, default_backend)
# the options' text, read (commbench.spec_text); importable from here too, where SweepSpec's users find them
from commbench.spec_text import (_check_size_count, _parse_sizes, collective_aliases, format_size, parse_size,  # noqa: F401
                                 resolve_names, size_range, split_list)

_EMULATE_RE = re.compile(r"^\s*(\d{1,6})\s*x\s*(\d{1,6})\s*$", re.IGNORECASE)
_RATE_RE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", re.IGNORECASE)
MAX_EMULATED_RANKS = 64

_D = SPEC_DEFAULTS  # the option table's defaults (commbench.options)
# fields newer than the ranks a spec may reach (ab's sides of older builds): written only when set (to_json)
WHEN_SET = ("inject_delay", "node_link_rate", "check", "check_peers", "check_budget", "spread", "matrix", "matrix_scale",
            "peer_bytes", "split")
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


@dataclass
class SweepSpec:
    """One sweep: the cross product collectives x backends x algorithms x dtypes x ops x modes x sizes."""

    collectives: list[str] = field(default_factory=lambda: split_list(_D["collective"]))
    backends: list[str] = field(default_factory=lambda: ["auto"])  # validate() resolves "auto"
    algorithms: list[str] = field(default_factory=lambda: split_list(_D["algorithm"]))
    sizes: list[int] = field(default_factory=lambda: size_range(
        parse_size(_D["min_bytes"]), parse_size(_D["max_bytes"]), _D["step_factor"]))
    dtypes: list[str] = field(default_factory=lambda: split_list(_D["dtype"]))
    ops: list[str] = field(default_factory=lambda: split_list(_D["op"]))
    in_place: list[bool] = field(default_factory=lambda: list(MODES[_D["mode"]]))  # the CLI's: both
    nprocs: int = DEFAULT_NPROCS
    launcher: str = _D["launcher"]
    device: str = _D["device"]
    warmup: int = _D["warmup"]
    iters: int | None = _D["iters"]  # fixed count; None: adapt to min_time
    min_time: float = _D["min_time"]  # seconds of timed iterations per point when iters is None
    min_iters: int = 5
    max_iters: int = _D["max_iters"]
    batch: int | None = _D["batch"]  # calls per timing sample; None: automatic (samples >= 100 us)
    timeout: float | None = _D["timeout"]  # seconds per point; None: scales with size (point_timeout)
    timer: str = _D["timer"]  # the timed loop: auto (the call's own: C, CUDA graph) or python (commbench.timers)
    graph: bool = _D["graph"]  # --device cuda: NCCL's calls timed as a replayed CUDA graph where torch captures them
    label: str = _D["label"]
    run_id: str = ""
    out_dir: str = ""
    ranks_per_node: int | None = _D["ranks_per_node"]
    ring_order: str = _D["ring_order"]  # "topology": the older spelling of algorithm ring_topology
    emulate: str | None = _D["emulate"]  # "NODESxRANKS": an emulated cluster on this machine (commbench.run.emulate)
    link_rate: str = _D["link_rate"]  # each emulated node's link, in tc's units
    node_link_rate: str | None = _D["node_link_rate"]  # "NODE=RATE,...": emulated nodes with a link of their own rate
    placement: str = _D["placement"]  # emulated ranks: node by node, or round-robin over the nodes
    power: bool = _D["power"]  # GPU power and energy per point (commbench.machine.power)
    nccl_tuning: bool = _D["nccl_tuning"]  # NCCL's algorithm/protocol per point, from rank 0's log (rank.nccl_log)
    segment_bytes: int = parse_size(_D["segment_bytes"])  # pipelining unit of commbench's own algorithms
    channels: int | None = _D["channels"]  # channels of the kernels per call; None: by size (commbench.kernels.abi)
    root: int = _D["root"]  # where broadcast, reduce, gather and scatter start or end (Counts.root)
    inject_delay: str | None = _D["inject_delay"]  # "RANK=FRACTION,...": ranks made late on purpose (delays())
    oversubscribe: bool = _D["oversubscribe"]  # more ranks on this machine than its cores allow (commbench.run.launch)
    done_points: list[int] = field(default_factory=list)  # measured before (--resume): not run again
    check: bool = False  # `commbench check`: the ranks measure the fabric (commbench.rank.fabric), not a sweep
    check_peers: int | None = None  # check: each node meets this many others (sampled), None: every other
    check_budget: float = 150.0  # check: seconds of repetitions before verdicts still undecided are given
    # the uneven all-to-all's traffic (commbench.collectives.peer_traffic), set where a run measures it:
    spread: float | None = _D["spread"]  # generated, nccl-tests' spread
    matrix: str | None = _D["matrix"]  # or read from this matrix file (as given, for the record) ...
    matrix_scale: float | None = _D["matrix_scale"]  # ... scaled by this
    peer_bytes: list[list[int]] | None = None  # ... into these bytes [i][j] from rank i to j, what the ranks use
    split: str | None = _D["split"]  # groups that run each point at once (commbench.split), as split.Split.text

    def point_timeout(self, size_bytes: int) -> float:
        """Seconds one point may take: --timeout, or 120 s plus 1 s per 10 MB of buffer."""
        return self.timeout if self.timeout is not None else 120.0 + size_bytes / 1e7

    def validate(self) -> "SweepSpec":
        plugins.check()  # a plugin that failed to import would show as an unknown name below
        self.collectives = resolve_names("collective", self.collectives, COLLECTIVES, collective_aliases())
        self.backends = resolve_names("backend", [default_backend() if b.strip().lower() == "auto" else b
                                            for b in split_list(self.backends)], BACKEND_REGISTRY)
        self.algorithms = resolve_names("algorithm", self.algorithms, (*LIBRARY_CALLS, *OWN_ALGORITHMS))
        self.dtypes = resolve_names("dtype", self.dtypes, DTYPES, DTYPE_ALIASES)
        self.ops = resolve_names("op", self.ops, OPS)
        if self.launcher not in LAUNCHERS:
            raise InputError(f"unknown launcher {self.launcher!r} (accepted: {', '.join(LAUNCHERS)})")
        if self.device not in DEVICES:
            raise InputError(f"unknown device {self.device!r} (accepted: {', '.join(DEVICES)})")
        for b in self.backends:
            devices = BACKEND_REGISTRY[b].devices
            if self.device not in devices:
                raise InputError(f"backend {b!r} cannot run on device {self.device!r} (it runs on: {', '.join(devices)})")
        if HAN in self.algorithms and "mpi" not in self.backends:
            raise InputError(f"-a {HAN} is Open MPI's coll/han: it needs --backend mpi")
        for b in self.backends:
            if (BACKEND_REGISTRY[b].cuda_peer_only and self.device == "cuda"
                    and all(a in LIBRARY_CALLS or OWN_ALGORITHMS[a].sends_messages for a in self.algorithms)):
                raise InputError(f"{b} with --device cuda runs the peer algorithms only: add -a peer_oneshot,peer_twoshot")
        self._validate_sizes()
        if self.nprocs < 1:
            raise InputError(f"invalid number of processes {self.nprocs}: it must be at least 1")
        if self.nprocs > MAX_NPROCS:
            raise InputError(f"-n {self.nprocs} is more ranks than commbench starts (at most {MAX_NPROCS})")
        self._validate_split()
        if self.warmup < 0:
            raise InputError(f"invalid warm-up count {self.warmup}: it must be 0 or more")
        if self.iters is not None and self.iters < 1:
            raise InputError(f"invalid iteration count {self.iters}: it must be at least 1")
        if not (self.min_time > 0 and math.isfinite(self.min_time)):
            raise InputError(f"invalid --min-time {self.min_time}: it must be a positive number of seconds")
        if not 1 <= self.min_iters <= self.max_iters:
            raise InputError(f"invalid iteration bounds {self.min_iters}..{self.max_iters}")
        if self.batch is not None and self.batch < 1:
            raise InputError(f"invalid --batch {self.batch}: it must be at least 1")
        if self.batch is not None and self.iters is not None and self.batch > self.iters:
            raise InputError(f"--batch {self.batch} asks for more calls per sample than --iters {self.iters} times in all: "
                             "give --batch at most --iters")
        for flag, value in (("--warmup", self.warmup), ("--iters", self.iters), ("--max-iters", self.max_iters),
                            ("--batch", self.batch)):
            if value is not None and value > MAX_ITERS:
                raise InputError(f"{flag} {value} is more than {MAX_ITERS}, the most calls per point")
        check_label(self.label)
        if self.timeout is not None and not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise InputError(f"invalid timeout {self.timeout}: it must be a positive number of seconds")
        if self.timer not in TIMER_CHOICES:
            raise InputError(f"unknown timer {self.timer!r} (accepted: {', '.join(TIMER_CHOICES)})")
        if self.ranks_per_node is not None and not 1 <= self.ranks_per_node <= max(self.nprocs, 1):
            raise InputError(f"invalid --ranks-per-node {self.ranks_per_node}: it must be from 1 to the run's "
                             f"{self.nprocs} ranks")
        ranks = max(self.group_size(), 1)
        if self.root < 0 or self.root >= ranks:
            where = f"of each group, 0 to {ranks - 1} (--split {self.split})" if self.split else f"of the run, 0 to {ranks - 1}"
            raise InputError(f"invalid --root {self.root}: a rank {where} ({ranks} ranks)")
        if self.channels is not None and not 1 <= self.channels <= MAX_CHANNELS:
            raise InputError(f"invalid --channels {self.channels}: it must be 1 to {MAX_CHANNELS}")
        if self.segment_bytes < 1:
            raise InputError(f"invalid --segment-bytes {self.segment_bytes}: it must be at least 1")
        if self.ring_order not in RING_ORDERS:
            raise InputError(f"unknown ring order {self.ring_order!r} (accepted: {', '.join(RING_ORDERS)})")
        if not self.in_place:
            raise InputError("no buffer mode chosen (in-place and/or out-of-place)")
        for c in self.collectives:
            if not self.modes_of(c):
                raise InputError(f"{c} has no in-place form (nccl-tests has none either): measure it out of place")
        if self.ring_order == "topology" and "ring" in self.algorithms:
            self.algorithms = list(dict.fromkeys(a if a != "ring" else "ring_topology" for a in self.algorithms))
        if self.nccl_tuning and "nccl" not in self.backends:
            raise InputError("--nccl-tuning reads NCCL's log: it needs --backend nccl")
        self._validate_traffic()
        self._validate_emulation()
        self.delays()
        if self.check:
            self._validate_check()
        points = self.point_count()
        if points > MAX_POINTS:
            raise InputError(f"{points} points (sizes x collectives x backends x algorithms x dtypes x ops x "
                             f"buffer modes) is more than a run takes (at most {MAX_POINTS}): split it into several runs")
        return self

    def _validate_check(self) -> None:
        layout = self.emulated_layout()
        if layout is not None and layout[0] < 2:
            raise InputError(f"check measures the links between nodes: --emulate {self.emulate} has one node "
                             "(give 2 or more)")
        if self.nprocs < 2:
            raise InputError(f"check measures the links between nodes: -n {self.nprocs} is one rank")
        if len(self.sizes) != 1:
            raise InputError("check measures one message size (--size)")
        if self.check_peers is not None and self.check_peers < 1:
            raise InputError(f"invalid --peers {self.check_peers}: at least 1")
        if not (self.check_budget > 0 and math.isfinite(self.check_budget)):
            raise InputError(f"invalid --budget {self.check_budget}: a positive number of seconds")
        if self.inject_delay:
            raise InputError("--inject-delay rehearses a straggler of `commbench run`; check judges links and nodes")

    def delays(self) -> dict[int, float]:
        """--inject-delay as {rank: fraction of a call's time busy-waited before each timed call}."""
        if not self.inject_delay:
            return {}
        out: dict[int, float] = {}
        for item in split_list(self.inject_delay):
            rank, _, fraction = item.partition("=")
            try:
                r, f = int(rank), float(fraction)
            except ValueError:
                raise InputError(f"invalid --inject-delay {item[:40]!r} (expected RANK=FRACTION, e.g. 1=0.3)") from None
            if not 0 <= r < max(self.nprocs, 1):
                raise InputError(f"invalid --inject-delay {item[:40]!r}: rank {r} is not a rank of the run "
                                 f"(0 to {max(self.nprocs, 1) - 1})")
            if not (0 < f <= MAX_DELAY_FRACTION):
                raise InputError(f"invalid --inject-delay {item[:40]!r}: the fraction must be above 0 and at most "
                                 f"{MAX_DELAY_FRACTION:g}")
            if r in out:
                raise InputError(f"--inject-delay names rank {r} twice")
            out[r] = f
        return out

    def ops_of(self, collective: str) -> list:
        """The ops a collective runs with: every --op where it reduces, else none ([None])."""
        return list(self.ops) if COLLECTIVES[collective].reduces else [None]

    def modes_of(self, collective: str) -> list[bool]:
        """The buffer modes (in_place values) a collective runs in: the run's, but in place only where it has an
        in-place form."""
        return [m for m in self.in_place if not m or COLLECTIVES[collective].in_place_form]

    def all_modes(self) -> dict[str, list[bool]]:
        """modes_of every collective of the run."""
        return {c: self.modes_of(c) for c in self.collectives}

    def point_count(self) -> int:
        """The points of the run (commbench.plan.build_plan's, counted without building them: a huge request is
        refused before it is laid out): ops only where a collective reduces, in place only where it can."""
        per_collective = sum(len(self.ops_of(c)) * len(self.modes_of(c)) for c in self.collectives)
        return per_collective * math.prod(map(len, (self.sizes, self.backends, self.algorithms, self.dtypes)))

    def peer_traffic(self) -> PeerTraffic | None:
        """The uneven all-to-all's traffic (validate() set it where the run measures one), else None."""
        if self.peer_bytes is not None:
            return PeerTraffic(matrix=tuple(map(tuple, self.peer_bytes)))
        return None if self.spread is None else PeerTraffic(spread=self.spread)

    def groups(self) -> list[list[int]]:
        """The groups of ranks a point runs on at once (--split), each its world ranks; one of every rank without."""
        return [list(range(self.nprocs))] if not self.split else split.parse(self.split, self.nprocs).groups(self.nprocs)

    def group_size(self) -> int:
        """The ranks one point's collective runs over: a group's (--split), else the run's."""
        return len(self.groups()[0])

    def _validate_split(self) -> None:
        if self.split is None:
            return
        self.split = split.parse(self.split, self.nprocs).text
        for a in self.algorithms:
            if a == HAN or (a in OWN_ALGORITHMS and not OWN_ALGORITHMS[a].sends_messages):
                raise InputError(f"--split runs the libraries' calls and the message-passing algorithms on each group: "
                                 f"not {a} (its node's shared memory or its own communicator are the world's)")
        if self.check:
            raise InputError("check measures every link and node of the world: it takes no --split")

    def _validate_traffic(self) -> None:
        uneven = [c for c in self.collectives if COLLECTIVES[c].takes_traffic]
        if not uneven:
            given = [f for f, v in (("--spread", self.spread), ("--matrix", self.matrix),
                                    ("--matrix-scale", self.matrix_scale)) if v is not None]
            if given:
                names = ", ".join(c for c, x in COLLECTIVES.items() if x.takes_traffic)
                raise InputError(f"{given[0]} shapes the uneven all-to-all's traffic: add -c {names}")
            return
        self.spread, self.matrix, self.matrix_scale, self.peer_bytes = peer_traffic.resolve(
            self.spread, self.matrix, self.matrix_scale, self.peer_bytes, self.group_size())
        if self.peer_bytes is not None:
            size = peer_traffic.matrix_size(self.peer_bytes)
            if not 1 <= size <= MAX_SIZE_BYTES:
                raise InputError(f"the traffic matrix makes a rank send or receive {size} B: it must be 1 B to "
                                 f"{format_size(MAX_SIZE_BYTES)}")
            others = [c for c in self.collectives if not COLLECTIVES[c].takes_traffic]
            if others:
                raise InputError(f"a traffic matrix sets the size of every point of the run: measure {', '.join(uneven)} "
                                 f"in a run of its own, not beside {', '.join(others)}")
            self.sizes = [size]  # the matrix sets every block (options.OVERRIDDEN refuses -b/-e/--sizes with it)

    def _validate_sizes(self) -> None:
        """Sizes as the CLI takes them: ints, or text such as '1K' (a list, or comma text)."""
        if isinstance(self.sizes, (str, int)):
            self.sizes = [self.sizes]
        if any(isinstance(s, str) for s in self.sizes):
            self.sizes = sorted(set(_parse_sizes([p for s in self.sizes for p in split_list(str(s))])))
        if isinstance(self.segment_bytes, str):
            self.segment_bytes = parse_size(self.segment_bytes)
        if not self.sizes:
            raise InputError("no sizes given")
        _check_size_count(len(self.sizes))
        if not all(isinstance(s, int) and 1 <= s <= MAX_SIZE_BYTES for s in self.sizes):
            raise InputError(f"invalid sizes: each must be 1 B to {format_size(MAX_SIZE_BYTES)}")

    @property
    def row_placement(self) -> str:
        """What the rows' `placement` says: the emulated cluster's, "" where the nodes are real."""
        return self.placement if self.emulate else ""

    def emulated_layout(self) -> tuple[int, int] | None:
        """(nodes, ranks per node) of --emulate, or None."""
        if self.emulate is None:
            return None
        m = _EMULATE_RE.match(str(self.emulate))
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            raise InputError(f"invalid --emulate {str(self.emulate)[:40]!r} (expected NODESxRANKS, e.g. 2x2)")
        return int(m.group(1)), int(m.group(2))

    def _validate_emulation(self) -> None:
        if self.placement not in PLACEMENTS:
            raise InputError(f"unknown placement {self.placement!r} (accepted: {', '.join(PLACEMENTS)})")
        layout = self.emulated_layout()
        if layout is None:
            for name in CLUSTER[1:]:
                if getattr(self, name) != _D[name]:
                    raise InputError(f"--{name.replace('_', '-')} applies to emulated clusters only "
                                     "(add --emulate NODESxRANKS)")
            return
        nodes, per_node = layout
        if nodes * per_node > MAX_EMULATED_RANKS:
            raise InputError(f"--emulate {self.emulate} is {nodes * per_node} ranks; at most {MAX_EMULATED_RANKS}")
        if self.nprocs != nodes * per_node:
            raise InputError(f"-n {self.nprocs} does not match --emulate {self.emulate} ({nodes * per_node} ranks)")
        emulated = [b for b, d in BACKEND_REGISTRY.items() if d.emulated]
        if not set(self.backends) <= set(emulated):
            raise InputError(f"--emulate runs the {' and '.join(emulated)} backends only; got --backend "
                             f"{','.join(self.backends)}")
        worlds = {BACKEND_REGISTRY[b].world for b in self.backends}
        if len(worlds) > 1:
            raise InputError(f"--emulate starts one launcher across the nodes, and --backend {','.join(self.backends)} "
                             "needs two (mpirun for MPI, torchrun agents for torch.distributed): one run each")
        launcher = emulated_launcher(self.backends)
        if self.launcher not in ("auto", launcher):
            raise InputError(f"--emulate with --backend {','.join(self.backends)} launches with {launcher}, "
                             f"not {self.launcher!r}")
        if self.ranks_per_node is not None:
            raise InputError("--ranks-per-node and --emulate both set the node layout; give one")
        if not _RATE_RE.match(self.link_rate):
            raise InputError(f"invalid --link-rate {self.link_rate!r} (a tc rate such as 1gbit, 800mbit or 100mbps)")
        self.node_rates()

    def node_rates(self) -> dict[int, str]:
        """Each emulated node's link rate: --link-rate, or its own from --node-link-rate."""
        layout = self.emulated_layout()
        nodes = layout[0] if layout else 0
        rates = {i: self.link_rate for i in range(nodes)}
        seen = set()
        for item in split_list(self.node_link_rate) if self.node_link_rate else []:
            node, _, rate = item.partition("=")
            if not node.strip().isdigit() or not _RATE_RE.match(rate.strip()):
                raise InputError(f"invalid --node-link-rate {item[:40]!r} (expected NODE=RATE, e.g. 3=600mbit: a node "
                                 "of --emulate and a tc rate)")
            k = int(node)
            if k >= nodes:
                raise InputError(f"invalid --node-link-rate {item[:40]!r}: node {k} is not a node of --emulate "
                                 f"{self.emulate} (0 to {nodes - 1})")
            if k in seen:
                raise InputError(f"--node-link-rate names node {k} twice")
            seen.add(k)
            rates[k] = rate.strip()
        return rates

    @classmethod
    def from_options(cls, **given) -> "SweepSpec":
        """A validated spec from the text a user gives (CLI options, suite fields, by option name:
        commbench.options); what is not given takes the option table's default."""
        o = SPEC_DEFAULTS | given
        mode, sizes = o.pop("mode"), o.pop("sizes")
        if mode not in MODES:
            raise InputError(f"unknown buffer mode {mode!r} (accepted: {', '.join(MODES)})")
        lo, hi, factor = o.pop("min_bytes"), o.pop("max_bytes"), o.pop("step_factor")
        size_list = (_parse_sizes(split_list(sizes)) if sizes is not None
                     else size_range(parse_size(lo), parse_size(hi), float(factor)))
        nprocs = o.pop("nprocs")
        if nprocs is None:
            layout = cls(emulate=o.get("emulate")).emulated_layout()
            nprocs = layout[0] * layout[1] if layout else DEFAULT_NPROCS
        return cls(nprocs=nprocs, collectives=split_list(o.pop("collective")), backends=split_list(o.pop("backend")),
                   algorithms=split_list(o.pop("algorithm")), dtypes=split_list(o.pop("dtype")),
                   ops=split_list(o.pop("op")), in_place=list(MODES[mode]), sizes=sorted(set(size_list)),
                   segment_bytes=parse_size(o.pop("segment_bytes")), min_iters=max(1, min(5, o["max_iters"])),
                   out_dir=o.pop("out_dir") or "", **o).validate()

    def to_json(self) -> str:
        """The spec for the ranks: every field, but those of WHEN_SET left out at their defaults, so that
        the ranks of an older commbench (`ab --python-a`) read the spec of a run that does not use them."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        data = {k: v for k, v in dataclasses.asdict(self).items()
                if k not in WHEN_SET or v != fields[k].default}
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "SweepSpec":
        """A spec from JSON (a run's run.json, a rank's spec file): every field of its declared type
        (an int is not a bool or a text, a list holds its items' type), sizes >= 1, done points >= 0;
        an InputError naming the field. Values are checked by validate()."""
        import reprlib
        import types
        import typing

        data = json.loads(text)
        if not isinstance(data, dict):
            raise InputError("the spec is not a JSON object")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = set(data) - set(fields)
        if unknown:
            raise InputError(f"unknown spec fields: {', '.join(sorted(unknown))}")
        hints = typing.get_type_hints(cls)

        def fits(value, hint) -> bool:
            if typing.get_origin(hint) is list:
                return isinstance(value, list) and all(fits(v, typing.get_args(hint)[0]) for v in value)
            if typing.get_origin(hint) in (types.UnionType, typing.Union):
                return any(fits(value, h) for h in typing.get_args(hint))
            if hint is float:
                return isinstance(value, (int, float)) and not isinstance(value, bool)
            return isinstance(value, hint) and (hint is bool or not isinstance(value, bool))

        for name, value in data.items():
            if not fits(value, hints[name]):
                raise InputError(f"spec field {name!r} must be {fields[name].type}, not {reprlib.repr(value)}")
        for name, least in (("sizes", 1), ("done_points", 0)):
            if any(v < least for v in data.get(name, ())):
                raise InputError(f"spec field {name!r} holds {min(data[name])}: each must be at least {least}")
        return cls(**data)
