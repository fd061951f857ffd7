"""Workload files: read within the suite reader's limits, every field checked, one line naming
the field for anything wrong."""

import dataclasses

import pytest
from workload_docs import TINY, config, doc

from commbench.errors import InputError
from commbench.workload.config import (
    WORKLOADS_DIR,
    bundled_workloads,
    find_workload,
    load_workload,
    parse_workload,
)


def refused(**sections) -> str:
    with pytest.raises(InputError) as exc:
        config(**sections)
    message = str(exc.value)
    assert "\n" not in message and message.startswith("test: ")
    return message


def test_defaults():
    c = config(dtypes={"params": "bf16", "_replace": True})
    assert c.dtypes.params == c.dtypes.grads == c.dtypes.activations == "bfloat16"
    p = c.parallel
    assert (p.tp, p.pp, p.ep, p.sp, p.recompute, p.dp, c.micro_batches) == (1, 1, 1, False, False, 4, 1)
    assert (c.buckets.ddp_first_mib, c.buckets.ddp_mib, c.buckets.zero_mib, c.buckets.fsdp_unit) == (1, 25, None,
                                                                                                      "layer")
    assert (c.overlap.dp, c.overlap.tp, c.overlap.pp, c.overlap.ep) == (0, 0, 0, 0)
    assert c.model.form == "params" and c.model.layers == 1  # one FSDP unit per stage
    assert config(parallel={"pp": 2}, model={"hidden": 8, "seq": 4}).model.layers == 2


def test_dtype_names_of_commbench_and_the_short_ones():
    c = config(dtypes={"params": "bfloat16", "grads": "fp32", "activations": "half"})
    assert (c.dtypes.params, c.dtypes.grads, c.dtypes.activations) == ("bfloat16", "float32", "float16")


def test_frozen():
    c = config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.parallel.tp = 2


@pytest.mark.parametrize("sections, field", [
    ({"parallel": {"tp": 0}}, "parallel.tp"),
    ({"parallel": {"tp": True}}, "parallel.tp"),
    ({"parallel": {"tp": "2"}}, "parallel.tp"),
    ({"parallel": {"tp": 3}}, "parallel.world"),
    ({"parallel": {"world": 12, "gpus_per_node": 8}}, "parallel.gpus_per_node"),
    ({"parallel": {"sp": "yes"}}, "parallel.sp"),
    ({"parallel": {"dp_mode": "zero4"}}, "parallel.dp_mode"),
    ({"parallel": {"ep": 2}}, "parallel.ep"),
    ({"router": {"spread": 0.5}}, "router.spread"),  # no experts to route to
    ({"router": {"spread": 1.5}}, "router.spread"),
    ({"router": {"imbalance": 0.5}}, "router.imbalance"),
    ({"parallel": {"world": 12, "gpus_per_node": 12, "pp": 2, "dp_mode": "hsdp"}, "batch": {"global": 6}},
     "model.hidden"),
    ({"parallel": {"world": 16, "gpus_per_node": 8, "tp": 3}}, "parallel.world"),
    ({"parallel": {"extra": 1}}, "parallel.extra"),
    ({"model": {"params": -5}}, "model.params"),
    ({"model": {"params": 1.5}}, "model.params"),
    ({"model": {"layer_params": [1, 2]}}, "model"),
    ({"model": {"layer_params": [1, 0], "_replace": True}}, "model.layer_params"),
    ({"model": {"layer_params": [1, 2], "layers": 3, "_replace": True}}, "model.layers"),
    ({"model": {"params": 10, "vocab": 5}}, "model.vocab"),
    ({"model": {"params": 10, "layers": 3}, "parallel": {"pp": 2}}, "model.hidden"),
    ({"model": {"params": 10, "layers": 3, "hidden": 8, "seq": 4}, "parallel": {"pp": 2}}, "parallel.pp"),
    ({"model": dict(TINY, heads=3)}, "model.hidden"),
    ({"model": dict(TINY, arch="bert")}, "model.arch"),
    ({"model": dict(TINY, top_k=2)}, "model.top_k"),
    ({"model": {k: v for k, v in TINY.items() if k != "vocab"}}, "model.vocab"),
    ({"model": dict(TINY, heads=2), "parallel": {"tp": 4}}, "parallel.tp"),
    ({"model": dict(TINY, seq=3), "parallel": {"tp": 2, "sp": True}}, "parallel.sp"),
    ({"model": dict(TINY, experts=3), "parallel": {"ep": 2}}, "parallel.ep"),
    ({"model": dict(TINY, experts=8), "parallel": {"ep": 8}}, "parallel.ep"),
    ({"model": dict(TINY, experts=4), "parallel": {"ep": 2, "dp_mode": "hsdp"}}, "parallel.dp_mode"),
    ({"parallel": {"world": 12, "gpus_per_node": 4, "dp_mode": "hsdp"}, "batch": {"global": 12}}, None),
    ({"parallel": {"world": 12, "gpus_per_node": 12, "dp_mode": "hsdp"}, "batch": {"global": 12}}, None),
    ({"parallel": {"world": 6, "gpus_per_node": 6, "tp": 2, "dp_mode": "hsdp"}, "model": dict(TINY),
      "batch": {"global": 3}}, None),
    ({"batch": {"global": 6}}, "batch.global"),
    ({"batch": {"micro": 0}}, "batch.micro"),
    ({"dtypes": {"params": "int8"}}, "dtypes.params"),
    ({"dtypes": {"grads": 16}}, "dtypes.grads"),
    ({"buckets": {"ddp_mib": 0}}, "buckets.ddp_mib"),
    ({"buckets": {"zero_mib": float("nan")}}, "buckets.zero_mib"),
    ({"buckets": {"fsdp_unit": "block"}}, "buckets.fsdp_unit"),
    ({"overlap": {"dp": 1.5}}, "overlap.dp"),
    ({"overlap": {"tp": -0.1}}, "overlap.tp"),
    ({"overlap": {"xp": 0.1}}, "overlap.xp"),
    ({"parallel": None}, "parallel"),
    ({"model": [1, 2]}, "model"),
    ({"name": "a b"}, "name"),
    ({"description": 5}, "description"),
    ({"runs": []}, "runs"),
])
def test_bad_fields_are_one_line_naming_the_field(sections, field):
    if field is None:  # accepted: checks that neighbouring values are not refused by mistake
        config(**sections)
        return
    assert f"test: {field}" in refused(**sections)


