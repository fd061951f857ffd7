"""Result folders for the trust-boundary tests of folders (issue 20): a folder is data, read like
command-line input by the one loader and by `run --resume`; nothing in it is run unconfirmed
(launcher arguments), a damaged one is one line and exit 2 and is left byte for byte as it was.

The folders are written without launching anything (RunFolder and build_row); where a resume gets
past every check, the launch is replaced by a sentinel (`no_launch`: no job starts). Used by
tests/folder/test_resume.py, tests/folder/test_out_folder.py, tests/folder/test_load.py and
tests/folder/test_load_fuzz.py (import the fixtures `folder` and `no_launch` by name)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import os
from pathlib import Path

import pytest

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT, InputError
from commbench.folder.schema import build_row
from commbench.folder.write import RunFolder
from commbench.spec import SweepSpec

LAUNCHED = "launch reached (test sentinel)"


def six_rows():
    """Six rows: native and ring, three sizes, two nodes (so topo-compare and model fit have work)."""
    for i, (algorithm, size) in enumerate((a, s) for a in ("native", "ring") for s in (8, 1024, 65536)):
        time_us = 5.0 + size / 1e3 * (1.5 if algorithm == "ring" else 1.0)
        yield build_row(run_id="r1", label="lab", point=i, collective="all_reduce", backend="mpi", algorithm=algorithm,
                        device="cpu", dtype="float32", op="sum", in_place=1, world_size=4, nodes=2, ranks_per_node=2,
                        size_bytes=size, count=size // 4, time_us=time_us, time_us_mean=time_us, time_us_min=time_us,
                        time_us_max=time_us * 1.1, time_us_stdev=0.1, samples=3, iterations=3, batch=1, warmup=1,
                        wrong=0, timer="python"), [time_us * 0.9, time_us, time_us * 1.1]


def make_folder(path: Path, launcher_args=(), status="interrupted") -> Path:
    """A run folder as an interrupted run leaves it: run.json with a valid spec, rows, samples in
    Parquet (an earlier session) and CSV (the last one)."""
    spec = SweepSpec(backends=["mpi"], collectives=["all_reduce"], algorithms=["native", "ring"],
                     sizes=[8, 1024, 65536], in_place=[True], nprocs=2, iters=3, out_dir=str(path),
                     run_id="r1").validate()
    folder = RunFolder(path)
    folder.create({"run_id": "r1", "label": "lab", "spec": spec.__dict__, "status": status, "launcher": "mpirun",
                   "launcher_args": list(launcher_args), "launch_host": "elsewhere", "launch_pid": 1,
                   "ranks": [{"hostname": "h1"}], "versions": {"python": "3"}})
    for i, (row, samples) in enumerate(six_rows()):
        folder.add(row, samples)
        if i == 3:
            folder.finalize()
    return path


@pytest.fixture
def folder(tmp_path):
    return make_folder(tmp_path / "run")


@pytest.fixture
def no_launch(monkeypatch):
    """Replace the launch: a resume that passes every check ends in the sentinel line, exit 2."""
    from commbench.run import session

    launched = []

    def sentinel(spec, folder, launcher, commands, launcher_args, on_event, relay):
        launched.append(launcher_args)
        raise InputError(LAUNCHED)

    monkeypatch.setattr(session, "start", sentinel)
    return launched


def files(root: Path) -> dict[str, bytes]:
    """Every file under root, by relative path: its bytes (a link: where it points)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = b"-> " + os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = b"<dir>"
    return out


def meta_of(d: Path) -> dict:
    return json.loads((d / "run.json").read_text())


def set_meta(d: Path, **fields) -> None:
    (d / "run.json").write_text(json.dumps(dict(meta_of(d), **fields)))


def set_spec(d: Path, **fields) -> None:
    meta = meta_of(d)
    set_meta(d, spec=dict(meta["spec"], **fields))


def edit_cell(d: Path, row: int, column: str, value: str, name: str = "results.csv") -> None:
    lines = list(csv.reader(io.StringIO((d / name).read_text(), newline="")))
    lines[row + 1][lines[0].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf).writerows(lines)
    (d / name).write_text(buf.getvalue())


def rejected(d: Path, *args, fragment: str, cmd=("run", "--resume")) -> None:
    """The command refuses d in one line holding fragment, exit 2, and d is left as it was."""
    before = files(d.parent)
    outcome = run_cli(*cmd, d, *args)
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and fragment in outcome.stderr, outcome.stderr
    assert files(d.parent) == before


# --- the readers: report, compare, topo-compare, model fit -------------------------------------------

READERS = (("report", "-o", "{out}/report.html"), ("compare", "{d}"), ("topo-compare", "--csv", "{out}/t.csv"),
           ("model", "fit", "-o", "{out}/model.json"))


def read_with(command, d: Path, out: Path):
    """One reader of d (compare: d against a copy of it, as damaged), its output under out."""
    if command[0] == "compare":
        twin = out / "twin"
        if not twin.exists():
            shutil.copytree(d, twin, symlinks=True)
        command = (command[0], str(twin))
    args = [a.format(out=out, d=d) for a in command]
    cmd, rest = (args[:2], args[2:]) if args[0] == "model" else (args[:1], args[1:])
    return run_cli(*cmd, d, *rest, cwd=out)


def read_all(d: Path, out: Path) -> list:
    return [read_with(command, d, out) for command in READERS]
