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

from commbench.rank.algorithms import ALGORITHMS as OWN_ALGORITHMS
from commbench.rank.collectives import COLLECTIVES
from commbench.dtypes import DTYPES, OPS
from commbench.errors import InputError

BACKENDS = ("mpi", "gloo", "nccl")
LAUNCHERS = ("auto", "local", "mpirun", "torchrun", "srun", "none")
DEVICES = ("cpu", "cuda")
ALGORITHMS = ("native", *OWN_ALGORITHMS)  # native: the library's own call
RING_ORDERS = ("rank", "topology")
PLACEMENTS = ("block", "round-robin")
_EMULATE_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$", re.IGNORECASE)
_RATE_RE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", re.IGNORECASE)
MAX_EMULATED_RANKS = 64
# the device each backend drives; a combination outside this is refused up front
BACKEND_DEVICES = {"mpi": ("cpu",), "gloo": ("cpu", "cuda"), "nccl": ("cuda",)}  # gloo + cuda: peer algorithms

MAX_SIZES = 10_000
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8' -> 8, '64K' -> 65536, '1G' / '1GB' / '1GiB' -> 2**30 (binary, as nccl-tests)."""
    m = _SIZE_RE.match(str(text))
    if not m:
        raise InputError(f"invalid size {text!r} (expected a byte count such as 8, 64K, 4M or 1G)")
    value = int(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value < 1:
        raise InputError(f"invalid size {text!r}: sizes must be at least 1 byte")
    return value


def format_size(n: int) -> str:
    """Inverse of parse_size for display: 65536 -> '64K', 1000 -> '1000'."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SUFFIX[suffix]
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def size_range(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """Geometric sweep min, min*f, ... up to max inclusive (nccl-tests -b/-e/-f)."""
    if min_bytes > max_bytes:
        raise InputError(f"min bytes {format_size(min_bytes)} is larger than max bytes {format_size(max_bytes)}")
    if not factor > 1 or not math.isfinite(factor):
        raise InputError(f"invalid step factor {factor}: it must be greater than 1")
    if math.log(max_bytes / min_bytes) / math.log(factor) > MAX_SIZES:
        raise InputError(f"step factor {factor} gives more than {MAX_SIZES} sizes from {min_bytes} to {max_bytes} B")
    sizes, size = [], float(min_bytes)
    while round(size) <= max_bytes:
        if not sizes or round(size) != sizes[-1]:
            sizes.append(round(size))
        size *= factor
    return sizes


def split_list(text: str | list[str] | None) -> list[str]:
    """'a,b' or ['a', 'b,c'] -> ['a', 'b', 'c'] (blank items dropped)."""
    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    return [p.strip() for part in parts for p in str(part).split(",") if p.strip()]


def _choose(kind: str, values: list[str], accepted, normalize=lambda s: s.lower()) -> list[str]:
    if not values:
        raise InputError(f"no {kind} given (accepted: {', '.join(accepted)})")
    lookup = {normalize(a): a for a in accepted}
    chosen = []
    for v in values:
        key = normalize(v)
        if key not in lookup:
            raise InputError(f"unknown {kind} {v!r} (accepted: {', '.join(accepted)})")
        if lookup[key] not in chosen:
            chosen.append(lookup[key])
    return chosen


def _collective_key(s: str) -> str:
    return s.lower().replace("-", "").replace("_", "")


@dataclass
class SweepSpec:
    """One sweep: the cross product collectives x backends x algorithms x dtypes x ops x modes x sizes."""

    collectives: list[str] = field(default_factory=lambda: list(COLLECTIVES))
    backends: list[str] = field(default_factory=lambda: ["mpi"])
    algorithms: list[str] = field(default_factory=lambda: ["native"])
    sizes: list[int] = field(default_factory=lambda: size_range(8, 16 * 2**20, 2))
    dtypes: list[str] = field(default_factory=lambda: ["float32"])
    ops: list[str] = field(default_factory=lambda: ["sum"])
    in_place: list[bool] = field(default_factory=lambda: [False])
    nprocs: int = 4
    launcher: str = "auto"
    device: str = "cpu"
    warmup: int = 5
    iters: int | None = None  # fixed count; None: adapt to min_time
    min_time: float = 0.1  # seconds of timed iterations per point when iters is None
    min_iters: int = 5
    max_iters: int = 1000
    batch: int | None = None  # calls per timing sample; None: automatic (samples >= 100 us)
    timeout: float | None = None  # seconds per point; None: scales with size (see watchdog.point_timeout)
    label: str = ""
    run_id: str = ""
    out_dir: str = ""
    ranks_per_node: int | None = None
    ring_order: str = "rank"  # "topology": the older spelling of algorithm ring_topology
    emulate: str | None = None  # "NODESxRANKS": an emulated cluster on this machine (commbench.run.emulate)
    link_rate: str = "1gbit"  # each emulated node's link, in tc's units
    placement: str = "block"  # emulated ranks: node by node, or round-robin over the nodes
    power: bool = False  # GPU power and energy per point (commbench.rank.power)
    nccl_tuning: bool = False  # NCCL's algorithm/protocol per point, from rank 0's log (commbench.rank.nccl_log)
    segment_bytes: int = 1 << 20  # pipelining unit of commbench's own algorithms
    done_points: list[int] = field(default_factory=list)  # measured before (--resume): not run again

    def validate(self) -> "SweepSpec":
        self.collectives = _choose("collective", self.collectives, COLLECTIVES, _collective_key)
        self.backends = _choose("backend", self.backends, BACKENDS)
        self.algorithms = _choose("algorithm", self.algorithms, ALGORITHMS)
        self.dtypes = _choose("dtype", self.dtypes, DTYPES)
        self.ops = _choose("op", self.ops, OPS)
        if self.launcher not in LAUNCHERS:
            raise InputError(f"unknown launcher {self.launcher!r} (accepted: {', '.join(LAUNCHERS)})")
        if self.device not in DEVICES:
            raise InputError(f"unknown device {self.device!r} (accepted: {', '.join(DEVICES)})")
        for b in self.backends:
            if self.device not in BACKEND_DEVICES[b]:
                raise InputError(
                    f"backend {b!r} cannot run on device {self.device!r} "
                    f"(it runs on: {', '.join(BACKEND_DEVICES[b])})"
                )
        if ("gloo" in self.backends and self.device == "cuda"
                and all(a == "native" or OWN_ALGORITHMS[a].sends_messages for a in self.algorithms)):
            raise InputError("gloo with --device cuda runs the peer algorithms only: add -a peer_oneshot,peer_twoshot")
        if not self.sizes:
            raise InputError("no sizes given")
        if self.nprocs < 1:
            raise InputError(f"invalid number of processes {self.nprocs}: it must be at least 1")
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
        if self.timeout is not None and not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise InputError(f"invalid timeout {self.timeout}: it must be a positive number of seconds")
        if self.ranks_per_node is not None and self.ranks_per_node < 1:
            raise InputError(f"invalid --ranks-per-node {self.ranks_per_node}: it must be at least 1")
        if self.segment_bytes < 1:
            raise InputError(f"invalid --segment-bytes {self.segment_bytes}: it must be at least 1")
        if self.ring_order not in RING_ORDERS:
            raise InputError(f"unknown ring order {self.ring_order!r} (accepted: {', '.join(RING_ORDERS)})")
        if not self.in_place:
            raise InputError("no buffer mode chosen (in-place and/or out-of-place)")
        if self.ring_order == "topology" and "ring" in self.algorithms:
            self.algorithms = list(dict.fromkeys(a if a != "ring" else "ring_topology" for a in self.algorithms))
        if self.nccl_tuning and "nccl" not in self.backends:
            raise InputError("--nccl-tuning reads NCCL's log: it needs --backend nccl")
        self._validate_emulation()
        return self

    def emulated_layout(self) -> tuple[int, int] | None:
        """(nodes, ranks per node) of --emulate, or None."""
        if self.emulate is None:
            return None
        m = _EMULATE_RE.match(str(self.emulate))
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            raise InputError(f"invalid --emulate {self.emulate!r} (expected NODESxRANKS, e.g. 2x2)")
        return int(m.group(1)), int(m.group(2))

    def _validate_emulation(self) -> None:
        if self.placement not in PLACEMENTS:
            raise InputError(f"unknown placement {self.placement!r} (accepted: {', '.join(PLACEMENTS)})")
        layout = self.emulated_layout()
        if layout is None:
            if self.placement != "block":
                raise InputError("--placement applies to emulated clusters only (add --emulate NODESxRANKS)")
            return
        nodes, per_node = layout
        if nodes * per_node > MAX_EMULATED_RANKS:
            raise InputError(f"--emulate {self.emulate} is {nodes * per_node} ranks; at most {MAX_EMULATED_RANKS}")
        if self.nprocs != nodes * per_node:
            raise InputError(f"-n {self.nprocs} does not match --emulate {self.emulate} ({nodes * per_node} ranks)")
        if self.backends != ["gloo"]:
            raise InputError("--emulate runs the gloo backend only (one torchrun agent per emulated node); "
                             f"got --backend {','.join(self.backends)}")
        if self.launcher not in ("auto", "torchrun"):
            raise InputError(f"--emulate launches with torchrun, not {self.launcher!r}")
        if self.ranks_per_node is not None:
            raise InputError("--ranks-per-node and --emulate both set the node layout; give one")
        if not _RATE_RE.match(self.link_rate):
            raise InputError(f"invalid --link-rate {self.link_rate!r} (a tc rate such as 1gbit, 800mbit or 100mbps)")

    @classmethod
    def from_options(cls, *, collective: str, backend: str, algorithm: str = "native", dtype: str = "float32",
                     op: str = "sum", mode: str = "both", sizes: str | None = None, min_bytes: str = "8",
                     max_bytes: str = "16M", step_factor: float = 2.0, segment_bytes: str = "1M",
                     max_iters: int = 1000, nprocs: int | None = None, **rest) -> "SweepSpec":
        """A validated spec from the text a user gives (CLI options, suite fields)."""
        modes = {"in-place": [True], "out-of-place": [False], "both": [False, True]}
        if mode not in modes:
            raise InputError(f"unknown buffer mode {mode!r} (accepted: {', '.join(modes)})")
        size_list = ([parse_size(s) for s in split_list(sizes)] if sizes is not None
                     else size_range(parse_size(min_bytes), parse_size(max_bytes), float(step_factor)))
        if nprocs is None:
            layout = cls(emulate=rest.get("emulate")).emulated_layout()
            nprocs = layout[0] * layout[1] if layout else 4
        return cls(nprocs=nprocs, collectives=split_list(collective), backends=split_list(backend),
                   algorithms=split_list(algorithm), dtypes=split_list(dtype), ops=split_list(op),
                   in_place=modes[mode], sizes=sorted(set(size_list)), segment_bytes=parse_size(segment_bytes),
                   max_iters=max_iters, min_iters=max(1, min(5, max_iters)), **rest).validate()

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "SweepSpec":
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise InputError(f"unknown spec fields: {', '.join(sorted(unknown))}")
        return cls(**data)
