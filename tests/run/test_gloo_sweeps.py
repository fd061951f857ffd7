"""Real torch.distributed gloo jobs through torchrun and the local launcher."""

import pytest

from conftest import commbench, load_run
from sweep_checks import check_sweep
from commbench.errors import OK

pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int8", "uint8"]
OPS = ["sum", "prod", "min", "max", "avg"]
SIZES = ["16", "1028", "65548"]
FLOATS = {"float32", "float64", "float16", "bfloat16"}
# the local launcher starts the same ranks as torchrun-3 (only their environment differs), so it
# runs the launch path on part of the dtype x op matrix that torchrun runs whole
LOCAL_DTYPES, LOCAL_OPS = ["float32", "bfloat16", "int8"], ["sum", "prod", "avg"]
# gloo's arithmetic for every dtype is checked at 2 and 3 ranks; at 4, one dtype per element size
WIDTHS = ["float64", "float32", "bfloat16", "int8"]


@pytest.mark.parametrize("world,launcher,dtypes,ops", [pytest.param(2, "torchrun", DTYPES, OPS, marks=pytest.mark.smoke),
                                                       (3, "torchrun", DTYPES, OPS), (4, "torchrun", WIDTHS, OPS),
                                                       pytest.param(3, "local", LOCAL_DTYPES, LOCAL_OPS, marks=pytest.mark.smoke)],
                         ids=["2-torchrun", "3-torchrun", "4-torchrun", "3-local"])
def test_gloo_sweep_exact(job, tmp_path, world, launcher, dtypes, ops):
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", "gloo", "--launcher", launcher, "--sizes", ",".join(SIZES),
              "-d", ",".join(dtypes), "-o", ",".join(ops), "--both", "--iters", 2, "-w", 1,
              "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    skipped = meta["skipped"]
    assert meta["planned_points"] == len(rows) + len(skipped)
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(skipped))
    reasons = {s["reason"].split(" (")[0] for s in skipped}
    allowed = {"torch.distributed.all_reduce works in place only",
               "avg of integers truncates; commbench checks avg on floating-point types only"}
    assert all(r in allowed or r.endswith("less than one element per rank") for r in reasons), reasons
    assert set(rows[rows.op == "avg"].dtype) == FLOATS & set(dtypes)
    assert set(rows.dtype) == set(dtypes) and set(rows.op.fillna("none")) == set(ops) | {"none"}
    assert set(rows.collective) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert meta["versions"]["torch"]
