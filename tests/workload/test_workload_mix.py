"""derive(): each dp_mode, TP with and without SP, PP and EP against the formulas' closed forms,
on configs small enough to compute by hand."""

import pytest
from workload_docs import TINY, config, tiny

from commbench.workload.mix import (
    Entry,
    bus_factor,
    bytes_by_kind,
    bytes_per_rank,
    derive,
    group_ranks,
    process_groups,
    rank_units,
    ranks_per_node,
    total_params,
)

PSI = 1_000_000  # parameters of the default document; fp32: 4 MB of gradients; 4 ranks
MB4 = 4 * PSI


def dp_bytes(entries):
    return bytes_by_kind(entries).get("dp", 0.0)


def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 4) == 1.5
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == bus_factor("all_to_all", 4) == 0.75
    assert bus_factor("send_recv", 2) == 1.0
    e = Entry("dp", "dp", "all_reduce", 8, 8, 1000, 3, "float32", "")
    assert bytes_per_rank(e) == 3 * 1000 * 2 * 7 / 8


def test_ddp_buckets_first_then_cap_then_remainder():
    # 1 MiB first bucket (262144 fp32), 1 MiB cap: 1e6 = 262144 + 2 x 262144 + 213568
    entries = derive(config(buckets={"ddp_first_mib": 1, "ddp_mib": 1}))
    assert [(e.collective, e.size_bytes, e.count) for e in entries] == [
        ("all_reduce", 1_048_576, 3), ("all_reduce", 213_568 * 4, 1)]
    assert {(e.kind, e.group, e.group_size, e.ranks_per_node, e.dtype) for e in entries} == {
        ("dp", "dp", 4, 4, "float32")}
    assert "DDP" in entries[0].note and "§7" in entries[0].note


def test_ddp_default_buckets_are_1_then_25_mib():
    entries = derive(config(model={"params": 10 * 2**20, "_replace": True}))  # 40 MiB of fp32 gradients
    assert [(e.size_bytes, e.count) for e in entries] == [(2**20, 1), (25 * 2**20, 1), (14 * 2**20, 1)]


def test_ddp_reduction_bytes_are_two_psi_n_minus_1_over_n():
    assert dp_bytes(derive(config())) == pytest.approx(2 * MB4 * 3 / 4, rel=1e-12)


@pytest.mark.parametrize("mode", ["zero1", "zero2"])
def test_zero1_and_zero2_move_ddp_volume(mode):
    entries = derive(config(parallel={"dp_mode": mode}))
    assert [(e.collective, e.size_bytes, e.count) for e in entries] == [
        ("reduce_scatter", MB4, 1), ("all_gather", MB4, 1)]
    assert dp_bytes(entries) == pytest.approx(2 * MB4 * 3 / 4, rel=1e-12)


def test_zero2_reduces_every_micro_batch_zero1_once():
    # global 12, micro 1, dp 4: 3 micro-batches per step
    z2 = derive(config(parallel={"dp_mode": "zero2"}, batch={"global": 12}))
    z1 = derive(config(parallel={"dp_mode": "zero1"}, batch={"global": 12}))
    assert [(e.collective, e.count) for e in z2] == [("reduce_scatter", 3), ("all_gather", 1)]
    assert [(e.collective, e.count) for e in z1] == [("reduce_scatter", 1), ("all_gather", 1)]


def test_zero_buckets():
    # zero_mib 1: 262144 fp32 per bucket -> 3 full buckets and 213568 (a multiple of 4 ranks)
    entries = derive(config(parallel={"dp_mode": "zero1"}, buckets={"zero_mib": 1}))
    assert [(e.collective, e.size_bytes, e.count) for e in entries] == [
        ("reduce_scatter", 2**20, 3), ("reduce_scatter", 213_568 * 4, 1),
        ("all_gather", 2**20, 3), ("all_gather", 213_568 * 4, 1)]


@pytest.mark.parametrize("mode", ["zero3", "fsdp_full"])
def test_zero3_and_fsdp_full_are_one_and_a_half_ddp(mode):
    # 4 layers: 4 FSDP units of 250000 parameters; all-gather twice (forward, backward), reduce-scatter once
    entries = derive(config(model={"layers": 4}, parallel={"dp_mode": mode}))
    assert [(e.collective, e.size_bytes, e.count) for e in entries] == [
        ("all_gather", 1_000_000, 8), ("reduce_scatter", 1_000_000, 4)]
    ddp = dp_bytes(derive(config(model={"layers": 4})))
    assert dp_bytes(entries) == pytest.approx(3 * MB4 * 3 / 4, rel=1e-12) == pytest.approx(1.5 * ddp)


def test_fsdp_full_repeats_every_micro_batch():
    entries = derive(config(model={"layers": 4}, parallel={"dp_mode": "fsdp_full"}, batch={"global": 8}))
    assert [(e.collective, e.count) for e in entries] == [("all_gather", 16), ("reduce_scatter", 8)]
    assert dp_bytes(entries) == pytest.approx(2 * 3 * MB4 * 3 / 4, rel=1e-12)


