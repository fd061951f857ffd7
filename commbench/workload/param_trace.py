"""A step's mix as a PARAM comms "basic" trace, and back.

The format is the one PARAM's commsTraceReplay reads with `--trace-type basic`
(facebookresearch/param, train/comms/pt/commsTraceParser.py `_parseBasicTrace`): a JSON list of
records, one per call, in the order they are issued:

    {"comms": "init", "pg_id": 3, "pg_desc": "tp", "global_ranks": [0, 1], "world_size": 2, "req": -1}
    {"comms": "all_reduce", "req": 7, "pg_id": 3, "world_size": 2, "in_msg_size": 1048576,
     "out_msg_size": 1048576, "dtype": "bfloat16", "markers": ["tp", "<note>"]}

Sizes are element counts, not bytes: all-gather in = one rank's share, out = the whole; reduce-
scatter in = the whole, out = a share; all-to-all is written as all_to_allv (PARAM reads splits
only for that name) with even `in_split`/`out_split`, an uneven one (a router's spread) with the
rank's row and column of its traffic (commbench.collectives.peer_traffic); a send-recv is a `send` to the next stage
and a `recv` from the previous one (`src_rank`, `dst_rank`, `use_batch`). `init` records create
the process groups: every group of the job is listed (the same list in every rank's trace, as
PARAM's replay creates them on all ranks), and each call names its rank's group by `pg_id`.
`markers` (PARAM's marker stack, its per-block report) hold the traffic kind and the entry's note.
Two fields PARAM does not read: `pg_desc` (the group's name) and, on the world group's record,
`gpus_per_node`, so that an import knows how many of a group's ranks share a node.

A trace is one rank's; `to_param(..., rank=r)` writes rank r's. An imported trace's calls that
are identical (kind, group, collective, size, dtype, note) become one entry with their count. An
uneven all-to-all reads back as the even all-to-all of the rank's bytes: PARAM's splits carry no
spread, and one rank's row and column are not the job's matrix.
"""

from __future__ import annotations

import json
from pathlib import Path

from commbench.collectives.peer_traffic import PeerTraffic
from commbench.dtypes import DTYPE_ALIASES, DTYPES
from commbench.errors import InputError
from commbench.folder.workload_files import KINDS
from commbench.workload import mix
from commbench.workload.config import MAX_WORLD, WorkloadConfig
from commbench.workload.mix import Entry

MAX_RECORDS = 500_000  # calls of one trace written (GPT-3 175B on 512 GPUs: 14,977); read: twice that, init too
MAX_SPLITS = 5_000_000  # all-to-all split sizes of one trace written
MAX_COUNT = 1 << 50  # a size or count in a trace (elements)
MAX_TRACE_BYTES = 256 * 1024 * 1024
_PARAM_DTYPE = {"int64": "long"}  # commbench's names PARAM's dtypeMap spells differently
_FROM_PARAM_DTYPE = {"byte": "uint8", "unsigned char": "uint8", "signed char": "int8"}
# PARAM's names (letters only, lower case, as its paramToCommName compares them) -> what the mix holds
_COMMS = {"allreduce": "all_reduce", "allgather": "all_gather", "allgatherbase": "all_gather",
          "reducescatter": "reduce_scatter", "reducescatterbase": "reduce_scatter", "alltoall": "all_to_all",
          "alltoallv": "all_to_all", "alltoallbase": "all_to_all", "send": "send", "isend": "send",
          "recv": "recv", "irecv": "recv", "recvanysource": "recv", "init": "init",
          "wait": None, "barrier": None, "batchisendirecv": None}  # None: no data of its own
_PARAM_NAME = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
               "all_to_all": "all_to_allv", "all_to_allv": "all_to_allv"}
_SPLIT = ("all_to_all", "all_to_allv")  # written with in_split and out_split


