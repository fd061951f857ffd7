"""The mix as a PARAM comms basic trace (train/comms/pt/commsTraceParser.py's format) and back."""

import dataclasses
import json
import os

import pytest
from workload_docs import TINY, config, tiny

from commbench.errors import InputError
from commbench.workload.config import Router, bundled_workloads, load_workload
from commbench.workload.mix import derive, group_ranks
from commbench.workload.param_trace import (
    from_param,
    read_param_trace,
    to_param,
    write_param_trace,
)

SMALL = {
    "ddp": lambda: config(buckets={"ddp_first_mib": 1, "ddp_mib": 1}),
    "zero2": lambda: config(parallel={"dp_mode": "zero2"}, batch={"global": 8}),
    "fsdp": lambda: config(model={"layers": 4}, parallel={"dp_mode": "fsdp_full"}),
    "hsdp": lambda: config(batch={"global": 8}, parallel={"world": 8, "dp_mode": "hsdp"}),
    "tp_sp_pp": lambda: tiny(batch={"global": 4},
                             parallel={"world": 8, "gpus_per_node": 4, "tp": 2, "pp": 2, "sp": True}),
    "moe": lambda: tiny(model=dict(TINY, experts=4, top_k=2), batch={"global": 4},
                        parallel={"world": 4, "gpus_per_node": 2, "ep": 2}),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_export_import_gives_the_same_mix(name):
    c = SMALL[name]()
    entries = derive(c)
    assert entries
    assert from_param(to_param(entries, c)) == entries
    assert from_param(json.loads(json.dumps(to_param(entries, c, rank=c.parallel.world - 1)))) == entries


@pytest.mark.parametrize("name", bundled_workloads())
def test_bundled_round_trip_through_a_file(name, tmp_path):
    c = load_workload(name)
    entries = derive(c)
    write_param_trace(to_param(entries, c, rank=3), tmp_path / "rank3.json")
    assert from_param(read_param_trace(tmp_path / "rank3.json")) == entries


def test_records_follow_params_basic_format():
    # 8 ranks: tp 2 x pp 2 x dp 2, sequence parallel; rank 0
    c = SMALL["tp_sp_pp"]()
    records = to_param(derive(c), c)
    inits = [r for r in records if r["comms"] == "init"]
    assert inits[0] == {"comms": "init", "pg_id": 0, "pg_desc": "world", "global_ranks": list(range(8)),
                        "world_size": 8, "req": -1, "gpus_per_node": 4}
    by_desc = {}
    for r in inits[1:]:
        by_desc.setdefault(r["pg_desc"], []).append(r["global_ranks"])
    assert by_desc == {"dp": [[0, 2], [1, 3], [4, 6], [5, 7]], "tp": [[0, 1], [2, 3], [4, 5], [6, 7]],
                       "pp": [[0, 4], [1, 5], [2, 6], [3, 7]]}
    pg = {r["pg_desc"]: r["pg_id"] for r in inits if 0 in r["global_ranks"]}
    calls = [r for r in records if r["comms"] != "init"]
    assert [r["req"] for r in calls] == list(range(len(calls)))
    # b·s·h = 1·4·8 = 32 elements (fp32) gathered over tp 2: 16 in, 32 out; reduce-scatter the other way
    ag = next(r for r in calls if r["comms"] == "all_gather")
    rs = next(r for r in calls if r["comms"] == "reduce_scatter" and r["markers"][0] == "tp")
    assert {k: ag[k] for k in ("in_msg_size", "out_msg_size", "dtype", "pg_id", "world_size")} == {
        "in_msg_size": 16, "out_msg_size": 32, "dtype": "float32", "pg_id": pg["tp"], "world_size": 2}
    assert (rs["in_msg_size"], rs["out_msg_size"]) == (32, 16)
    assert ag["markers"][0] == "tp" and "sequence parallelism" in ag["markers"][1]
    # pipeline: a send of b·s·h/tp = 16 elements to the next stage (rank 4), a recv from the previous one
    send = next(r for r in calls if r["comms"] == "send")
    recv = calls[calls.index(send) + 1]
    assert (send["src_rank"], send["dst_rank"], send["in_msg_size"], send["use_batch"]) == (0, 4, 16, True)
    assert (recv["comms"], recv["src_rank"], recv["dst_rank"]) == ("recv", 4, 0)
    assert sum(r["comms"] == "send" for r in calls) == 4  # 2 micro-batches, forward and backward


def test_all_to_all_is_written_as_all_to_allv_with_even_splits():
    c = SMALL["moe"]()
    a2a = [r for r in to_param(derive(c), c) if r["comms"] == "all_to_allv"]
    assert len(a2a) == 8
    # b·s·top_k·h = 64 elements over ep 2
    assert (a2a[0]["in_msg_size"], a2a[0]["in_split"], a2a[0]["out_split"]) == (64, [32, 32], [32, 32])
    assert a2a[0]["pg_id"] != 0 and a2a[0]["world_size"] == 2


def test_an_uneven_all_to_all_writes_each_ranks_row_and_column():
    from commbench.collectives.peer_traffic import PeerTraffic

    c = dataclasses.replace(SMALL["moe"](), router=Router(spread=1.0))  # (the ep entry derived as the config says)
    entries = derive(c)
    blocks = PeerTraffic(spread=1.0).peer_bytes(256, 4, 2) // 4  # 64 fp32 elements over ep 2
    assert blocks.tolist() == [[0, 64], [64, 0]]  # spread 1: nothing to itself
    for rank in range(c.parallel.world):
        a2a = [r for r in to_param(entries, c, rank=rank) if r["comms"] == "all_to_allv"]
        me = group_ranks(c, "ep", rank).index(rank)
        assert len(a2a) == 8 and a2a[0]["in_split"] == blocks[me].tolist()
        assert a2a[0]["out_split"] == blocks[:, me].tolist() and a2a[0]["in_msg_size"] == 64


def test_an_uneven_all_to_all_reads_back_as_the_even_one_of_the_ranks_bytes():
    c = dataclasses.replace(SMALL["moe"](), router=Router(spread=0.5))
    entries = derive(c)
    back = from_param(to_param(entries, c))
    [ep] = [e for e in back if e.kind == "ep"]
    sent = [r for r in to_param(entries, c) if r["comms"] == "all_to_allv"][0]["in_msg_size"]
    assert (ep.collective, ep.spread, ep.size_bytes, ep.count) == ("all_to_all", None, sent * 4, 8)
    assert [e for e in back if e.kind != "ep"] == [e for e in from_param(to_param(derive(SMALL["moe"]()),
                                                                              SMALL["moe"]())) if e.kind != "ep"]


def test_rank_picks_its_own_groups():
    c = SMALL["tp_sp_pp"]()
    records = to_param(derive(c), c, rank=5)
    ranks = {r["pg_id"]: r["global_ranks"] for r in records if r["comms"] == "init"}
    used = {tuple(ranks[r["pg_id"]]) for r in records if r["comms"] != "init"}
    assert used == {tuple(group_ranks(c, g, 5)) for g in ("tp", "dp", "pp")} == {(4, 5), (5, 7), (1, 5)}
    with pytest.raises(InputError, match="rank 8"):
        to_param(derive(c), c, rank=8)


def test_a_foreign_trace():
    records = [
        {"comms": "init", "pg_id": 0, "global_ranks": [0, 1, 2, 3], "world_size": 4},
        {"comms": "init", "pg_id": 1, "global_ranks": [0, 2], "world_size": 2},
        {"comms": "all_to_allv", "req": 0, "pg_id": 0, "in_msg_size": 100, "out_msg_size": 60,
         "in_split": [40, 20, 20, 20], "out_split": [15, 15, 15, 15], "dtype": "Int", "markers": ["## a2a ##"]},
        {"comms": "wait", "req": 0},
        {"compute": "gemm", "mm_dim": 10},
        {"comms": "AllReduce", "pg_id": 1, "in_msg_size": 10, "out_msg_size": 10, "dtype": "half"},
        {"comms": "all_gather_base", "world_size": 4, "in_msg_size": 5, "out_msg_size": 20, "dtype": "bfloat16"},
        {"comms": "allreduce", "pg_id": 1, "in_msg_size": 10, "out_msg_size": 10, "dtype": "float16"},
        {"comms": "isend", "pg_id": 0, "src_rank": 0, "dst_rank": 3, "use_batch": False, "in_msg_size": 8,
         "out_msg_size": 8, "dtype": "float"},
        {"comms": "irecv", "pg_id": 0, "src_rank": 3, "dst_rank": 0, "use_batch": False, "in_msg_size": 8,
         "out_msg_size": 8, "dtype": "float"},
    ]
    mix = from_param(records, gpus_per_node=2)
    assert [(e.kind, e.group, e.collective, e.group_size, e.ranks_per_node, e.size_bytes, e.count, e.dtype, e.note)
            for e in mix] == [
        ("other", "pg0", "all_to_all", 4, 2, 400, 1, "int32", "## a2a ##"),
        ("other", "pg1", "all_reduce", 2, 1, 20, 2, "float16", "all_reduce from a PARAM trace"),
        ("other", "world", "all_gather", 4, 2, 40, 1, "bfloat16", "all_gather from a PARAM trace"),
        ("other", "pg0", "send_recv", 2, 1, 32, 1, "float32", "send_recv from a PARAM trace"),
    ]


@pytest.mark.parametrize("records, message", [
    ({"comms": "all_reduce"}, "JSON list"),
    ([5], "record 0: expected a mapping"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"},
      {"comms": "broadcast", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 1: comms: 'broadcast'"),
    ([{"foo": 1}], "record 0: comms"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": -4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: in_msg_size"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": True, "out_msg_size": 4, "dtype": "float"}],
     "record 0: in_msg_size"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "bool"}],
     "record 0: dtype"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": 4, "out_msg_size": 5, "dtype": "float"}],
     "record 0: in_msg_size 4 and out_msg_size 5"),
    ([{"comms": "all_gather", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: in_msg_size 4 and out_msg_size 4 do not fit a all_gather of 2"),
    ([{"comms": "reduce_scatter", "world_size": 3, "in_msg_size": 4, "out_msg_size": 2, "dtype": "float"}],
     "record 0: in_msg_size 4"),
    ([{"comms": "all_reduce", "pg_id": 3, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: pg_id: 3 has no init record"),
    ([{"comms": "init", "pg_id": 1, "global_ranks": [0, 1]},
      {"comms": "all_reduce", "pg_id": 1, "world_size": 4, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 1: world_size 4"),
    ([{"comms": "init", "pg_id": 1, "global_ranks": [0, 0]}], "record 0: global_ranks"),
    ([{"comms": "init", "pg_id": 1, "global_ranks": [0]}, {"comms": "init", "pg_id": 1, "global_ranks": [1]}],
     "record 1: pg_id: 1 is created twice"),
    ([{"comms": "init", "pg_id": 1, "global_ranks": [0, 1], "world_size": 3}], "record 0: world_size 3"),
    ([{"comms": "all_reduce", "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: the group's size is unknown"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float",
       "markers": "dp"}], "record 0: markers"),
    ([{"comms": "send", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: src_rank"),
    ([{"comms": "all_reduce", "world_size": 2, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: the node layout is unknown"),
    # (a hostile probe: each was taken)
    ([{"comms": "send", "world_size": 2, "src_rank": 1, "dst_rank": 1, "in_msg_size": 4, "out_msg_size": 4,
       "dtype": "float"}], "record 0: src_rank and dst_rank are both 1: a rank does not send to itself"),
    ([{"comms": "all_reduce", "world_size": 2**40, "in_msg_size": 4, "out_msg_size": 4, "dtype": "float"}],
     "record 0: world_size: 1,099,511,627,776 ranks; at most 1,048,576"),
])
def test_bad_records_are_refused_naming_the_record(records, message):
    with pytest.raises(InputError) as exc:
        from_param(records, gpus_per_node=None if "node layout" in message else 2)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_call_of_no_data_is_left_out():
    """(a probe: an all-reduce of in_msg_size 0 showed as 0 B with a time at scale)"""
    call = {"comms": "all_reduce", "world_size": 2, "out_msg_size": 0, "dtype": "float"}
    assert from_param([dict(call, in_msg_size=0)], gpus_per_node=2) == []
    assert [e.size_bytes for e in from_param([dict(call, in_msg_size=4, out_msg_size=4)], gpus_per_node=2)] == [16]


def test_unreadable_files(tmp_path, monkeypatch):
    f = tmp_path / "t.json"
    f.write_text("[{")
    with pytest.raises(InputError, match="not JSON"):
        read_param_trace(f)
    with pytest.raises(InputError, match="cannot read .*: No such file"):
        read_param_trace(tmp_path / "missing.json")
    os.mkfifo(tmp_path / "fifo.json")  # would block forever if opened
    with pytest.raises(InputError, match="not a regular file"):
        read_param_trace(tmp_path / "fifo.json")
    with pytest.raises(InputError, match="in_msg_size: expected a whole number from 0 to 2\\*\\*50"):
        from_param([{"comms": "all_reduce", "in_msg_size": 10**400, "out_msg_size": 1, "dtype": "Float",
                     "pg_id": 0, "req": 0}])
    import commbench.workload.param_trace as pt

    monkeypatch.setattr(pt, "MAX_TRACE_BYTES", 10)
    f.write_text("[" + "1," * 10 + "1]")
    with pytest.raises(InputError, match="larger than"):
        read_param_trace(f)


def test_a_mix_too_large_to_write(monkeypatch):
    import commbench.workload.param_trace as pt

    c = SMALL["ddp"]()
    monkeypatch.setattr(pt, "MAX_RECORDS", 3)
    with pytest.raises(InputError, match="at most 3"):
        to_param(derive(c), c)


def test_a_trace_of_too_many_records_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """The count is checked on the file's objects first: json.loads would build every record of 256 MB."""
    import json as json_module

    import commbench.workload.param_trace as pt

    monkeypatch.setattr(pt, "MAX_RECORDS", 2)
    f = tmp_path / "t.json"
    f.write_text("[" + ", ".join(['{"comms": "barrier"}'] * 9) + "]")
    parsed = []
    monkeypatch.setattr(json_module, "loads", lambda *a, **k: parsed.append(1))
    with pytest.raises(InputError, match="more than 8 JSON objects, for a trace of at most 4 records"):
        read_param_trace(f)
    assert parsed == []
