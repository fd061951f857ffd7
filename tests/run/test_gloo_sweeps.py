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


def _listening() -> set[tuple[str, str, str]]:
    """(family, local address in /proc's hex, port) of every TCP socket listening on this machine."""
    found = set()
    for family in ("tcp", "tcp6"):
        try:
            lines = open(f"/proc/net/{family}").read().splitlines()[1:]
        except OSError:
            continue
        found |= {(family, *f[1].split(":")) for f in (line.split() for line in lines) if f[3] == "0A"}
    return found


def _loopback(family: str, address: str, port: str = "") -> bool:
    if family == "tcp":
        return address.endswith("7F")  # 127.x.x.x, little-endian
    return address == "00000000000000000000000001000000" or (  # ::1, or ::ffff:127.x.x.x
        address.startswith("0000000000000000FFFF0000") and address.endswith("7F"))


def test_a_local_gloo_run_listens_on_loopback_only(job, tmp_path):
    """Issue 67, M7: the ranks of a local launch meet through a FileStore (no TCP store on every interface) and
    gloo's pairs bind loopback (GLOO_SOCKET_IFNAME=lo). Every socket that listens while the run does is loopback's."""
    import subprocess
    import sys
    import time

    before = _listening()
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "-n", "2", "--backend", "gloo", "-c", "all_reduce",
                             "--sizes", "8,16,32", "--in-place", "--min-time", "1", "--out", str(tmp_path / "r"),
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = set()
    while proc.poll() is None:
        seen |= _listening() - before
        time.sleep(0.1)
    assert proc.wait() == OK, proc.stderr.read()
    assert seen, "no listening socket seen: the poll missed the run"  # gloo's pairs: loopback's
    assert all(_loopback(*s) for s in seen), sorted(seen)
