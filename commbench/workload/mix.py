"""One training step's collectives on one rank, derived from a workload by the published formulas.

Each Entry is one kind of call: which traffic (dp, tp, pp, ep), on which process group (its size,
and how many of its ranks share a node), of which size (nccl-tests' `size_bytes`: all-gather the
gathered total, reduce-scatter and all-to-all one rank's whole input, all-reduce and send-recv
one buffer) and how many times per step. `bytes_per_rank` turns an entry into the bytes one rank
sends per step with nccl-tests' bus factors.

Rank layout: Megatron-LM's default order tp-cp-ep-dp-pp (cp = 1; megatron/core/parallel_state.py
RankGenerator): rank = tp_rank + tp * dp_rank + tp * dp * pp_rank, so tensor parallelism is
innermost (on one node where it fits), then data parallelism, then pipeline stages; the experts'
groups split the data-parallel dimension (ep innermost in it). Nodes hold consecutive ranks.

The rank described is an average one: Ψ (parameters it holds) is the model's count over tp x pp
(the embeddings spread over the stages), its layers those of stage 0, and a pipeline rank is an
inner stage (it sends forward and backward every micro-batch). Not modelled: Megatron's tied-
embedding all-reduce between the first and last stage, the vocabulary-parallel embedding's
all-reduce, and the scalar all-reduces (loss, grad norm). Messages of all-gather, reduce-scatter
and all-to-all are padded to a multiple of the group size, as FSDP's flat parameters are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from commbench.dtypes import DTYPES
from commbench.errors import InputError
from commbench.options import MAX_SIZE_BYTES
from commbench.workload.config import MAX_COUNT, WorkloadConfig

GROUPS = ("dp", "edp", "dp_shard", "dp_replicate", "tp", "pp", "ep")
MiB = 1 << 20
SHARED = ("all_gather", "reduce_scatter", "all_to_all", "all_to_allv")  # a size of one block per rank
ZERO_BUCKET_ELEMENTS = 500_000_000  # DeepSpeed's reduce_bucket_size and allgather_bucket_size defaults


@dataclass(frozen=True)
class Entry:
    kind: str  # dp, tp, pp or ep (an imported trace may say `other`)
    group: str  # the process group: one of GROUPS (an imported trace: its pg_desc)
    collective: str
    group_size: int  # ranks in the group (send_recv: 2, the two ends)
    ranks_per_node: int  # of those, how many share the first one's node
    size_bytes: int  # nccl-tests semantics (module docstring)
    count: int  # calls per step
    dtype: str
    note: str  # the formula and its source
    spread: float | None = None  # all_to_allv: its traffic, nccl-tests' spread (commbench.collectives.peer_traffic)


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' GetBw factors: bytes a rank sends per byte of size_bytes."""
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in SHARED:
        return (n - 1) / n
    return 1.0  # send_recv


def bytes_per_rank(entry: Entry) -> float:
    """Bytes one rank sends per step for this entry: count x size x bus factor."""
    return entry.count * entry.size_bytes * bus_factor(entry.collective, entry.group_size)


def bytes_by_kind(entries: Iterable[Entry]) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in entries:
        out[e.kind] = out.get(e.kind, 0.0) + bytes_per_rank(e)
    return out


# --- layout ------------------------------------------------------------------------------------------

def hsdp_shard_size(config: WorkloadConfig) -> int:
    """HSDP shards inside a node: over the data-parallel ranks one node holds."""
    return ranks_per_node(group_ranks(config, "dp", 0), config.parallel.gpus_per_node)


