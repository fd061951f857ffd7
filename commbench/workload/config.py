"""A workload: one training job's model and parallelism, read from YAML and validated whole.

    name: llama7b-fsdp-64
    description: LLaMA-7B, FSDP full shard, 64 GPUs
    model:      {arch: llama, layers: 32, hidden: 4096, ffn: 11008, heads: 32, seq: 4096, vocab: 32000}
    dtypes:     {params: bf16, grads: bf16}          # activations: defaults to params
    batch:      {global: 256, micro: 2}               # sequences per step, per micro-batch
    parallel:   {world: 64, gpus_per_node: 8, tp: 1, pp: 1, sp: false, ep: 1,
                 dp_mode: fsdp_full, recompute: false}
    buckets:    {ddp_first_mib: 1, ddp_mib: 25, zero_mib: 500, fsdp_unit: layer}
    overlap:    {dp: 0.5, tp: 0, pp: 0, ep: 0}       # share of each kind hidden behind compute
    router:     {spread: 0.5}                        # a mixture of experts' imbalance (below)

`router.spread` makes the experts' all-to-all uneven: all_to_allv with nccl-tests' spread (0 even,
1 distance-weighted; commbench.collectives.peer_traffic); without it the all-to-all is even.
`model` is a transformer (layers, hidden, ffn, heads, seq, vocab; arch gpt or llama; experts,
top_k and moe_every for a mixture of experts), or `params` (a total; layers, hidden and seq
optional), or `layer_params` (one count per layer). The file is read within the suite reader's
limits (commbench.run.suites: size, nesting, no anchors or duplicate keys); every field is
checked, and anything wrong is one InputError line naming the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

from commbench.dtypes import DTYPE_ALIASES, DTYPES
from commbench.errors import InputError
from commbench.sources import WORKLOADS_DIR

DP_MODES = ("ddp", "zero1", "zero2", "zero3", "fsdp_full", "fsdp_grad_op", "hsdp")
ARCHS = ("gpt", "llama")
FSDP_UNITS = ("layer",)
WORKLOAD_DTYPES = ("bfloat16", "float16", "float32")
MAX_WORLD = 1 << 20  # ranks (the PARAM export lists every process group's ranks)
MAX_COUNT = 10**15  # any other count or size in the file
MAX_LAYERS = 100_000
MAX_MIB = 1 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_REQUIRED = object()


@dataclass(frozen=True)
class Model:
    layers: int
    hidden: int | None = None
    ffn: int | None = None
    heads: int | None = None
    seq: int | None = None
    vocab: int | None = None
    params: int | None = None  # the `params` form: the model's total
    layer_params: tuple[int, ...] | None = None  # the `layer_params` form: one count per layer
    arch: str = "gpt"
    experts: int = 1  # > 1: a mixture of experts (transformer form only)
    top_k: int = 1  # experts each token is routed to
    moe_every: int = 1  # layer i is an MoE layer when i % moe_every == 0 (Megatron's --moe-layer-freq)

    @property
    def form(self) -> str:
        return "params" if self.params is not None else "layer_params" if self.layer_params is not None else "transformer"


@dataclass(frozen=True)
class DTypes:
    params: str = "bfloat16"
    grads: str = "bfloat16"
    activations: str = "bfloat16"


@dataclass(frozen=True)
class Batch:
    global_batch: int  # sequences per optimizer step (`global` in the file)
    micro: int  # sequences per micro-batch on one model replica


@dataclass(frozen=True)
class Parallel:
    world: int
    gpus_per_node: int
    tp: int = 1
    pp: int = 1
    sp: bool = False
    ep: int = 1
    dp_mode: str = "ddp"
    recompute: bool = False

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp)


@dataclass(frozen=True)
class Buckets:
    ddp_first_mib: float = 1  # PyTorch DDP: the first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES)
    ddp_mib: float = 25  # PyTorch DDP: bucket_cap_mb
    zero_mib: float | None = None  # None: DeepSpeed's reduce/allgather_bucket_size, 5e8 elements
    fsdp_unit: str = "layer"


@dataclass(frozen=True)
class Overlap:
    dp: float = 0.0
    tp: float = 0.0
    pp: float = 0.0
    ep: float = 0.0


@dataclass(frozen=True)
class Router:
    spread: float | None = None  # the experts' all-to-all as all_to_allv with this spread; None: even all_to_all


@dataclass(frozen=True)
class WorkloadConfig:
    name: str
    description: str
    model: Model
    dtypes: DTypes
    batch: Batch
    parallel: Parallel
    buckets: Buckets
    overlap: Overlap
    router: Router = Router()

    @property
    def micro_batches(self) -> int:
        """Micro-batches per step on one model replica: global / (micro x dp)."""
        return self.batch.global_batch // (self.batch.micro * self.parallel.dp)


def bundled_workloads() -> list[str]:
    return sorted(f.stem for f in WORKLOADS_DIR.glob("*.yaml")) if WORKLOADS_DIR.is_dir() else []


def find_workload(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.is_file():
        return p
    bundled = WORKLOADS_DIR / f"{name_or_path}.yaml"
    if bundled.is_file():
        return bundled
    known = ", ".join(bundled_workloads()) or "none found"
    raise InputError(f"no workload {str(name_or_path)[:80]!r}: not a file, and not a bundled workload (bundled: {known})")


def load_workload(name_or_path: str | Path) -> WorkloadConfig:
    """A workload file (or a bundled workload's name), read and validated."""
    # the suite reader: size and nesting limits, plain YAML, no anchors or duplicate keys
    from commbench.run.suites import read_yaml

    path = find_workload(name_or_path)
    return parse_workload(read_yaml(path, "workload"), where=str(path), default_name=path.stem)


# --- fields --------------------------------------------------------------------------------------------

def _section(doc, key: str, where: str, accepted: tuple[str, ...], required: bool = True) -> dict:
    value = doc.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: {key}: expected a mapping of {', '.join(accepted)}"
                         f"{'' if value is None else f', got {value!r:.40}'}")
    unknown = [k for k in value if k not in accepted]
    if unknown:
        raise InputError(f"{where}: {key}.{str(unknown[0])[:40]}: unknown field (accepted: {', '.join(accepted)})")
    return value