def test_fsdp_grad_op_gathers_once():
    entries = derive(config(parallel={"dp_mode": "fsdp_grad_op"}))
    assert [(e.collective, e.size_bytes, e.count) for e in entries] == [
        ("all_gather", MB4, 1), ("reduce_scatter", MB4, 1)]
    assert dp_bytes(entries) == pytest.approx(2 * MB4 * 3 / 4, rel=1e-12)


def test_hsdp_shards_in_a_node_and_all_reduces_across():
    # 8 ranks, 4 per node: shard groups of 4 (one node), replicate groups of 2 (one rank per node)
    entries = derive(config(model={"params": 800_000, "_replace": True}, batch={"global": 8},
                            parallel={"world": 8, "dp_mode": "hsdp"}))
    assert [(e.group, e.collective, e.group_size, e.ranks_per_node, e.size_bytes, e.count) for e in entries] == [
        ("dp_shard", "all_gather", 4, 4, 3_200_000, 2), ("dp_shard", "reduce_scatter", 4, 4, 3_200_000, 1),
        ("dp_replicate", "all_reduce", 2, 1, 800_000, 1)]
    assert dp_bytes(entries) == pytest.approx(3 * 3_200_000 * 3 / 4 + 2 * 800_000 / 2, rel=1e-12)


def test_padding_to_the_group():
    # 1000001 parameters on 4 ranks: gathered and scattered buffers pad to 1000004
    entries = derive(config(model={"params": 1_000_001, "_replace": True}, parallel={"dp_mode": "fsdp_full"}))
    assert {e.size_bytes for e in entries} == {1_000_004 * 4}


def test_tp_four_all_reduces_per_layer_per_micro_batch():
    # tp 2 on 2 ranks: dp 1, global 2 / micro 1 = 2 micro-batches; b·s·h = 1·4·8 bf16 = 64 B
    c = tiny(dtypes={"params": "bf16", "grads": "bf16"}, batch={"global": 2},
             parallel={"world": 2, "gpus_per_node": 2, "tp": 2})
    entries = derive(c)
    assert [(e.kind, e.collective, e.group_size, e.ranks_per_node, e.size_bytes, e.count) for e in entries] == [
        ("tp", "all_reduce", 2, 2, 64, 4 * 2 * 2)]
    assert bytes_by_kind(entries) == {"tp": pytest.approx(16 * 64 * 2 * 1 / 2)}


def test_tp_with_sp_moves_the_same_bytes():
    kw = {"dtypes": {"params": "bf16"}, "batch": {"global": 2}, "parallel": {"world": 2, "gpus_per_node": 2,
                                                                             "tp": 2}}
    plain = derive(tiny(**kw))
    kw["parallel"] = {**kw["parallel"], "sp": True}
    sp = derive(tiny(**kw))
    assert [(e.collective, e.size_bytes, e.count) for e in sp] == [("all_gather", 64, 16), ("reduce_scatter", 64, 16)]
    assert bytes_by_kind(sp)["tp"] == pytest.approx(bytes_by_kind(plain)["tp"]) == pytest.approx(1024)


def test_recompute_adds_the_forward_all_reduces():
    c = tiny(dtypes={"params": "bf16"}, batch={"global": 2},
             parallel={"world": 2, "gpus_per_node": 2, "tp": 2, "recompute": True})
    assert [(e.collective, e.count) for e in derive(c)] == [("all_reduce", 6 * 2 * 2)]


def test_pp_sends_activations_forward_and_back():
    # pp 2 x dp 2 on 4 ranks; global 8 / (micro 2 x dp 2) = 2 micro-batches; b·s·h = 2·4·8 fp32 = 256 B
    c = tiny(batch={"global": 8, "micro": 2}, parallel={"world": 4, "gpus_per_node": 2, "pp": 2})
    pp = [e for e in derive(c) if e.kind == "pp"]
    assert [(e.collective, e.group, e.group_size, e.ranks_per_node, e.size_bytes, e.count) for e in pp] == [
        ("send_recv", "pp", 2, 1, 256, 4)]  # stages are tp x dp = 2 ranks apart: the next stage is the next node
    one_node = tiny(batch={"global": 8, "micro": 2}, parallel={"world": 4, "gpus_per_node": 4, "pp": 2})
    assert [e.ranks_per_node for e in derive(one_node) if e.kind == "pp"] == [2]
    assert bytes_by_kind(pp) == {"pp": 4 * 256}


