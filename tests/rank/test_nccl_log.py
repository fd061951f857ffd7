"""--nccl-tuning: NCCL's TUNING log lines parsed, attributed to points, and its file kept small.
(The capture on a real NCCL job is tests/gpu/test_nccl.py.)"""

import os
import subprocess
import sys

import pytest

from commbench.errors import BAD_INPUT
from commbench.rank import nccl_log
from conftest import commbench

# NCCL's own formats (src/enqueue.cc, 2.19 and later; later versions append fields), behind
# the prefix of its debug log (src/debug.cc: "%s:%d:%d [%d] NCCL INFO ")
PREFIX = "gpu-node-3:41177:41177 [0] NCCL INFO "
FORMATS = ["%s: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}",
           "%s: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d} cgaClusterSize %d"]


def line(function, nbytes, algo, proto, fmt=0):
    extra = (0, 31) if fmt == 0 else (0, 31, 4)
    return PREFIX + FORMATS[fmt] % (function, nbytes, algo, proto, *extra)


@pytest.mark.parametrize("fmt", [0, 1])
def test_parse_a_tuning_line(fmt):
    assert nccl_log.parse(line("ReduceScatter", 4096, "PAT", "SIMPLE", fmt)) == ("ReduceScatter", 4096, "PAT", "SIMPLE")
    assert nccl_log.parse(PREFIX + "Init COMPLETE comm 0x55 rank 0 nranks 8") is None
    assert nccl_log.parse(PREFIX + "Channel 00/24 : 0 1 2 3 4 5 6 7") is None


def test_choice_of_a_point():
    point = [line("AllReduce", 1 << 20, "RING", "LL128")] * 5 + [line("AllReduce", 1 << 20, "TREE", "LL")] * 2
    control = [line("AllReduce", 4, "RING", "LL"), line("AllReduce", 24, "TREE", "LL")]  # barrier, host reductions
    assert nccl_log.choice(control + point, "all_reduce", 1 << 20) == "RING/LL128, TREE/LL"
    gathered = [line("AllGather", 1 << 18, "NVLS", "SIMPLE")] * 3 + control
    assert nccl_log.choice(gathered, "all_gather", 1 << 20) == "NVLS/SIMPLE"  # one rank's bytes: any size
    assert nccl_log.choice(control, "reduce_scatter", 1 << 20) == ""
    assert nccl_log.choice(control, "all_reduce", 1 << 20) == ""


@pytest.mark.parametrize("user,subsys,level", [
    ({}, "TUNING", "INFO"),
    ({"NCCL_DEBUG": "WARN"}, "TUNING", "INFO"),
    ({"NCCL_DEBUG": "trace", "NCCL_DEBUG_SUBSYS": "INIT,NET"}, "INIT,NET,TUNING", "TRACE"),
    ({"NCCL_DEBUG_SUBSYS": "ALL"}, "ALL", "INFO"),
    ({"NCCL_DEBUG_SUBSYS": "init,tuning"}, "init,tuning", "INFO"),
    ({"NCCL_DEBUG_SUBSYS": "^INIT,TUNING"}, "^INIT", "INFO"),
    ({"NCCL_DEBUG_SUBSYS": "^TUNING"}, "ALL", "INFO"),
])
def test_rank0_env_adds_tuning_to_the_users_settings(user, subsys, level):
    assert nccl_log.rank0_env(user, "/tmp/x.log") == {"NCCL_DEBUG": level, "NCCL_DEBUG_SUBSYS": subsys,
                                                      "NCCL_DEBUG_FILE": "/tmp/x.log"}


WRITER = """
import sys
f = open(sys.argv[1], "w", buffering=1)  # as NCCL opens it: "w", line-buffered, its own offset
for request in sys.stdin:
    n, tag = request.split()
    for i in range(int(n)):
        f.write(f"{tag} line {i:06d} " + "x" * 80 + "\\n")
    print("written", flush=True)
"""


