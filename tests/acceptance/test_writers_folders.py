"""Hostile inputs of issue 43 for the writers (items 2 and 3), class 12: `run`, `run --resume`,
`sweep` and `ab` write only into a folder of their own and through no link (the contract:
tests/hostile_contract.py, which also finds any file created, removed or changed in the scratch
folder; besides it, the folder's own modification time unchanged where the case writes nothing).

The rules (commbench.folder.lock): a new run goes into a folder that does not exist, is empty,
or holds only what a commbench run that measured nothing leaves; a folder holding anything else (a
run.json that is not commbench's, a samples file, a user's notes, a folder) is not a run's and is
refused before anything is launched or written. A resume refuses a run file (run.json, results.csv,
samples, the ranks' spec, the lock) that is a link; a sweep refuses a run folder or suite.yaml that
is a link. --out itself may be a link to a folder: the user's choice of place."""

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import TINY_SUITE, copy, mkdir, params, remove, resumable, sweep_folder, symlink, write
from commbench.errors import FAILED, OK
from commbench.folder.lock import TEMP_PREFIXES

RUN = "run -n 2 --backend mpi -c all_reduce --sizes 8 --iters 5 --warmup 1 --in-place"
AB = "ab -n 2 -c all_reduce --sizes 64 --iters 5 --env-b COMMBENCH_X=1"
R = "run --resume R"
COMMBENCH_RUN_JSON = '{"run_id": "20260101T000000Z-abcdef", "format_version": 1, "status": "completed"}'


def folder_mtime_kept(rel: str):
    """The folder's modification time unchanged: nothing was created in it and removed again."""
    seen = {}

    def setup(s: Path):
        seen["mtime"] = os.stat(s / rel).st_mtime_ns

    def check(s: Path, out: Outcome) -> list[str]:
        return [] if os.stat(s / rel).st_mtime_ns == seen["mtime"] else [f"{rel}'s modification time changed"]
    return setup, check


def foreign(name, command, *steps, folder="F"):
    setup, check = folder_mtime_kept(folder)
    return case(12, name, command, *steps, setup, checks=(check,))


def samples_link(dst: str, target: str):
    """R's samples (Parquet, or CSV where BASE has no Parquet) replaced by a link to target's."""
    def step(s: Path):
        name = "samples.parquet" if (s / dst / "samples.parquet").exists() else "samples.csv"
        (s / dst / name).unlink()
        (s / dst / name).symlink_to(Path("..") / target / name)
    return step


def held(rel: str):
    """rel's lock file held by another writer (this test process, as a running commbench holds it:
    flock on its own open file), as a step; and the check that lets it go and finds the refusal."""
    fds = []

    def step(s: Path):
        fd = os.open(s / rel / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"4242 otherhost\n")
        fcntl.flock(fd, fcntl.LOCK_EX)
        fds.append(fd)

    def check(s: Path, out: Outcome) -> list[str]:
        for fd in fds:
            os.close(fd)
        said = "is being written by another commbench (pid 4242 on otherhost)" in out.stderr.decode(errors="replace")
        return [] if said else ["the refusal does not name the other writer"]
    return step, check


def writer_busy(name, command, *steps, folder):
    step, check = held(folder)
    return case(12, name, command, *steps, step, checks=(check,))


def full_disk(s: Path):
    """D: a 64 KB tmpfs with 16 KB left (run.json and the ranks' spec fit, the samples do not)."""
    (s / "D").mkdir()
    if os.geteuid() or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", s / "D"],
                                      capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    (s / "D" / "filler").write_bytes(b"\0" * (48 << 10))


def failed_whole(s: Path, out: Outcome) -> list[str]:
    """The run ended `failed` with the reason, no temporary file left; then the tmpfs goes."""
    try:
        meta = json.loads((s / "D" / "X" / "run.json").read_text())
        left = [n for n in os.listdir(s / "D" / "X") if n.startswith(TEMP_PREFIXES)]
        lines = out.stderr.decode(errors="replace").strip().splitlines()
        return ([] if meta["status"] == "failed" and "No space left on device" in meta.get("error", "") else
                [f"run.json says {meta['status']!r}"]) + ([f"temporary files left: {left}"] if left else []) + (
                [] if len(lines) == 1 and "No space left on device" in lines[0] else ["not one line naming the disk"])
    finally:
        subprocess.run(["umount", "-l", s / "D"], check=False)


def link(rel: str, target: str):
    """rel (whether or not it exists) replaced by a link to target."""
    def step(s: Path):
        if os.path.lexists(s / rel):
            (s / rel).unlink()
        (s / rel).symlink_to(target)
    return step