def group_ranks(config: WorkloadConfig, group: str, rank: int = 0) -> list[int]:
    """The global ranks of `rank`'s process group `group` (one of GROUPS)."""
    p = config.parallel
    tp, dp = p.tp, p.dp
    tp_r, dp_r, pp_r = rank % tp, (rank // tp) % dp, rank // (tp * dp)

    def at(t: int, d: int, s: int) -> int:
        return t + tp * d + tp * dp * s

    if group == "tp":
        return [at(t, dp_r, pp_r) for t in range(tp)]
    if group == "pp":
        return [at(tp_r, dp_r, s) for s in range(p.pp)]
    dps = {"dp": (1, dp), "ep": (1, p.ep), "edp": (p.ep, dp // p.ep)}  # stride and size inside the dp dimension
    if group in ("dp_shard", "dp_replicate"):
        g = hsdp_shard_size(config)
        dps = {"dp_shard": (1, g), "dp_replicate": (g, dp // g)}
    if group not in dps:
        raise ValueError(f"unknown process group {group!r}")
    stride, size = dps[group]
    first = dp_r % stride + (dp_r - dp_r % (stride * size))
    return [at(tp_r, first + stride * j, pp_r) for j in range(size)]


def process_groups(config: WorkloadConfig, group: str) -> list[list[int]]:
    """Every group of this name in the job, each once, in the order of their lowest rank."""
    covered, out = set(), []
    for r in range(config.parallel.world):
        if r not in covered:  # groups of one name partition the ranks
            out.append(group_ranks(config, group, r))
            covered.update(out[-1])
    return out


def ranks_per_node(ranks: list[int], gpus_per_node: int) -> int:
    """How many of `ranks` share the first one's node (nodes hold consecutive ranks)."""
    node = ranks[0] // gpus_per_node
    return sum(1 for r in ranks if r // gpus_per_node == node)


def next_stage(config: WorkloadConfig, rank: int = 0) -> int:
    """The rank of `rank`'s next pipeline stage (the last stage's is the first)."""
    stages = group_ranks(config, "pp", rank)
    return stages[(stages.index(rank) + 1) % len(stages)]


# --- parameters --------------------------------------------------------------------------------------

def _layer(config: WorkloadConfig, i: int) -> tuple[int, int]:
    """A transformer layer's (dense, expert) parameters. GPT: attention 4h²+4h, MLP 2hf+f+h, two
    layer norms 4h, so 12h²+13h for f = 4h (Narayanan et al. 2021, §5.1); LLaMA: attention 4h²,
    SwiGLU MLP 3hf, two RMSNorms 2h. An MoE layer has `experts` MLPs and a router (h x experts)."""
    m = config.model
    h, f = m.hidden, m.ffn
    gpt = m.arch == "gpt"
    attn_norms = 4 * h * h + (8 * h if gpt else 2 * h)
    mlp = 2 * h * f + f + h if gpt else 3 * h * f
    if m.experts > 1 and i % m.moe_every == 0:
        return attn_norms + h * m.experts, m.experts * mlp
    return attn_norms + mlp, 0


def _outside_layers(config: WorkloadConfig) -> int:
    """Embeddings and the rest: GPT (V+s)h (tied output head, learned positions; Narayanan et al.
    2021); LLaMA 2Vh + h (untied head, final RMSNorm)."""
    m = config.model
    return (m.vocab + m.seq) * m.hidden if m.arch == "gpt" else 2 * m.vocab * m.hidden + m.hidden


def total_params(config: WorkloadConfig) -> int:
    m = config.model
    if m.form == "params":
        return m.params
    if m.form == "layer_params":
        return sum(m.layer_params)
    return sum(sum(_layer(config, i)) for i in range(m.layers)) + _outside_layers(config)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def rank_units(config: WorkloadConfig) -> tuple[list[int], list[int]]:
    """The parameters one rank holds, per FSDP unit (a layer, and one for the embeddings): dense
    ones (reduced over the dp group) and expert ones (over the experts' dp group). Their sum is Ψ."""
    m, p = config.model, config.parallel
    per_stage = m.layers // p.pp
    if m.form == "params":
        return [_ceil(m.params, m.layers * p.tp)] * per_stage, []
    if m.form == "layer_params":
        return [_ceil(sum(m.layer_params[s * per_stage + i] for s in range(p.pp)), p.pp * p.tp)
                for i in range(per_stage)], []
    layers = [_layer(config, i) for i in range(per_stage)]
    dense = [_ceil(d, p.tp) for d, _ in layers] + [_ceil(_outside_layers(config), p.tp * p.pp)]
    return dense, [_ceil(e, p.ep * p.tp) for _, e in layers if e]


# --- the mix -----------------------------------------------------------------------------------------

class _Mix:
    def __init__(self, config: WorkloadConfig):
        self.config = config
        self.counts: dict[tuple, int] = {}
        self.ranks: dict[str, list[int]] = {}  # rank 0's group of each name

    def add(self, kind: str, group: str, collective: str, elements: int, count: int, dtype: str, note: str,
            n: int | None = None, rpn: int | None = None, spread: float | None = None) -> None:
        if n is None and group not in self.ranks:
            self.ranks[group] = group_ranks(self.config, group)
        ranks = self.ranks[group] if n is None else None
        n = len(ranks) if n is None else n
        if n <= 1 or count <= 0 or elements <= 0:
            return
        if collective in SHARED:
            elements = _ceil(elements, n) * n
        size = elements * DTYPES[dtype].itemsize
        if size > MAX_SIZE_BYTES:  # (nothing measures or predicts it, and a trace of it would not read back)
            raise InputError(f"workload {self.config.name}: its {kind} {collective} calls would be {size:.3g} B each, "
                             f"more than {MAX_SIZE_BYTES:,} B (1T), the largest size commbench takes: a smaller model "
                             "or more parallelism")
        rpn = ranks_per_node(ranks, self.config.parallel.gpus_per_node) if rpn is None else rpn
        key = (kind, group, collective, n, rpn, size, dtype, note, spread)
        self.counts[key] = self.counts.get(key, 0) + count
        if self.counts[key] > MAX_COUNT:
            raise InputError(f"workload {self.config.name}: its {kind} {collective} calls of {size:,} B would be "
                             f"{self.counts[key]:.3g} a step, more than {MAX_COUNT:.0e}: a smaller model or larger "
                             "buckets")

    def entries(self) -> list[Entry]:
        return [Entry(k, g, c, n, rpn, size, count, dt, note, spread)
                for (k, g, c, n, rpn, size, dt, note, spread), count in self.counts.items()]


def _buckets(total: int, bucket: int, first: int | None = None) -> list[tuple[int, int]]:
    """(elements, count) of `total` elements in buckets: a first one, full ones, the remainder."""
    out = []
    if first is not None:
        out.append((min(first, total), 1))
        total -= min(first, total)
    out += [(bucket, total // bucket), (total % bucket, 1)]
    return out


def _data_parallel(mix: _Mix, units: list[int], group: str, what: str) -> None:
    """Gradient reduction and parameter gathering of `units` over `group` (dp, or edp for experts)."""
    c = mix.config
    mode, m, b = c.parallel.dp_mode, c.micro_batches, c.buckets
    pdt, gdt = c.dtypes.params, c.dtypes.grads
    psi = sum(units)
    if mode == "ddp":
        el = DTYPES[gdt].itemsize
        first, cap = max(1, int(b.ddp_first_mib * MiB) // el), max(1, int(b.ddp_mib * MiB) // el)
        note = (f"DDP gradient all-reduce of {what}, once per step, in buckets of {b.ddp_first_mib:g} MiB then "
                f"{b.ddp_mib:g} MiB (PyTorch DDP Reducer; 2Ψ(n-1)/n per rank, ZeRO paper §7.1)")
        for size, count in _buckets(psi, cap, first):
            mix.add("dp", group, "all_reduce", size, count, gdt, note)
    elif mode in ("zero1", "zero2"):
        bucket = f"{b.zero_mib:g} MiB" if b.zero_mib else "5e8 elements"
        reduces = m if mode == "zero2" else 1  # DeepSpeed ZeRO-2 reduces in every backward, ZeRO-1 at the step
        for dt, coll, count, note in (
                (gdt, "reduce_scatter", reduces, (f"{mode.upper()} gradient reduce-scatter of {what}, "
                                                  f"{'every micro-batch' if reduces > 1 else 'once per step'}")),
                (pdt, "all_gather", 1, f"{mode.upper()} parameter all-gather of {what} after the step")):
            cap = int(b.zero_mib * MiB) // DTYPES[dt].itemsize if b.zero_mib else ZERO_BUCKET_ELEMENTS
            note += f", in buckets of {bucket} (ZeRO paper §7.2.1: Ψ + Ψ, DDP's 2Ψ)"
            for size, n in _buckets(psi, max(1, cap)):
                mix.add("dp", group, coll, size, n * count, dt, note)
    else:
        shard = "dp_shard" if mode == "hsdp" else group
        gathers = 1 if mode == "fsdp_grad_op" else 2
        src = {"fsdp_grad_op": "FSDP SHARD_GRAD_OP: all-gather once, kept for backward; 2Ψ",
               "zero3": "ZeRO-3: all-gather in forward and again in backward, reduce-scatter; 3Ψ = 1.5x DDP, "
                        "ZeRO paper §7.2.2",
               "fsdp_full": "FSDP FULL_SHARD: all-gather in forward and again in backward, reduce-scatter; "
                            "3Ψ = 1.5x DDP (ZeRO paper §7.2.2)",
               "hsdp": "HSDP: FULL_SHARD inside a node, gradient shards all-reduced across nodes"}[mode]
        g = len(group_ranks(c, shard))
        for u in units:
            mix.add("dp", shard, "all_gather", u, gathers * m, pdt, f"{src}; parameter all-gather of {what}, "
                    f"per FSDP unit ({c.buckets.fsdp_unit}) per micro-batch")
            mix.add("dp", shard, "reduce_scatter", u, m, gdt, f"{src}; gradient reduce-scatter of {what}, "
                    f"per FSDP unit ({c.buckets.fsdp_unit}) per micro-batch")
            if mode == "hsdp":
                mix.add("dp", "dp_replicate", "all_reduce", _ceil(u, g), m, gdt, f"{src}; the gradient shard "
                        f"of {what} (1/{g} of a unit) per micro-batch")


def derive(config: WorkloadConfig) -> list[Entry]:
    """One step's collectives on one rank (module docstring: which rank, which formulas)."""
    mix = _Mix(config)
    m, p = config.model, config.parallel
    micro, mb = config.batch.micro, config.micro_batches
    act = config.dtypes.activations
    per_stage = m.layers // p.pp
    dense, expert = rank_units(config)
    _data_parallel(mix, dense, "dp", "the dense parameters" if expert else "the parameters")
    if expert:
        _data_parallel(mix, expert, "edp", "the expert parameters (their dp group: dp / ep ranks)")
    passes = 4 + (2 if p.recompute else 0)  # 2 forward + 2 backward, + 2 forward again when recomputing
    if p.tp > 1:
        bsh = micro * m.seq * m.hidden
        rec = ", +2 forward ones recomputed" if p.recompute else ""
        if p.sp:
            note = (f"Megatron TP with sequence parallelism: each of the {passes} all-reduces per layer per "
                    f"micro-batch{rec} becomes an all-gather + reduce-scatter of b·s·h (Korthikanti et al. 2022)")
            mix.add("tp", "tp", "all_gather", bsh, passes * per_stage * mb, act, note)
            mix.add("tp", "tp", "reduce_scatter", bsh, passes * per_stage * mb, act, note)
        else:
            mix.add("tp", "tp", "all_reduce", bsh, passes * per_stage * mb, act,
                    f"Megatron TP: 4 all-reduces of b·s·h per layer per micro-batch, 2 forward + 2 backward{rec} "
                    "(Shoeybi et al. 2019, §3)")
    if p.pp > 1:
        sp = p.sp and p.tp > 1
        bsh = micro * m.seq * m.hidden // (p.tp if sp else 1)
        pair = [0, next_stage(config, 0)]
        mix.add("pp", "pp", "send_recv", bsh, 2 * mb, act,
                "Megatron PP: activations b·s·h" + ("/tp (sequence-parallel)" if sp else "") +
                " sent forward and their gradients backward, per micro-batch (Narayanan et al. 2021, §2.2)",
                n=2, rpn=ranks_per_node(pair, p.gpus_per_node))
    moe_layers = sum(1 for i in range(per_stage) if m.experts > 1 and i % m.moe_every == 0)
    if p.ep > 1 and moe_layers:
        spread = config.router.spread
        uneven = "" if spread is None else (f"; the router's imbalance as nccl-tests' alltoallv spread {spread:g} "
                                            "(each rank sends the same total, each peer a different share)")
        mix.add("ep", "ep", "all_to_all" if spread is None else "all_to_allv", micro * m.seq * m.top_k * m.hidden,
                passes * moe_layers * mb, act,
                f"MoE expert parallelism: all-to-all dispatch + combine of b·s·top_k tokens x h, 2 forward + 2 "
                f"backward per MoE layer per micro-batch{', +2 recomputed' if p.recompute else ''} "
                f"(GShard, Lepikhin et al. 2020; Megatron-core alltoall dispatcher){uneven}", spread=spread)
    return mix.entries()