POINT_BYTES = 20000 * len("p0 line 000000 " + "x" * 80 + "\n")


def test_the_log_is_read_point_by_point_and_stays_small(tmp_path):
    """A process writing the file as NCCL does; each read returns only the new lines, and the
    file holds no more than the lines since the last read."""
    path = str(tmp_path / "nccl.log")
    log = nccl_log.TuningLog(path)
    assert log.read() == []  # nothing logged yet
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        for point in range(4):
            writer.stdin.write(f"20000 p{point}\n")
            writer.stdin.flush()
            assert writer.stdout.readline().strip() == "written"
            written = os.stat(path)
            assert written.st_size == (point + 1) * POINT_BYTES  # the writer's offset, and the file's length,
            assert written.st_blocks * 512 < 1.5 * POINT_BYTES   # but only this point's lines take space
            lines = log.read()
            assert len(lines) == 20000 and all(text.startswith(f"p{point} line ") for text in lines)
            assert lines[0].startswith(f"p{point} line 000000") and lines[-1].startswith(f"p{point} line 019999")
            assert os.stat(path).st_blocks == 0
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    log.close()
    assert not os.path.exists(path)


def test_nccl_warnings_in_the_log_reach_stderr(tmp_path, capsys):
    path = tmp_path / "nccl.log"
    warn = "gpu-node-3:41177:41190 [0] NCCL WARN NET/IB : Got async event : port error"
    path.write_text(line("AllReduce", 8, "RING", "LL") + "\n" + warn + "\n")
    log = nccl_log.TuningLog(str(path))
    assert len(log.read()) == 2
    assert capsys.readouterr().err == warn + "\n"


def test_nccl_tuning_needs_the_nccl_backend(tmp_path):
    proc = commbench("run", "-n", 2, "--backend", "gloo", "--nccl-tuning", "--out", tmp_path / "o")
    assert proc.returncode == BAD_INPUT and not (tmp_path / "o").exists()
    assert proc.stderr.strip().splitlines() == ["commbench: error: --nccl-tuning reads NCCL's log: it needs --backend nccl"]


def test_nccl_tuning_keeps_the_users_log_file(job, tmp_path):
    proc = commbench("run", "-n", 2, "--backend", "nccl", "--device", "cuda", "--nccl-tuning", "--out", tmp_path / "o",
                     env={"NCCL_DEBUG_FILE": str(tmp_path / "mine.%h.%p")})
    assert proc.returncode == BAD_INPUT and not (tmp_path / "o").exists()
    assert proc.stderr.strip().splitlines() == [
        "commbench: error: --nccl-tuning sends rank 0's NCCL log to a file of its own: unset NCCL_DEBUG_FILE"]


def test_only_rank_0_logs_and_only_with_the_flag(monkeypatch):
    from commbench.spec import SweepSpec
    from commbench.machine.topology import RankInfo
    from commbench.rank.worker import _nccl_tuning_log

    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"):
        monkeypatch.delenv(name, raising=False)
    spec = SweepSpec(backends=["nccl"], device="cuda", nccl_tuning=True)
    rank = lambda r: RankInfo(r, 2, r, 2, 0, "h", "torchrun")  # noqa: E731
    assert _nccl_tuning_log(spec, rank(1)) is None and "NCCL_DEBUG" not in os.environ
    spec.nccl_tuning = False
    assert _nccl_tuning_log(spec, rank(0)) is None and "NCCL_DEBUG" not in os.environ
    spec.nccl_tuning = True
    log = _nccl_tuning_log(spec, rank(0))
    try:
        assert os.environ["NCCL_DEBUG"] == "INFO" and os.environ["NCCL_DEBUG_SUBSYS"] == "TUNING"
        assert os.environ["NCCL_DEBUG_FILE"] == log.path and os.path.exists(log.path)
    finally:
        log.close()
    assert not os.path.exists(log.path)