CASES = [
    # a new run into a folder that is not a commbench run: refused, the folder as it was
    foreign("run-out-foreign-run-json", f"{RUN} --out F", write("F/run.json", '{"title": "my notes", "n": 3}\n')),
    foreign("run-out-run-json-not-json", f"{RUN} --out F", write("F/run.json", "just text\n")),
    foreign("run-out-foreign-samples-csv", f"{RUN} --out F", write("F/samples.csv", "run_id,point,iteration,time_us\n")),
    foreign("run-out-foreign-samples-parquet", f"{RUN} --out F", write("F/samples.parquet", b"PAR1\0\0PAR1")),
    foreign("run-out-foreign-results-csv", f"{RUN} --out F", write("F/results.csv", "a,b\n1,2\n")),
    foreign("run-out-notes", f"{RUN} --out F", write("F/notes.txt", "mine\n")),
    foreign("run-out-subfolder", f"{RUN} --out F", mkdir("F/data")),
    foreign("run-out-foreign-lock-file", f"{RUN} --out F", write("F/.lock", "my editor's lock, not commbench's\n")),
    foreign("run-out-run-json-link", f"{RUN} --out F", write("victim.json", COMMBENCH_RUN_JSON),
            mkdir("F"), symlink("F/run.json", "../victim.json")),
    foreign("run-out-commbench-run-json-beside-notes", f"{RUN} --out F", write("F/run.json", COMMBENCH_RUN_JSON),
            write("F/notes.txt", "mine\n")),
    foreign("ab-out-foreign-run-json", f"{AB} --out F", write("F/run.json", '{"title": "my notes"}\n')),
    foreign("ab-out-notes", f"{AB} --out F", write("F/notes.txt", "mine\n")),
    foreign("sweep-out-notes", "sweep tiny.yaml --out S", write("tiny.yaml", TINY_SUITE), write("S/notes.txt", "x\n"),
            folder="S"),
    foreign("sweep-run-folder-foreign", "sweep tiny.yaml --out S", write("tiny.yaml", TINY_SUITE),
            write("S/r1/run.json", '{"title": "mine"}\n'), folder="S/r1"),
    foreign("resume-foreign-run-json", R, write("R/run.json", '{"title": "my notes"}\n'),
            write("R/samples.csv", "a,b\n"), folder="R"),
    # a resume through a link: refused, the link's target as it was
    case(12, "resume-samples-link-to-another-run", R, *resumable(), copy("BASE", "OTHER"), samples_link("R", "OTHER")),
    case(12, "resume-results-link-outside", R, *resumable(), write("victim.csv", "mine\n"), remove("R/results.csv"),
         symlink("R/results.csv", "../victim.csv")),
    case(12, "resume-run-json-link-to-another-run", R, *resumable(), copy("BASE", "OTHER"), remove("R/run.json"),
         symlink("R/run.json", "../OTHER/run.json")),
    case(12, "resume-results-link-inside", R, *resumable(), remove("R/results.csv"),
         symlink("R/results.csv", "run.json")),
    case(12, "resume-spec-json-link-outside", R, *resumable(), write("victim.txt", "mine\n"),
         link("R/.spec.json", "../victim.txt")),
    case(12, "resume-lock-link-outside", R, *resumable(), write("victim.txt", "mine\n"), link("R/.lock", "../victim.txt")),
    case(12, "sweep-resume-run-folder-link", "sweep tiny.yaml --out S --resume", *sweep_folder(),
         *resumable("ELSEWHERE"), remove("S/r1"), symlink("S/r1", "../ELSEWHERE")),
    case(12, "sweep-resume-suite-yaml-link", "sweep tiny.yaml --out S --resume", *sweep_folder(),
         write("victim.yaml", TINY_SUITE), remove("S/suite.yaml"), symlink("S/suite.yaml", "../victim.yaml")),
    # one writer per folder: a folder another commbench is writing (its lock held) is refused, unchanged
    writer_busy("resume-while-another-writes", R, *resumable(), folder="R"),
    writer_busy("run-out-while-another-writes", f"{RUN} --out F", mkdir("F"), folder="F"),
    writer_busy("sweep-resume-while-another-writes", "sweep tiny.yaml --out S --resume", *sweep_folder(), folder="S"),
    # every exit path leaves the folder whole: a terminal that takes ASCII only, a disk that fills
    case(12, "run-output-encoding-ascii", [*RUN.split(), "--label", "é·€", "--out", "X"], expect=(OK,), outputs=("X",),
         env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C", "LANG": "C"}, note="valid: what ASCII cannot take is escaped"),
    case(12, "run-out-full-disk", f"{RUN.replace('--sizes 8', '--sizes 8,16,32,64,128')} --out D/X", full_disk,
         expect=(FAILED,), outputs=("D/X",), checks=(failed_whole,), note="a full disk fails the run (exit 1), whole"),
    # valid: --out a link to an empty folder (the user's choice of place); what a failed run leaves
    case(12, "run-out-link-to-empty-folder", f"{RUN} --out L", mkdir("D"), symlink("L", "D"), expect=(OK,),
         outputs=("D",), note="valid: --out may be a link to a folder"),
    case(12, "run-out-folder-of-a-run-that-measured-nothing", f"{RUN} --out F", write("F/run.json", COMMBENCH_RUN_JSON),
         write("F/.spec.json", "{}"), write("F/.lock", "123 elsewhere\n"), expect=(OK,), outputs=("F",),
         note="valid: a commbench run that measured nothing is replaced by the new one"),
]


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_writers_folders_of_run_sweep_and_ab(c, tmp_path, job):
    meets_contract(c, tmp_path)