def _int(d: dict, section: str, key: str, where: str, default=_REQUIRED, minimum: int = 1, maximum: int = MAX_COUNT):
    value = d.get(key)
    if value is None:
        if default is _REQUIRED:
            raise InputError(f"{where}: {section}.{key}: missing (a whole number >= {minimum})")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InputError(f"{where}: {section}.{key}: expected a whole number from {minimum} to {maximum}, "
                         f"got {value!r:.40}")
    return int(value)


def _number(d: dict, section: str, key: str, where: str, default, low: float, high: float, low_open=False) -> float:
    value = d.get(key)
    if value is None:
        return default
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (low < value if low_open else low <= value) or value > high:
        raise InputError(f"{where}: {section}.{key}: expected a number {'above' if low_open else 'from'} {low:g}"
                         f"{' and at most' if low_open else ' to'} {high:g}, got {value!r:.40}")
    return float(value)


def _bool(d: dict, section: str, key: str, where: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise InputError(f"{where}: {section}.{key}: expected true or false, got {value!r:.40}")
    return value


def _choice(d: dict, section: str, key: str, where: str, default: str, accepted: tuple[str, ...]) -> str:
    value = d.get(key, default)
    if not isinstance(value, str) or value not in accepted:
        raise InputError(f"{where}: {section}.{key}: {value!r:.40} is not one of {', '.join(accepted)}")
    return value


def _dtype(d: dict, key: str, where: str, default: str) -> str:
    value = d.get(key, default)
    name = DTYPE_ALIASES.get(value, value) if isinstance(value, str) else None
    if name not in WORKLOAD_DTYPES or name not in DTYPES:
        raise InputError(f"{where}: dtypes.{key}: {value!r:.40} is not one of bf16, fp16, fp32 "
                         "(or bfloat16, float16, float32)")
    return name


def _model(d: dict, where: str) -> Model:
    forms = [k for k in ("params", "layer_params") if k in d]
    if len(forms) > 1:
        raise InputError(f"{where}: model: give one of params, layer_params or the transformer fields, not both")
    layer_params = d.get("layer_params")
    if layer_params is not None:
        if not isinstance(layer_params, list) or not 1 <= len(layer_params) <= MAX_LAYERS or not all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_COUNT for v in layer_params):
            raise InputError(f"{where}: model.layer_params: expected a list of 1 to {MAX_LAYERS} positive whole numbers")
        if "layers" in d and d["layers"] != len(layer_params):
            raise InputError(f"{where}: model.layers: {d['layers']!r:.20} disagrees with the {len(layer_params)} "
                             "entries of model.layer_params")
    transformer = not forms
    if not transformer:
        for key in ("ffn", "heads", "vocab", "arch", "experts", "top_k", "moe_every"):
            if key in d:
                raise InputError(f"{where}: model.{key}: only for a transformer model (not with model.{forms[0]})")
    need = _REQUIRED if transformer else None
    layers = len(layer_params) if layer_params is not None else _int(
        d, "model", "layers", where, _REQUIRED if transformer else 1, maximum=MAX_LAYERS)
    model = Model(
        layers=layers,
        hidden=_int(d, "model", "hidden", where, need), ffn=_int(d, "model", "ffn", where, need),
        heads=_int(d, "model", "heads", where, need), seq=_int(d, "model", "seq", where, need),
        vocab=_int(d, "model", "vocab", where, need),
        params=_int(d, "model", "params", where, None),
        layer_params=tuple(int(v) for v in layer_params) if layer_params else None,
        arch=_choice(d, "model", "arch", where, "gpt", ARCHS),
        experts=_int(d, "model", "experts", where, 1, maximum=MAX_LAYERS),
        top_k=_int(d, "model", "top_k", where, 1, maximum=MAX_LAYERS),
        moe_every=_int(d, "model", "moe_every", where, 1, maximum=MAX_LAYERS))
    if model.top_k > model.experts:
        raise InputError(f"{where}: model.top_k: {model.top_k} is more than model.experts ({model.experts})")
    if transformer and model.hidden % model.heads:
        raise InputError(f"{where}: model.hidden: {model.hidden} is not a multiple of model.heads ({model.heads})")
    return model