def test_pp_with_sp_sends_a_tp_share():
    c = tiny(batch={"global": 2}, parallel={"world": 4, "gpus_per_node": 4, "tp": 2, "pp": 2, "sp": True})
    assert [e.size_bytes for e in derive(c) if e.kind == "pp"] == [1 * 4 * 8 * 4 // 2]


def test_ep_all_to_alls_and_expert_data_parallelism():
    # 4 experts, top 2, every layer; ep 2 inside dp 4 (world 4): experts' dp group of 2
    moe = dict(TINY, experts=4, top_k=2)
    c = tiny(model=moe, batch={"global": 4}, parallel={"world": 4, "gpus_per_node": 2, "ep": 2})
    entries = derive(c)
    ep = [e for e in entries if e.kind == "ep"]
    # b·s·top_k·h = 1·4·2·8 = 64 fp32 = 256 B; 4 per layer x 2 layers x 1 micro-batch
    assert [(e.collective, e.group_size, e.ranks_per_node, e.size_bytes, e.count) for e in ep] == [
        ("all_to_all", 2, 2, 256, 8)]
    groups = {(e.group, e.group_size, e.ranks_per_node) for e in entries if e.kind == "dp"}
    assert groups == {("dp", 4, 2), ("edp", 2, 1)}
    dense, expert = rank_units(c)
    # per layer: dense 4h² + 8h + router h·E = 256 + 64 + 32; experts E·(2hf + f + h) = 4·552, half per rank
    assert dense == [352, 352, (16 + 4) * 8] and expert == [1104, 1104]
    edp = sum(bytes_per_rank(e) for e in entries if e.group == "edp")
    assert edp == pytest.approx(2 * 2208 * 4 * 1 / 2)


def test_a_routers_spread_sends_the_same_bytes_unevenly():
    def moe(**router):
        return tiny(model=dict(TINY, experts=4, top_k=2), batch={"global": 4},
                    parallel={"world": 4, "gpus_per_node": 2, "ep": 2}, **router)

    even, uneven = derive(moe()), derive(moe(router={"spread": 0.5}))
    ep = [e for e in uneven if e.kind == "ep"]
    assert [(e.collective, e.spread, e.group_size, e.size_bytes, e.count) for e in ep] == [
        ("all_to_allv", 0.5, 2, 256, 8)]  # the even all-to-all's size and count
    assert "spread 0.5" in ep[0].note
    assert bytes_per_rank(ep[0]) == sum(bytes_per_rank(e) for e in even if e.kind == "ep")  # nccl-tests' (n-1)/n
    assert [e for e in uneven if e.kind != "ep"] == [e for e in even if e.kind != "ep"]


def test_parameter_counts():
    gpt = tiny()
    h, f, v, s, n = 8, 32, 16, 4, 2
    assert total_params(gpt) == n * (4 * h * h + 2 * h * f + f + 9 * h) + (v + s) * h
    gpt3ish = tiny(model=dict(TINY, ffn=32))  # f = 4h: Narayanan et al.'s 12lh² + 13lh + (V+s)h
    assert total_params(gpt3ish) == 12 * n * h * h + 13 * n * h + (v + s) * h
    llama7b = tiny(model={"arch": "llama", "layers": 32, "hidden": 4096, "ffn": 11008, "heads": 32, "seq": 4096,
                          "vocab": 32000, "_replace": True})
    assert total_params(llama7b) == 6_738_415_616  # LLaMA-7B's published count
    listed = config(model={"layer_params": [10, 20, 30, 40], "hidden": 8, "seq": 4, "_replace": True},
                    parallel={"world": 4, "pp": 2})  # stages [10, 20] and [30, 40]: the average stage
    assert total_params(listed) == 100 and rank_units(listed) == ([20, 30], [])


def test_layout_megatron_order():
    c = tiny(model=dict(TINY, experts=2), batch={"global": 4},
             parallel={"world": 16, "gpus_per_node": 4, "tp": 2, "pp": 2, "ep": 2})
    # rank 5: tp rank 1, dp rank 2, stage 0
    assert group_ranks(c, "tp", 5) == [4, 5]
    assert group_ranks(c, "dp", 5) == [1, 3, 5, 7]
    assert group_ranks(c, "pp", 5) == [5, 13]
    assert group_ranks(c, "ep", 5) == [5, 7]
    assert group_ranks(c, "edp", 5) == [1, 5]
    assert ranks_per_node(group_ranks(c, "dp", 0), 4) == 2
    assert sorted(r for g in process_groups(c, "dp") for r in g) == list(range(16))
    assert len(process_groups(c, "tp")) == 8 and len(process_groups(c, "edp")) == 8


def test_entries_are_frozen():
    e = derive(config())[0]
    with pytest.raises(AttributeError):
        e.count = 2


def test_a_call_past_the_largest_size_is_refused_in_one_line():
    """(a hostile probe: hidden, ffn, seq and vocab of 10^15 each were accepted and wrote sizes of 1.4e31 B that
    `workload --trace` then could not read back)"""
    from commbench.errors import InputError

    big = lambda: dict(TINY, hidden=10**15, ffn=10**15, seq=10**15, vocab=10**15, heads=1)  # noqa: E731 (fresh)
    with pytest.raises(InputError, match=r"workload small: its dp all_gather calls would be [0-9.e+]+ B each, more "
                                         "than 1,099,511,627,776 B"):
        derive(tiny(model=big(), parallel={"dp_mode": "fsdp_full"}))
    with pytest.raises(InputError, match=r"workload small: its dp all_reduce calls of 26,214,400 B would be 2.14e\+24 "
                                         r"a step, more than 1e\+15"):
        derive(tiny(model=big()))  # (DDP's buckets: 25 MiB calls, ~10^24 of them)
    assert derive(tiny())  # (the tiny model stays far below)
