"""SweepSpec: everything one `commbench run` measures, validated before anything starts.

All user input is checked here and reported as one `InputError` line naming the problem and the
accepted values. The spec travels to the ranks as JSON, so it holds plain data only.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from dataclasses import dataclass, field

from commbench import split
from commbench.backends import registration as nccl_registration
from commbench.collectives import COLLECTIVES
from commbench.collectives.peer_traffic import PeerTraffic
from commbench.errors import InputError
from commbench.options import DEFAULT_NPROCS, MAX_DELAY_FRACTION, MODES, SPEC_DEFAULTS
# the checks (commbench.spec_checks); check_label, CLUSTER and the options' text importable from here too
from commbench.spec_checks import _RATE_RE, CLUSTER, MAX_EMULATED_RANKS, check_label, validate  # noqa: F401
from commbench.spec_text import (_check_size_count, _parse_sizes, collective_aliases, format_size, parse_size,  # noqa: F401
                                 resolve_names, size_range, split_list)

_EMULATE_RE = re.compile(r"^\s*(\d{1,6})\s*x\s*(\d{1,6})\s*$", re.IGNORECASE)

_D = SPEC_DEFAULTS  # the option table's defaults (commbench.options)
# fields newer than the ranks a spec may reach (ab's sides of older builds): written only when set (to_json)
WHEN_SET = ("inject_delay", "node_link_rate", "check", "check_peers", "check_budget", "spread", "matrix", "matrix_scale",
            "peer_bytes", "split", "registration")


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
    registration: str = _D["registration"]  # NCCL buffer registration, nccl-tests' -R (commbench.backends.registration)

    def validate(self) -> "SweepSpec":
        """Every field checked (commbench.spec_checks) and resolved to its canonical form; InputError otherwise."""
        validate(self)
        return self

    def point_timeout(self, size_bytes: int) -> float:
        """Seconds one point may take: --timeout, or 120 s plus 1 s per 10 MB of buffer."""
        return self.timeout if self.timeout is not None else 120.0 + size_bytes / 1e7

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

    def combinations(self) -> list[tuple[str, str, str, str, str | None, bool]]:
        """Every (backend, collective, algorithm, dtype, op, in_place) the run measures, each at every size, in the
        plan's order (commbench.plan.build_plan; `sweep --dry-run` lists them): ops only where a collective
        reduces, in place only where it can."""
        return [(b, c, a, d, o, m) for b, c, a, d in itertools.product(self.backends, self.collectives,
                                                                      self.algorithms, self.dtypes)
                for o, m in itertools.product(self.ops_of(c), self.modes_of(c))]

    def point_count(self) -> int:
        """The points of the run (build_plan's, counted without building them: a huge request is refused before
        it is laid out)."""
        return len(self.combinations()) * len(self.sizes)

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

    @property
    def row_registration(self) -> str:
        """What the rows' `registration` says: the NCCL registration asked for, "" where none."""
        return "" if self.registration == nccl_registration.NONE else self.registration

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