def test_hsdp_needs_node_shards_that_divide_dp():
    # 12 ranks, 8 per node: DP ranks on a node (8) do not divide 12 ... nodes must be whole first
    message = refused(parallel={"world": 12, "gpus_per_node": 8, "dp_mode": "hsdp"}, batch={"global": 12})
    assert "parallel.gpus_per_node" in message
    # 2 nodes of 4, tp 1: shards of 4 divide 8
    config(parallel={"world": 8, "gpus_per_node": 4, "dp_mode": "hsdp"}, batch={"global": 8})
    # tp 3 on nodes of 8: a node holds DP ranks 0, 3 and 6 of the 8, and 3 does not divide 8
    message = refused(model={"hidden": 8, "seq": 4}, batch={"global": 8},
                      parallel={"world": 24, "gpus_per_node": 8, "tp": 3, "dp_mode": "hsdp"})
    assert "parallel.dp_mode: hsdp shards over the 3 data-parallel ranks of a node" in message


def test_not_a_mapping():
    with pytest.raises(InputError, match="a workload is a mapping"):
        parse_workload([1, 2], where="x")


def test_load_from_a_file(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("name: w1\nmodel: {params: 1000}\nbatch: {global: 2, micro: 1}\n"
                 "parallel: {world: 2, gpus_per_node: 2}\n")
    c = load_workload(f)
    assert c.name == "w1" and c.parallel.dp == 2 and c.dtypes.params == "bfloat16"
    f.write_text("model: {params: 1000}\nbatch: {global: 2, micro: 1}\nparallel: {world: 2, gpus_per_node: 2}\n")
    assert load_workload(f).name == "w"  # the file's name


def test_the_suite_readers_limits_hold(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("model: &m {params: 1000}\nbatch: {global: 2, micro: 1}\nparallel: {world: 2, gpus_per_node: 2}\n")
    with pytest.raises(InputError, match="anchors"):
        load_workload(f)
    f.write_text("model: {params: 1000}\nmodel: {params: 2}\n")
    with pytest.raises(InputError, match="given twice"):
        load_workload(f)
    f.write_text("model: {params: [}\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_workload(f)
    f.write_text("x" * (1 << 20))
    with pytest.raises(InputError, match="larger than"):
        load_workload(f)


def test_yes_is_not_a_boolean(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("model: {params: 1000}\nbatch: {global: 2, micro: 1}\n"
                 "parallel: {world: 2, gpus_per_node: 2, sp: yes}\n")
    with pytest.raises(InputError, match=r"parallel\.sp: expected true or false"):
        load_workload(f)


def test_unknown_name_lists_the_bundled_ones():
    with pytest.raises(InputError, match="gpt3_175b_512"):
        find_workload("no-such-workload")
    assert find_workload("moe_ep8") == WORKLOADS_DIR / "moe_ep8.yaml"
    assert bundled_workloads() == ["gpt3_175b_512", "llama7b_ddp_16", "llama7b_fsdp_64", "moe_ep8"]


def test_document_helper_is_valid():
    assert parse_workload(doc(), where="t").model.params == 1_000_000


def test_a_routers_spread_makes_the_experts_all_to_all_uneven():
    def moe(**router):
        return config(model=dict(TINY, experts=4, top_k=2), batch={"global": 4},
                      parallel={"world": 4, "gpus_per_node": 2, "ep": 2}, **router)

    assert moe().router.spread is None
    assert moe(router={"spread": 0.5}).router.spread == 0.5
    assert moe(router={"spread": 0}).router.spread == 0.0