def _check_layout(m: Model, p: Parallel, b: Batch, where: str) -> None:
    if p.world % (p.tp * p.pp):
        raise InputError(f"{where}: parallel.world: {p.world} is not a multiple of tp x pp ({p.tp} x {p.pp})")
    if p.world > p.gpus_per_node and p.world % p.gpus_per_node:
        raise InputError(f"{where}: parallel.gpus_per_node: {p.world} ranks do not fill whole nodes of "
                         f"{p.gpus_per_node}")
    if p.tp > 1 and m.heads is not None and m.heads % p.tp:
        raise InputError(f"{where}: parallel.tp: {p.tp} does not divide model.heads ({m.heads})")
    if p.ep > 1:
        if m.experts == 1:
            raise InputError(f"{where}: parallel.ep: {p.ep} needs a transformer model with model.experts > 1")
        if m.experts % p.ep:
            raise InputError(f"{where}: parallel.ep: {p.ep} does not divide model.experts ({m.experts})")
        if p.dp % p.ep:
            raise InputError(f"{where}: parallel.ep: {p.ep} does not divide the {p.dp} data-parallel ranks "
                             "(world / (tp x pp)); expert parallelism runs inside data parallelism")
        if p.dp_mode == "hsdp":
            raise InputError(f"{where}: parallel.dp_mode: hsdp with ep > 1 is not modelled")
    if (p.tp > 1 or p.pp > 1 or p.ep > 1) and (m.hidden is None or m.seq is None):
        raise InputError(f"{where}: model.hidden: hidden and seq are needed for tp, pp or ep > 1 "
                         "(activations are micro x seq x hidden)")
    if p.sp and p.tp > 1 and m.seq % p.tp:
        raise InputError(f"{where}: parallel.sp: model.seq ({m.seq}) is not a multiple of tp ({p.tp})")
    if m.layers % p.pp:
        raise InputError(f"{where}: parallel.pp: {p.pp} does not divide model.layers ({m.layers})")
    shard = min(p.dp, -(-p.gpus_per_node // p.tp))  # hsdp: the data-parallel ranks of one node
    if p.dp_mode == "hsdp" and p.dp % shard:
        raise InputError(f"{where}: parallel.dp_mode: hsdp shards over the {shard} data-parallel ranks of a node, "
                         f"which do not divide the {p.dp} data-parallel ranks")
    if b.global_batch % (b.micro * p.dp):
        raise InputError(f"{where}: batch.global: {b.global_batch} is not a multiple of micro x dp "
                         f"({b.micro} x {p.dp})")


def parse_workload(doc, where: str = "workload", default_name: str = "workload") -> WorkloadConfig:
    """A workload from its parsed YAML document; `where` starts every error message."""
    top = ("name", "description", "model", "dtypes", "batch", "parallel", "buckets", "overlap", "router")
    if not isinstance(doc, dict):
        raise InputError(f"{where}: a workload is a mapping of {', '.join(top)} (got {type(doc).__name__})")
    unknown = [k for k in doc if k not in top]
    if unknown:
        raise InputError(f"{where}: {str(unknown[0])[:40]}: unknown field (accepted: {', '.join(top)})")
    name = doc.get("name", default_name)
    name = getattr(name, "text", str(name)) if isinstance(name, int) and not isinstance(name, bool) else name
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise InputError(f"{where}: name: {str(name)[:40]!r} must be 1-64 letters, digits, '.', '_' or '-'")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise InputError(f"{where}: description: expected text")
    model = _model(_section(doc, "model", where, ("layers", "hidden", "ffn", "heads", "seq", "vocab", "params",
                                                   "layer_params", "arch", "experts", "top_k", "moe_every")), where)
    dt = _section(doc, "dtypes", where, ("params", "grads", "activations"), required=False)
    params_dtype = _dtype(dt, "params", where, "bfloat16")
    dtypes = DTypes(params_dtype, _dtype(dt, "grads", where, params_dtype), _dtype(dt, "activations", where,
                                                                                    params_dtype))
    b = _section(doc, "batch", where, ("global", "micro"))
    batch = Batch(_int(b, "batch", "global", where), _int(b, "batch", "micro", where))
    p = _section(doc, "parallel", where, ("world", "gpus_per_node", "tp", "pp", "sp", "ep", "dp_mode", "recompute"))
    parallel = Parallel(
        world=_int(p, "parallel", "world", where, maximum=MAX_WORLD),
        gpus_per_node=_int(p, "parallel", "gpus_per_node", where, maximum=MAX_WORLD),
        tp=_int(p, "parallel", "tp", where, 1, maximum=MAX_WORLD), pp=_int(p, "parallel", "pp", where, 1,
                                                                            maximum=MAX_WORLD),
        sp=_bool(p, "parallel", "sp", where, False), ep=_int(p, "parallel", "ep", where, 1, maximum=MAX_WORLD),
        dp_mode=_choice(p, "parallel", "dp_mode", where, "ddp", DP_MODES),
        recompute=_bool(p, "parallel", "recompute", where, False))
    if model.form == "params" and "layers" not in doc["model"]:
        model = dataclasses.replace(model, layers=parallel.pp)  # one FSDP unit per stage
    _check_layout(model, parallel, batch, where)
    bk = _section(doc, "buckets", where, ("ddp_first_mib", "ddp_mib", "zero_mib", "fsdp_unit"), required=False)
    buckets = Buckets(
        ddp_first_mib=_number(bk, "buckets", "ddp_first_mib", where, 1.0, 0, MAX_MIB, low_open=True),
        ddp_mib=_number(bk, "buckets", "ddp_mib", where, 25.0, 0, MAX_MIB, low_open=True),
        zero_mib=_number(bk, "buckets", "zero_mib", where, None, 0, MAX_MIB, low_open=True),
        fsdp_unit=_choice(bk, "buckets", "fsdp_unit", where, "layer", FSDP_UNITS))
    ov = _section(doc, "overlap", where, ("dp", "tp", "pp", "ep"), required=False)
    overlap = Overlap(*(_number(ov, "overlap", k, where, 0.0, 0, 1) for k in ("dp", "tp", "pp", "ep")))
    rt = _section(doc, "router", where, ("spread",), required=False)
    router = Router(_number(rt, "router", "spread", where, None, 0, 1))
    if router.spread is not None:
        check_router(model, parallel, f"{where}: router.spread")
    return WorkloadConfig(name, description, model, dtypes, batch, parallel, buckets, overlap, router)


def check_router(m: Model, p: Parallel, what: str) -> None:
    """InputError where the workload has no experts' all-to-all for a router's imbalance to shape."""
    if m.experts == 1 or p.ep == 1:
        raise InputError(f"{what}: shapes the experts' all-to-all, which this workload has not (it needs "
                         "model.experts > 1 and parallel.ep > 1)")