def check_size(entries: list[Entry]) -> None:
    """InputError where one step's trace would hold more than MAX_RECORDS calls, or more than
    MAX_SPLITS values of all-to-all splits (a list per call as long as its group)."""
    calls = sum(e.count * (2 if e.collective == "send_recv" else 1) for e in entries)
    if calls > MAX_RECORDS:
        raise InputError(f"the mix issues {calls:,} calls per step; a PARAM trace written here holds at most "
                         f"{MAX_RECORDS:,}")
    splits = sum(2 * e.count * e.group_size for e in entries if e.collective in _SPLIT)
    if splits > MAX_SPLITS:
        raise InputError(f"the mix's all-to-alls would list {splits:,} split sizes per step in a PARAM trace; "
                         f"at most {MAX_SPLITS:,} are written")


def to_param(entries: list[Entry], config: WorkloadConfig, rank: int = 0) -> list[dict]:
    """Rank `rank`'s PARAM basic trace of one step of `entries` (derived from `config`)."""
    p = config.parallel
    if not 0 <= rank < p.world:
        raise InputError(f"rank {rank} is not one of the workload's {p.world} ranks")
    check_size(entries)
    world = list(range(p.world))
    records: list[dict] = [{"comms": "init", "pg_id": 0, "pg_desc": "world", "global_ranks": world,
                            "world_size": p.world, "req": -1, "gpus_per_node": p.gpus_per_node}]
    pg_of: dict[str, int] = {}  # group name -> this rank's pg_id
    for e in entries:
        if e.group in pg_of:
            continue
        if e.group not in mix.GROUPS:
            raise InputError(f"entry {e.kind}/{e.collective}: process group {e.group!r} is not one a workload "
                             f"derives ({', '.join(mix.GROUPS)})")
        mine = mix.group_ranks(config, e.group, rank)
        for ranks in mix.process_groups(config, e.group):
            if ranks == mine:
                pg_of[e.group] = len(records)
            records.append({"comms": "init", "pg_id": len(records), "pg_desc": e.group, "global_ranks": ranks,
                            "world_size": len(ranks), "req": -1})
    req = 0
    for i, e in enumerate(entries):
        itemsize = DTYPES[e.dtype].itemsize
        elements, odd = divmod(e.size_bytes, itemsize)
        share = e.group_size if e.collective in mix.SHARED else 1
        if odd or elements % share:
            raise InputError(f"entry {i}: {e.size_bytes} B is not a whole number of {e.dtype} elements"
                             f"{f' for each of {share} ranks' if share > 1 else ''}")
        ranks = mix.group_ranks(config, e.group, rank)
        base = {"pg_id": pg_of[e.group], "world_size": len(ranks), "dtype": _PARAM_DTYPE.get(e.dtype, e.dtype),
                "markers": [e.kind, e.note]}
        if e.collective == "send_recv":
            at = ranks.index(rank)
            peers = (("send", rank, ranks[(at + 1) % len(ranks)]), ("recv", ranks[at - 1], rank))
            calls = [{"comms": c, "src_rank": s, "dst_rank": d, "use_batch": True, "in_msg_size": elements,
                      "out_msg_size": elements} for c, s, d in peers]
        else:
            sizes = {"all_gather": (elements // share, elements), "reduce_scatter": (elements, elements // share)}
            n_in, n_out = sizes.get(e.collective, (elements, elements))
            call = {"comms": _PARAM_NAME[e.collective], "in_msg_size": n_in, "out_msg_size": n_out}
            if e.collective == "all_to_all":
                call |= {"in_split": [elements // share] * share, "out_split": [elements // share] * share}
            elif e.collective == "all_to_allv":
                at = ranks.index(rank)
                blocks = PeerTraffic(spread=e.spread).peer_bytes(e.size_bytes, itemsize, share) // itemsize
                call |= {"in_msg_size": int(blocks[at].sum()), "out_msg_size": int(blocks[:, at].sum()),
                         "in_split": blocks[at].tolist(), "out_split": blocks[:, at].tolist()}
            calls = [call]
        for _ in range(e.count):
            for call in calls:
                records.append({**call, "req": req, **base})
                req += 1
    return records


# --- import ------------------------------------------------------------------------------------------

def _count(rec: dict, key: str, where: str, minimum: int = 0) -> int:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_COUNT:
        shown = f"{value!r:.40}" if not isinstance(value, int) or value.bit_length() < 128 else "a larger number"
        raise InputError(f"{where}: {key}: expected a whole number from {minimum} to 2**50, got {shown}")
    return value


def _ranks(rec: dict, where: str) -> list[int]:
    ranks = rec.get("global_ranks")
    if not isinstance(ranks, list) or not ranks or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks) or len(set(ranks)) < len(ranks):
        raise InputError(f"{where}: global_ranks: expected a list of distinct ranks, got {str(ranks)[:40]}")
    return ranks


def _dtype(rec: dict, where: str) -> str:
    value = rec.get("dtype")
    name = value.lower() if isinstance(value, str) else None
    name = _FROM_PARAM_DTYPE.get(name, DTYPE_ALIASES.get(name, name))
    if name not in DTYPES:
        raise InputError(f"{where}: dtype: {value!r:.40} is not one commbench measures ({', '.join(DTYPES)})")
    return name


def from_param(records, gpus_per_node: int | None = None, world: int | None = None) -> list[Entry]:
    """The mix of a PARAM basic trace (one rank's). `gpus_per_node` (else the trace's own, as
    to_param writes it) places a group's ranks on nodes; `world` is the size of calls that name no
    process group (else the trace's world group). Anything PARAM's format does not allow, or a call
    of a kind the mix cannot hold, is an InputError naming the record."""
    if not isinstance(records, list):
        raise InputError(f"a PARAM basic trace is a JSON list of records, not {type(records).__name__}")
    if len(records) > 2 * MAX_RECORDS:
        raise InputError(f"the trace has {len(records):,} records; at most {2 * MAX_RECORDS:,} are read")
    groups: dict[int, tuple[list[int], str]] = {}  # pg_id -> (global ranks, name)
    for i, rec in enumerate(records):  # groups first: a call may come before its group's record
        if isinstance(rec, dict) and isinstance(rec.get("comms"), str) and rec["comms"].lower() == "init":
            where = f"record {i}"
            pg = _count(rec, "pg_id", where)
            if pg in groups:
                raise InputError(f"{where}: pg_id: {pg} is created twice")
            ranks = _ranks(rec, where)
            if len(ranks) > MAX_WORLD:
                raise InputError(f"{where}: global_ranks: {len(ranks):,} ranks; at most {MAX_WORLD:,}")
            if "world_size" in rec and _count(rec, "world_size", where, 1) != len(ranks):
                raise InputError(f"{where}: world_size {rec['world_size']} is not the {len(ranks)} global_ranks")
            desc = rec.get("pg_desc", f"pg{pg}")
            groups[pg] = (ranks, desc[:64] if isinstance(desc, str) and desc else f"pg{pg}")
            if "gpus_per_node" in rec and gpus_per_node is None:
                gpus_per_node = _count(rec, "gpus_per_node", where, 1)
    if world is None:
        world = max((len(r) for r, name in groups.values() if name == "world"), default=None)
    counts: dict[tuple, int] = {}
    for i, rec in enumerate(records):
        where = f"record {i}"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a mapping, got {type(rec).__name__}")
        if "comms" not in rec and "compute" in rec:
            continue  # a compute kernel: no communication
        name = rec.get("comms")
        key = "".join(ch for ch in name.lower() if ch.isalpha()) if isinstance(name, str) else None
        if key not in _COMMS:
            raise InputError(f"{where}: comms: {str(name)[:40]!r} is not a call the mix holds (all_reduce, all_gather, "
                             "reduce_scatter, all_to_all(v), send, recv; wait, barrier and init are read too)")
        coll = _COMMS[key]
        if coll in (None, "init"):
            continue
        dtype, n_in, n_out = _dtype(rec, where), _count(rec, "in_msg_size", where), _count(rec, "out_msg_size", where)
        ranks, group = None, "world"
        if "pg_id" in rec:
            pg = _count(rec, "pg_id", where)
            if pg not in groups:
                raise InputError(f"{where}: pg_id: {pg} has no init record")
            ranks, group = groups[pg]
        if "world_size" in rec:
            n = _count(rec, "world_size", where, 1)
            if n > MAX_WORLD:
                raise InputError(f"{where}: world_size: {n:,} ranks; at most {MAX_WORLD:,}")
            if ranks is not None and n != len(ranks):
                raise InputError(f"{where}: world_size {n} is not the {len(ranks)} ranks of pg_id {rec['pg_id']}")
        elif ranks is not None or world is not None:
            n = len(ranks) if ranks is not None else world
        else:
            raise InputError(f"{where}: the group's size is unknown (no world_size, no pg_id with an init record)")
        markers = rec.get("markers") or []
        if not isinstance(markers, list) or not all(isinstance(m, str) for m in markers):
            raise InputError(f"{where}: markers: expected a list of names")
        kind = markers[0] if markers and markers[0] in KINDS else "other"
        note = markers[1] if kind != "other" and len(markers) > 1 else " / ".join(markers)
        if coll in ("send", "recv"):
            src, dst = _count(rec, "src_rank", where), _count(rec, "dst_rank", where)
            if src == dst:
                raise InputError(f"{where}: src_rank and dst_rank are both {src}: a rank does not send to itself")
            if coll == "recv":
                continue  # its bytes are the sender's; the sender's trace counts them
            pair, n = [src, dst], 2
        else:
            pair = ranks
        expect = {"all_gather": (n_out, n_in * n), "reduce_scatter": (n_in, n_out * n),
                  "all_reduce": (n_in, n_out)}.get(coll)
        if expect and expect[0] != expect[1]:
            raise InputError(f"{where}: in_msg_size {n_in} and out_msg_size {n_out} do not fit a {coll} of "
                             f"{n} ranks")
        if gpus_per_node is None:
            raise InputError(f"{where}: the node layout is unknown: give the GPUs per node")
        size = (n_out if coll == "all_gather" else n_in) * DTYPES[dtype].itemsize
        if size == 0:
            continue  # a call of no data moves nothing (PyTorch issues some): left out, as the importers leave size 0
        coll = "send_recv" if coll == "send" else coll
        rpn = mix.ranks_per_node(pair, gpus_per_node) if pair else min(n, gpus_per_node)  # no list: ranks 0..n-1
        k = (kind, group, coll, n, rpn, size, dtype,
             note or f"{coll} from a PARAM trace")
        counts[k] = counts.get(k, 0) + 1
    return [Entry(*k[:6], count, *k[6:]) for k, count in counts.items()]


def read_param_trace(path: str | Path) -> list:
    """A PARAM basic trace file's records (JSON), within MAX_TRACE_BYTES: a regular file (a FIFO or a
    device would block or never end)."""
    from commbench.folder.files import read_named

    data = read_named(path, MAX_TRACE_BYTES, "trace", f"{MAX_TRACE_BYTES >> 20} MB, the largest trace read")
    if data.count(b"{") > 4 * MAX_RECORDS:  # a record is an object (with room for nested ones): refused before
        # parsing builds them all
        raise InputError(f"{path}: more than {4 * MAX_RECORDS:,} JSON objects, for a trace of at most "
                         f"{2 * MAX_RECORDS:,} records")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not JSON ({' '.join(str(exc).split())[:200]})") from None


def write_param_trace(records: list[dict], path: str | Path) -> None:
    from commbench.folder.outputs import write_text

    write_text(path, json.dumps(records, separators=(",", ":")) + "\n", "PARAM trace")
