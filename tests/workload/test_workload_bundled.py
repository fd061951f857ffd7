"""The bundled workloads (suites/workloads/): each loads, and derives figures computed here by hand."""

import pytest

from commbench.workload.config import load_workload
from commbench.workload.mix import bytes_by_kind, derive, rank_units, total_params


def ceil(a, b):
    return -(-a // b)


def by(entries, **match):
    return [e for e in entries if all(getattr(e, k) == v for k, v in match.items())]


def test_gpt3_175b_on_512():
    c = load_workload("gpt3_175b_512")
    h, layers, v, s = 12288, 96, 50257, 2048
    assert (c.parallel.tp, c.parallel.pp, c.parallel.dp, c.micro_batches) == (8, 8, 8, 192)
    assert total_params(c) == 12 * layers * h * h + 13 * layers * h + (v + s) * h == 174_604_234_752
    psi = 12 * ceil(12 * h * h + 13 * h, 8) + ceil((v + s) * h, 64)  # 12 layers of a stage, 1/8 each, + embeddings
    assert sum(rank_units(c)[0]) == psi == 2_728_191_168
    entries = derive(c)
    bsh = 1 * s * h * 2  # bf16
    kinds = bytes_by_kind(entries)
    # ZeRO-1: reduce-scatter + all-gather of Ψ bf16 over 8 ranks
    assert kinds["dp"] == pytest.approx(2 * psi * 2 * 7 / 8, rel=1e-12)
    # TP: (4 + 2 recomputed) all-reduces x 12 layers x 192 micro-batches of b·s·h, bus factor 2·7/8
    (tp,) = entries[-2:-1]
    assert (tp.collective, tp.size_bytes, tp.count, tp.group_size, tp.ranks_per_node) == (
        "all_reduce", bsh, 6 * 12 * 192, 8, 8)
    assert kinds["tp"] == pytest.approx(6 * 12 * 192 * bsh * 2 * 7 / 8, rel=1e-12)
    # PP: one send forward and one backward per micro-batch; the next stage is 64 ranks away: another node
    assert [(e.size_bytes, e.count, e.ranks_per_node) for e in by(entries, kind="pp")] == [(bsh, 384, 1)]
    assert kinds["pp"] == 384 * bsh
    assert {e.ranks_per_node for e in by(entries, kind="dp")} == {1}  # dp ranks are 8 apart: one per node


LLAMA_PSI = 6_738_415_616


def test_llama7b_fsdp_on_64():
    c = load_workload("llama7b_fsdp_64")
    assert total_params(c) == sum(rank_units(c)[0]) == LLAMA_PSI
    entries = derive(c)
    assert c.micro_batches == 2
    layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert [(e.collective, e.size_bytes, e.count) for e in entries] == [
        ("all_gather", layer * 2, 32 * 2 * 2), ("reduce_scatter", layer * 2, 32 * 2),
        ("all_gather", (2 * 32000 * 4096 + 4096) * 2, 2 * 2), ("reduce_scatter", (2 * 32000 * 4096 + 4096) * 2, 2)]
    # 3Ψ bf16 per micro-batch, 63/64 of it leaves each rank
    assert bytes_by_kind(entries) == {"dp": pytest.approx(2 * 3 * LLAMA_PSI * 2 * 63 / 64, rel=1e-12)}
    assert {(e.group_size, e.ranks_per_node) for e in entries} == {(64, 8)}


def test_llama7b_ddp_on_16():
    c = load_workload("llama7b_ddp_16")
    entries = derive(c)
    grad_bytes = LLAMA_PSI * 4  # fp32 gradients
    full, rest = divmod(grad_bytes - 2**20, 25 * 2**20)
    assert [(e.size_bytes, e.count, e.dtype) for e in entries] == [
        (2**20, 1, "float32"), (25 * 2**20, full, "float32"), (rest, 1, "float32")]
    assert full == 1028
    assert bytes_by_kind(entries) == {"dp": pytest.approx(2 * grad_bytes * 15 / 16, rel=1e-12)}
    assert {(e.group_size, e.ranks_per_node) for e in entries} == {(16, 8)}


def test_moe_ep8_on_64():
    c = load_workload("moe_ep8")
    h, f, e_, layers, v = 4096, 14336, 8, 16, 32000
    assert (c.parallel.dp, c.parallel.ep, c.micro_batches) == (32, 8, 8)
    dense, expert = rank_units(c)
    assert sum(dense) == layers * (4 * h * h + 2 * h + h * e_) // 2 + (2 * v * h + h) // 2
    assert sum(expert) == layers * (e_ // 8) * 3 * h * f // 2  # one expert per rank, half of it (tp 2)
    entries = derive(c)
    kinds = bytes_by_kind(entries)
    # dense gradients over 32 ranks, expert gradients over 32 / 8 = 4, DDP bf16
    assert kinds["dp"] == pytest.approx(2 * sum(dense) * 2 * 31 / 32 + 2 * sum(expert) * 2 * 3 / 4, rel=1e-12)
    # all-to-alls: b·s·top_k·h bf16, 4 per layer x 16 layers x 8 micro-batches, over 8 ranks (4 per node)
    a2a = 1 * 4096 * 2 * h * 2
    assert [(e.size_bytes, e.count, e.group_size, e.ranks_per_node) for e in by(entries, kind="ep")] == [
        (a2a, 4 * 16 * 8, 8, 4)]
    assert kinds["ep"] == pytest.approx(512 * a2a * 7 / 8, rel=1e-12)
    assert kinds["tp"] == pytest.approx(512 * 4096 * h * 2 * 2 * 1 / 2, rel=1e-12)
    assert {(e.group, e.group_size, e.ranks_per_node) for e in by(entries, kind="dp")} == {
        ("dp", 32, 4), ("edp", 4, 1)}
